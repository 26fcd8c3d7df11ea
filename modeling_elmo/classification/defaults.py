"""`elmo-train-classifier`'s defaults: the head a new classifier gets and the training recipe, chosen on SST-2 and
SST-5 dev (benchmarks/classifier_defaults_study.py, results in benchmarks/RESULTS-classification.md; what to change
for other data sizes: docs/train-classifier.md, "Defaults").

The recipe is declared once, importing nothing heavy (`ClassifierRecipe`: the command's `--help` reads it before
Transformers is imported); `ClassifierTrainingArguments`, `TrainingArguments` with those defaults, is built from it
on first use (this module's `__getattr__`), under its own name here, so that pickled arguments load again."""

import dataclasses
from dataclasses import dataclass, field
from importlib.metadata import version

# The head fields of a new classifier (one trained from a biLM folder, not from a classifier trained before) that the
# command line does not give. A biLM folder stores the config's own values, which are the NER head's.
NEW_HEAD_DEFAULTS = {
    "classifier_pooling": "mean",
    "classifier_dropout": 0.0,
    "classifier_batch_norm": True,
    "classifier_concat_layers": True,
}

_TRANSFORMERS_5 = int(version("transformers").split(".")[0]) >= 5


def new_head_defaults(classifier_head: str) -> dict[str, object]:
    """`NEW_HEAD_DEFAULTS` for a new head of the kind `classifier_head`: the pooled layers are concatenated for the
    linear head only (the BiLSTM reads one mixed vector per word)."""
    return {**NEW_HEAD_DEFAULTS, "classifier_concat_layers": classifier_head == "linear"}


@dataclass
class ClassifierRecipe:
    """The `TrainingArguments` fields whose defaults the classifier changes (the Trainer's own suit fine-tuning a
    transformer: a learning rate of 5e-5 leaves a frozen-biLM head at chance). They apply to `--head_fit trainer`;
    the L-BFGS fit (`head_fit`) has no learning rate, epochs or batches."""

    learning_rate: float = field(default=3e-3, metadata={"help": "AdamW's peak learning rate (--head_fit trainer)"})
    num_train_epochs: float = field(default=20.0, metadata={"help": "training epochs (--head_fit trainer)"})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW's weight decay (not on biases)"})
    if _TRANSFORMERS_5:  # 5.x reads a fraction of all steps from `warmup_steps` and has no `warmup_ratio`
        warmup_steps: float = field(
            default=0.1, metadata={"help": "linear warm-up: steps (an integer), or a fraction of all steps in [0, 1)"}
        )
    else:
        warmup_ratio: float = field(default=0.1, metadata={"help": "linear warm-up: a fraction of all steps"})
    per_device_train_batch_size: int = field(default=64, metadata={"help": "training batch size per device"})


def _classifier_training_arguments() -> type:
    from transformers import TrainingArguments

    fields = [
        (item.name, item.type, field(default=item.default, metadata=item.metadata))
        for item in dataclasses.fields(ClassifierRecipe)
    ]
    built = dataclasses.make_dataclass("ClassifierTrainingArguments", fields, bases=(TrainingArguments,))
    built.__module__ = __name__
    built.__doc__ = "`TrainingArguments` with the defaults of `ClassifierRecipe`."
    return built


def __getattr__(name: str) -> type:
    """`ClassifierTrainingArguments`, built on first use (it imports Transformers)."""
    if name != "ClassifierTrainingArguments":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = _classifier_training_arguments()
    return globals()[name]


__all__ = [
    "NEW_HEAD_DEFAULTS",
    "ClassifierRecipe",
    "new_head_defaults",
]  # and ClassifierTrainingArguments (`__getattr__`)
