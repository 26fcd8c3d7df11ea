"""The command line of a Trainer command (`elmo-train-ner`, `elmo-train-classifier`, `elmo-pretrain`), declared once
and parsed twice: at once by a parser that imports nothing heavy (`trainer_flags`: `--help`, unknown flags, values of
the wrong type or out of range), then by `HfArgumentParser` into the dataclasses the command's work uses."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..foundation.model_location import NO_SUCH_FOLDER, missing_model_folder
from .arguments import (
    parse_trainer_arguments,
    replace_help,
    trainer_argument_parser,
    training_arguments_problem,
)
from .trainer_flags import (
    LightTrainerParser,
    TrainerSourceError,
    dataclass_flags,
    light_trainer_parser,
    replace_flags,
    training_argument_flags,
)


@dataclass(frozen=True)
class TrainerCommandLine:
    """What a Trainer command accepts: its own dataclasses (first the one with `model_name_or_path`), the
    `TrainingArguments` class it parses into (`TrainingArguments` itself, or a subclass that changes defaults, named
    by `training_arguments`: "module:attribute", imported when the work starts), the fields that subclass redeclares
    (`recipe`, a plain dataclass of the same fields, for the light parser), help texts for flags whose defaults the
    command sets itself (`helps`), and parser defaults (`defaults`)."""

    prog: str
    description: str
    own_arguments: tuple[type, ...]
    training_arguments: str = "transformers:TrainingArguments"
    recipe: type | None = None
    epilog: str | None = None
    helps: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def _finish(self, parser):
        parser.set_defaults(**self.defaults)
        replace_help(parser, self.helps)
        return parser

    def light_parser(self) -> LightTrainerParser:
        """The parser of `--help` and argument errors, built without importing Transformers."""
        training = training_argument_flags()
        if self.recipe is not None:
            training = replace_flags(training, {spec.name: spec for spec in dataclass_flags(self.recipe)})
        groups = [dataclass_flags(own) for own in self.own_arguments] + [training]
        return self._finish(light_trainer_parser(groups, self.prog, self.description, self.epilog))

    def training_arguments_class(self) -> type:
        """The `TrainingArguments` class (imports Transformers)."""
        import importlib

        module, name = self.training_arguments.split(":")
        return getattr(importlib.import_module(module), name)

    def parser(self):
        """The `HfArgumentParser` over the command's dataclasses and its `TrainingArguments` (imports Transformers)."""
        dataclass_types = (*self.own_arguments, self.training_arguments_class())
        return self._finish(trainer_argument_parser(dataclass_types, self.prog, self.description, self.epilog))

    def check(self, argv: Sequence[str]) -> None:
        """Answer `--help`, and stop with one line (exit status 2) on an unknown flag, a value of the wrong type, a
        `TrainingArguments` value out of range or a model folder that does not exist: before Transformers is
        imported. Where the installed Transformers' source cannot be read so, this leaves everything to `parse`."""
        try:
            parser = self.light_parser()
        except TrainerSourceError:
            return
        namespace, unknown = parser.parse_known_args(list(argv))
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        problem = training_arguments_problem(namespace)
        if problem:
            parser.error(problem)
        model = getattr(namespace, "model_name_or_path", None)
        if model is not None and missing_model_folder(model):
            parser.error(f"--model_name_or_path {model}: {NO_SUCH_FOLDER}")

    def parse(self, argv: Sequence[str]) -> tuple[Any, ...]:
        """The command line as the command's dataclasses and its `TrainingArguments`; an unknown flag or a bad value
        stops with one line, exit status 2."""
        parser = self.parser()
        parsed = parse_trainer_arguments(parser, argv)
        problem = training_arguments_problem(parsed[-1])
        if problem:
            parser.error(problem)
        return parsed
