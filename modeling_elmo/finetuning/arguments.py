"""The model flags the fine-tuning commands share (`elmo-train-ner`, `elmo-train-classifier`), importing nothing
heavy: the commands parse them before Transformers is imported (`modeling_elmo.commands.trainer_command`)."""

from dataclasses import dataclass, field, fields

KEEPS_THE_MODEL_VALUE = " (default: keeps the model folder's value)"


@dataclass
class HeadArguments:
    """The model flags of both fine-tuning commands: the model to start from and the `ElmoConfig` fields of the head
    (a flag left out, `None`, keeps the model folder's value). Each command adds the fields of its own head."""

    model_name_or_path: str = field(
        metadata={"help": "an ELMo folder (elmo-convert, elmo-pretrain) or a model this command fine-tuned"}
    )
    classifier_head: str | None = field(
        default=None, metadata={"help": "'linear' or 'bilstm' (a BiLSTM first)" + KEEPS_THE_MODEL_VALUE}
    )
    freeze_elmo: bool | None = field(
        default=None,
        metadata={"help": "keep the biLM fixed (default: keeps the model folder's value, True for a biLM folder)"},
    )
    tagger_hidden_size: int | None = field(
        default=None, metadata={"help": "BiLSTM size per direction" + KEEPS_THE_MODEL_VALUE}
    )
    tagger_num_layers: int | None = field(default=None, metadata={"help": "BiLSTM layers" + KEEPS_THE_MODEL_VALUE})
    classifier_dropout: float | None = field(
        default=None, metadata={"help": "dropout of the head" + KEEPS_THE_MODEL_VALUE}
    )
    scalar_mix_l2_coef: float | None = field(
        default=None, metadata={"help": "L2 penalty on the scalar-mix weights" + KEEPS_THE_MODEL_VALUE}
    )
    scalar_mix_layer_norm: bool | None = field(
        default=None, metadata={"help": "layer-normalise biLM layers in the mix" + KEEPS_THE_MODEL_VALUE}
    )

    def config_overrides(self) -> dict[str, object]:
        """The `ElmoConfig` fields given on the command line."""
        return {
            name: value
            for name in (item.name for item in fields(self) if item.name != "model_name_or_path")
            if (value := getattr(self, name)) is not None
        }


@dataclass
class FineTuningRunArguments:
    """The data flags both fine-tuning commands share: the frozen-biLM activation cache and the training-time
    budget. Each command's data arguments add its own files and limits."""

    elmo_cache: bool = field(default=False, metadata={"help": "cache frozen-biLM activations per sentence"})
    elmo_cache_dir: str | None = field(default=None, metadata={"help": "persist the activation cache here"})
    time_budget_minutes: float | None = field(
        default=None,
        metadata={"help": "stop training (then evaluate) once this much training time has passed (default: no limit)"},
    )
