"""The command line of `elmo-pretrain`: its own flags and every `TrainingArguments` flag, declared importing nothing
heavy (see `modeling_elmo.commands.trainer_command`); `elmo-pretrain build-vocab` has its own (`build_vocab`)."""

from dataclasses import dataclass, field

from ..commands.arguments import subcommands_epilog
from ..commands.trainer_command import TrainerCommandLine

PROG = "elmo-pretrain"
DEFAULT_LEARNING_RATE = 1e-3


@dataclass
class PretrainingArguments:
    """The arguments of `elmo-pretrain` beyond `TrainingArguments`."""

    options: str = field(metadata={"help": "bilm-tf's training options JSON (char_cnn, lstm, batch_size, ...)."})
    vocab_file: str = field(metadata={"help": "Vocabulary, one token per line: <S>, </S>, <UNK>, then by frequency."})
    train_files: list[str] | None = field(
        default=None,
        metadata={
            "help": "Training shards (globs, '**' included; quote them): one tokenized sentence per line. Required "
            "unless --do_train False."
        },
    )
    eval_files: list[str] | None = field(
        default=None, metadata={"help": "Held-out shards for the sentence-level perplexity (--do_eval, eval_steps)."}
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Continue from a saved ElmoModel (e.g. a converted original: the softmax starts fresh) or "
            "ElmoForPreTraining folder (the softmax too, if its vocab.txt is the same)."
        },
    )
    softmax_file: str | None = field(
        default=None, metadata={"help": "bilm-tf softmax.hdf5 (W, b) to start the softmax from."}
    )
    softmax_warmup_steps: int | None = field(
        default=None,
        metadata={
            "help": "Optimizer steps during which only the softmax learns (the biLM's gradients are dropped). "
            "Default: min(1000, 10%% of the steps) when the softmax starts fresh on a pretrained biLM, else 0."
        },
    )
    unroll_steps: int | None = field(default=None, metadata={"help": "Window length (default: options.json)."})
    dropout: float | None = field(default=None, metadata={"help": "Dropout (default: options.json)."})
    n_negative_samples_batch: int | None = field(
        default=None, metadata={"help": "Sampled-softmax negatives per batch and direction (default: options.json)."}
    )
    full_softmax: bool = field(default=False, metadata={"help": "Train with the full softmax (small vocabularies)."})
    eval_batch_sentences: int = field(default=32, metadata={"help": "Sentences per batch of the evaluation."})


# The help of the Trainer flags whose default this command sets (see `options_training_defaults`)
COMMAND_DEFAULTS_HELP = {
    "--output_dir": "The folder the trained model is written to (required): new or empty, or the folder of the run "
    "resumed with --resume_from_checkpoint.",
    "--do_train": "Train (default: True, a pretraining command trains; --do_train False evaluates a saved model).",
    "--per_device_train_batch_size": "Rows of the stream batches per process (default: options.json's batch_size).",
    "--num_train_epochs": "Passes over the corpus (default: options.json's n_epochs).",
    "--max_grad_norm": "Gradient clipping of the mean loss (default: options.json's all_clip_norm_val / unroll_steps, "
    "bilm-tf's clipping of loss * unroll_steps; 0: no clipping).",
    "--learning_rate": f"AdamW's learning rate (default: {DEFAULT_LEARNING_RATE}).",
    "--logging_steps": "Log the loss every this many steps (below 1: a fraction of the run; default: 50).",
}


COMMAND_LINE = TrainerCommandLine(
    prog=PROG,
    description="Train an ELMo biLM with bilm-tf's recipe on the Transformers Trainer. The flags of options.json "
    "(batch_size, n_epochs, all_clip_norm_val, unroll_steps, dropout, n_negative_samples_batch) are defaults; a flag "
    "given here wins.",
    own_arguments=(PretrainingArguments,),
    epilog=subcommands_epilog(PROG, {"build-vocab": "count a corpus's words into a vocabulary file"}),
    helps=COMMAND_DEFAULTS_HELP,
    defaults={"do_train": None},  # absent: train (a pretraining command trains); `--do_train False`: do not
)


def build_parser():
    """The parser of `elmo-pretrain`: its own flags, every `TrainingArguments` flag, and the `build-vocab`
    subcommand in the help (imports Transformers; `COMMAND_LINE.light_parser()` does not)."""
    return COMMAND_LINE.parser()
