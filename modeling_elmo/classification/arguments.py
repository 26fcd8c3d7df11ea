"""The command line of `elmo-train-classifier`: its model and data flags, the classifier's recipe and every
`TrainingArguments` flag, declared importing nothing heavy (see `modeling_elmo.commands.trainer_command`)."""

from dataclasses import dataclass, field
from typing import Literal

from ..commands.arguments import subcommands_epilog
from ..commands.trainer_command import TrainerCommandLine
from ..finetuning.arguments import KEEPS_THE_MODEL_VALUE, FineTuningRunArguments, HeadArguments
from .defaults import ClassifierRecipe

PROG = "elmo-train-classifier"
HeadFit = Literal["lbfgs", "trainer"]


@dataclass
class ModelArguments(HeadArguments):
    classifier_pooling: str | None = field(
        default=None, metadata={"help": "'mean', 'max' or 'mean_max' (a new head: mean)" + KEEPS_THE_MODEL_VALUE}
    )
    classifier_concat_layers: bool | None = field(
        default=None,
        metadata={
            "help": "pool each biLM layer on its own and concatenate them, instead of the scalar mix (linear head "
            "only; a new linear head: True)" + KEEPS_THE_MODEL_VALUE
        },
    )
    classifier_batch_norm: bool | None = field(
        default=None,
        metadata={
            "help": "standardise the pooled features before the linear layer (a new head: True)"
            + KEEPS_THE_MODEL_VALUE
        },
    )


@dataclass
class DataArguments(FineTuningRunArguments):
    train_file: str | None = field(default=None, metadata={"help": ".csv, .json or .jsonl (needed by --do_train)"})
    validation_file: str | None = field(default=None, metadata={"help": "needed by --do_eval"})
    test_file: str | None = field(default=None, metadata={"help": "needed by --do_predict; labels optional"})
    text_column_names: str = field(
        default="sentence", metadata={"help": "one text column, or two separated by a comma (a sentence pair)"}
    )
    label_column_name: str = field(default="label", metadata={"help": "the label column"})
    regression: bool | None = field(
        default=None, metadata={"help": "numeric targets (default: when the label column holds floats)"}
    )
    max_seq_length: int | None = field(
        default=None, metadata={"help": "truncate each text to this many words (default: no truncation)"}
    )
    shuffle_train_dataset: bool = field(
        default=False, metadata={"help": "shuffle the training records (with --seed) before --max_train_samples"}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "train on the first N records only (default: all)"}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "evaluate on the first N records only (default: all)"}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "predict the first N test records only (default: all)"}
    )
    head_fit: HeadFit | None = field(
        default=None,
        metadata={
            "help": "how the head is trained: 'lbfgs', a logistic regression fitted by L-BFGS on the pooled layers "
            "computed once, its L2 strength chosen on the validation split (the Trainer's optimisation flags "
            "unused), or 'trainer', the Trainer's AdamW (default: lbfgs for a frozen biLM and a linear head on the "
            "concatenated layers with batch norm and no dropout, classifying, as a new head has; else trainer)"
        },
    )


COMMAND_LINE = TrainerCommandLine(
    prog=PROG,
    description="Sentence or sentence-pair classification (or regression) with ELMo and the Transformers Trainer, "
    "the way Transformers' run_classification.py works.",
    own_arguments=(ModelArguments, DataArguments),
    training_arguments="modeling_elmo.classification.defaults:ClassifierTrainingArguments",
    recipe=ClassifierRecipe,
    epilog=subcommands_epilog(PROG, {"prepare-sst": "write the Stanford Sentiment Treebank as JSON lines files"}),
)


def build_parser():
    """The parser of `elmo-train-classifier`: its model and data flags, every `TrainingArguments` flag, and the
    `prepare-sst` subcommand in the help (imports Transformers; `COMMAND_LINE.light_parser()` does not)."""
    return COMMAND_LINE.parser()
