"""Command-line arguments of the `elmo-*` commands: help that shows everything a command accepts, one-line errors,
the Trainer commands' flags (`HfArgumentParser` over their dataclasses and `TrainingArguments`) checked before any
work (a model argument's own rules are the library's: `foundation.model_location`).

This module imports only the standard library at import time: Transformers (and with it torch) is imported by
`trainer_argument_parser`, so a command's own flags can be checked before that cost.
"""

import argparse
import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from ..foundation.errors import one_line


class DefaultsSayWhatHappens(argparse.ArgumentDefaultsHelpFormatter):
    """Shows `(default: X)` after a flag's help, except where the default is None or the help says itself what the
    default does (it mentions 'default')."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or "default" in (action.help or "").lower():
            return action.help or ""
        return super()._get_help_string(action)


def subcommands_epilog(prog: str, subcommands: dict[str, str]) -> str:
    """The `--help` paragraph that lists a command's subcommands (`{name: what it does}`)."""
    listed = "; ".join(f"'{prog} {name}': {what}" for name, what in subcommands.items())
    return f"subcommands (each has its own --help): {listed}."


class OneLineErrors:
    """Argument errors as one line `PROG: error: MESSAGE (see PROG --help)` and exit status 2, without argparse's
    usage block (a Trainer command's usage spans a hundred lines)."""

    prog: str

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def trainer_argument_parser(dataclass_types: Sequence[type], prog: str, description: str, epilog: str | None = None):
    """An `HfArgumentParser` over `dataclass_types` (the command's own and `TrainingArguments`) with one-line errors
    and defaults that say what happens."""
    from transformers import HfArgumentParser

    class TrainerCommandParser(OneLineErrors, HfArgumentParser):
        pass

    return TrainerCommandParser(
        dataclass_types, prog=prog, description=description, epilog=epilog, formatter_class=DefaultsSayWhatHappens
    )


def parse_trainer_arguments(parser, argv: Sequence[str]) -> tuple[Any, ...]:
    """The dataclasses of `parser` (see `trainer_argument_parser`) filled from `argv`; an unknown flag or a value the
    dataclasses refuse (`TrainingArguments.__post_init__`) is a one-line argument error (exit 2)."""
    try:
        *outputs, unknown = parser.parse_args_into_dataclasses(list(argv), return_remaining_strings=True)
    except ValueError as error:
        parser.error(one_line(error, first=True))
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return tuple(outputs)


_SEED_RANGE = (0, 2**32 - 1)  # what numpy's (and so `set_seed`'s) generators accept


def _integer_at_least(minimum: int):
    return lambda value: value >= minimum, f"must be an integer >= {minimum}"


_POSITIVE = (lambda value: math.isfinite(value) and value > 0, "must be a positive number")
_NON_NEGATIVE = (lambda value: math.isfinite(value) and value >= 0, "must be a finite number >= 0")
_FRACTION = (lambda value: 0 <= value < 1, "must be in [0, 1)")
_STEPS = (_POSITIVE[0], "must be a positive number (below 1: a fraction of the run)")
_SEED = (lambda value: _SEED_RANGE[0] <= value <= _SEED_RANGE[1], f"must be an integer from 0 to {_SEED_RANGE[1]}")

# `TrainingArguments` fields the Trainer accepts (or takes for something else) but that would fail later with a
# traceback, or train nothing or garbage silently: (field, check, what the message says it must be)
TRAINING_ARGUMENT_RULES = [
    ("per_device_train_batch_size", *_integer_at_least(1)),
    ("per_device_eval_batch_size", *_integer_at_least(1)),
    ("gradient_accumulation_steps", *_integer_at_least(1)),
    ("learning_rate", *_POSITIVE),
    ("max_grad_norm", lambda value: value >= 0, "must be >= 0 (0: no clipping)"),  # NaN: "no clipping" to the Trainer
    ("warmup_steps", *_NON_NEGATIVE),
    ("weight_decay", *_NON_NEGATIVE),
    ("adam_beta1", *_FRACTION),
    ("adam_beta2", *_FRACTION),
    ("adam_epsilon", *_NON_NEGATIVE),
    ("label_smoothing_factor", *_FRACTION),
    ("logging_steps", *_STEPS),
    ("eval_steps", *_STEPS),
    ("save_steps", *_STEPS),
    ("dataloader_num_workers", *_integer_at_least(0)),
    ("seed", *_SEED),
    ("data_seed", *_SEED),
]


def training_arguments_problem(training_args) -> str | None:
    """The first `TrainingArguments` value out of range (see `TRAINING_ARGUMENT_RULES`), as a message naming the
    flag, or None."""
    if training_args.max_steps <= 0 and not (
        math.isfinite(training_args.num_train_epochs) and training_args.num_train_epochs > 0
    ):
        return f"--num_train_epochs must be a positive number, got {training_args.num_train_epochs}."
    for name, check, rule in TRAINING_ARGUMENT_RULES:
        value = getattr(training_args, name, None)
        if value is not None and not check(value):
            return f"--{name} {rule}, got {value}."
    return None


def replace_help(parser: argparse.ArgumentParser, helps: dict[str, str]) -> None:
    """Give the flags `helps` names (`{'--flag': help}`) the command's own help text (a Trainer flag whose default
    the command sets, for example)."""
    for action in parser._actions:
        for flag in action.option_strings:
            if flag in helps:
                action.help = helps[flag]


def given(argv: Iterable[str], flag: str) -> bool:
    """Whether `flag` (`--some_flag`, or its `--some-flag` spelling) is on the command line."""
    spellings = (flag, "--" + flag[2:].replace("_", "-"))
    return any(argument.split("=", 1)[0] in spellings for argument in argv)
