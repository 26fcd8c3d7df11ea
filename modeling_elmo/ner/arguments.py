"""The command line of `elmo-train-ner`: its model and data flags and every `TrainingArguments` flag, declared
importing nothing heavy (see `modeling_elmo.commands.trainer_command`)."""

from dataclasses import dataclass, field

from ..commands.trainer_command import TrainerCommandLine
from ..finetuning.arguments import KEEPS_THE_MODEL_VALUE, FineTuningRunArguments, HeadArguments

PROG = "elmo-train-ner"


@dataclass
class ModelArguments(HeadArguments):
    use_crf: bool | None = field(default=None, metadata={"help": "top the head with a CRF" + KEEPS_THE_MODEL_VALUE})


@dataclass
class DataArguments(FineTuningRunArguments):
    data_dir: str | None = field(
        default=None, metadata={"help": "folder with train.txt, dev.txt, test.txt (each used when present)"}
    )
    train_file: str | None = field(default=None, metadata={"help": "CoNLL train file (default: DATA_DIR/train.txt)"})
    validation_file: str | None = field(default=None, metadata={"help": "CoNLL dev file (default: DATA_DIR/dev.txt)"})
    test_file: str | None = field(default=None, metadata={"help": "CoNLL test file (default: DATA_DIR/test.txt)"})
    max_length: int | None = field(
        default=None, metadata={"help": "truncate sentences to this many words (default: no truncation)"}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "train on the first N sentences only (default: all)"}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "evaluate on the first N dev sentences only (default: all)"}
    )


COMMAND_LINE = TrainerCommandLine(
    prog=PROG,
    description="Fine-tune ELMo for NER on CoNLL-format files with the Transformers Trainer.",
    own_arguments=(ModelArguments, DataArguments),
)


def build_parser():
    """The parser of `elmo-train-ner`: its model and data flags and every `TrainingArguments` flag (imports
    Transformers; `COMMAND_LINE.light_parser()` does not)."""
    return COMMAND_LINE.parser()
