"""The Trainer commands' flags without importing Transformers: `TrainingArguments`' fields read from the installed
`transformers/training_args.py` (its syntax tree, not its execution), and an `argparse` parser over them and the
command's own dataclasses that follows `HfArgumentParser`'s rules (`--flag` and `--flag-name`, bool flags that take
an optional value and their `--no_flag` complement, `nargs="+"` lists, `Literal` choices).

Importing `TrainingArguments` imports torch (about 2 s); reading the source takes a few milliseconds. This parser
answers `--help` and catches unknown flags, values of the wrong type and out-of-range values at once; the command's
work then parses the same command line with `HfArgumentParser` (Enum choices, such as `--eval_strategy`, are checked
there). `tests/commands/test_trainer_flags.py` compares the two parsers flag by flag under each Transformers version
CI runs.
"""

import argparse
import ast
import dataclasses
import importlib.util
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .arguments import DefaultsSayWhatHappens, OneLineErrors

_SIMPLE_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
_EMPTY_FACTORIES = {"list": list, "dict": dict}  # `default_factory=list`: the default is a new empty list


class TrainerSourceError(RuntimeError):
    """The installed Transformers' `TrainingArguments` source could not be read as this module expects."""


@dataclass(frozen=True)
class FlagSpec:
    """One dataclass field as a command-line flag: its name, the union members of its type (`("int", "None")`),
    its default (`dataclasses.MISSING` when required; `default_factory`'s value, or `dataclasses.MISSING` for a list
    without a factory), its `Literal` choices if any, and its metadata (`help`, and any `argparse` keyword the field
    passes to `HfArgumentParser`, such as `nargs`)."""

    name: str
    members: tuple[str, ...]
    default: Any
    choices: tuple[Any, ...] | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    factory: bool = False  # the default comes from `default_factory`


class SourceDefault:
    """A default that is not a literal in the source (`default_factory=...`, an expression): shown as its text."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def training_args_source() -> Path:
    """The installed `transformers/training_args.py`, found without importing Transformers."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise TrainerSourceError("transformers is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "training_args.py"


def _union_members(annotation: ast.expr) -> tuple[tuple[str, ...], tuple[Any, ...] | None]:
    """The members of a type annotation as source texts (`Optional[X]` and `Union[...]` unfolded, in order), and the
    values of a `Literal[...]` member."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, left_choices = _union_members(annotation.left)
        right, right_choices = _union_members(annotation.right)
        return left + right, left_choices or right_choices
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value).rsplit(".", 1)[-1]
        inner = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if outer == "Optional":
            members, choices = _union_members(inner[0])
            return members + ("None",), choices
        if outer == "Union":
            unfolded = [_union_members(element) for element in inner]
            choices = next((found for _, found in unfolded if found), None)
            return tuple(member for members, _ in unfolded for member in members), choices
        if outer == "Literal":
            return ("Literal",), tuple(ast.literal_eval(element) for element in inner)
    text = ast.unparse(annotation)
    return ("None" if text == "NoneType" else text,), None


def _literal_or_text(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return SourceDefault(ast.unparse(node))


def _metadata_value(node: ast.expr) -> Any:
    """A metadata value in the source: a literal, or strings joined with `+`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _metadata_value(node.left) + _metadata_value(node.right)
    return _literal_or_text(node)


def _field_spec(statement: ast.AnnAssign) -> FlagSpec | None:
    """The flag of one annotated class-body line, or None for a field that is not an `__init__` argument."""
    members, choices = _union_members(statement.annotation)
    name = statement.target.id
    value = statement.value
    if value is None:
        return FlagSpec(name, members, dataclasses.MISSING, choices)
    if not (isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "field"):
        return FlagSpec(name, members, _literal_or_text(value), choices)
    keywords = {keyword.arg: keyword.value for keyword in value.keywords}
    if "init" in keywords and _literal_or_text(keywords["init"]) is False:
        return None
    default, factory = dataclasses.MISSING, False
    if "default" in keywords:
        default = _literal_or_text(keywords["default"])
    elif "default_factory" in keywords:
        function, factory = keywords["default_factory"], True
        if isinstance(function, ast.Lambda):
            default = _literal_or_text(function.body)
        else:
            empty = _EMPTY_FACTORIES.get(ast.unparse(function))
            default = empty() if empty else SourceDefault(ast.unparse(function))
    metadata = {}
    if isinstance(keywords.get("metadata"), ast.Dict):
        for key, item in zip(keywords["metadata"].keys, keywords["metadata"].values, strict=True):
            value = _metadata_value(item) if isinstance(key, ast.Constant) else None
            if not isinstance(value, SourceDefault | None):  # computed choices: the work parser checks them
                metadata[key.value] = value
    return FlagSpec(name, members, default, choices, metadata, factory)


def read_dataclass_flags(source: Path, class_name: str) -> list[FlagSpec]:
    """The `__init__` fields of the dataclass `class_name` defined at the top level of the Python file `source`, in
    order, as flags."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        raise TrainerSourceError(f"{source}: {error}") from error
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            statements = [item for item in node.body if isinstance(item, ast.AnnAssign)]
            specs = [_field_spec(item) for item in statements if isinstance(item.target, ast.Name)]
            return [spec for spec in specs if spec is not None and not spec.name.startswith("_")]
    raise TrainerSourceError(f"{source}: no class {class_name}")


def training_argument_flags() -> list[FlagSpec]:
    """`TrainingArguments`' fields in the installed Transformers, as flags."""
    flags = read_dataclass_flags(training_args_source(), "TrainingArguments")
    if not flags:
        raise TrainerSourceError("TrainingArguments has no fields in the installed source")
    return flags


def _annotation_members(annotation: Any) -> tuple[tuple[str, ...], tuple[Any, ...] | None]:
    """`_union_members` for a live annotation (the command's own dataclasses, imported)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        unfolded = [_annotation_members(member) for member in typing.get_args(annotation)]
        choices = next((found for _, found in unfolded if found), None)
        return tuple(member for members, _ in unfolded for member in members), choices
    if origin is typing.Literal:
        return ("Literal",), typing.get_args(annotation)
    if annotation is type(None):
        return ("None",), None
    name = getattr(annotation, "__name__", None) if origin is None else f"{origin.__name__}[...]"
    if origin is list:
        (element,) = typing.get_args(annotation)
        name = f"list[{getattr(element, '__name__', 'str')}]"
    return (name or str(annotation),), None


def dataclass_flags(dataclass_type: type) -> list[FlagSpec]:
    """The `__init__` fields of an imported dataclass, as flags."""
    hints = typing.get_type_hints(dataclass_type)
    specs = []
    for item in dataclasses.fields(dataclass_type):
        if not item.init:
            continue
        members, choices = _annotation_members(hints[item.name])
        default, factory = item.default, item.default_factory is not dataclasses.MISSING
        if factory:
            default = item.default_factory()
        specs.append(FlagSpec(item.name, members, default, choices, dict(item.metadata), factory))
    return specs


def _argument_type(members: tuple[str, ...]) -> str:
    """The one type `HfArgumentParser` gives a field of these union members (it drops `None`, and `str` beside
    another type)."""
    if len(members) == 1:
        return members[0]
    if "None" not in members:
        return members[0] if members[1] == "str" else members[1]
    if "bool" in members:
        return "bool | None"
    return members[0] if members[1] == "None" else members[1]


def string_to_bool(value: str | bool) -> bool:
    """A bool flag's value, as `HfArgumentParser` reads it."""
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"Truthy value expected: got {value} but expected one of yes/no, true/false")


def _choice(choices: tuple[Any, ...]):
    by_text = {str(choice): choice for choice in choices}
    return lambda value: by_text.get(value, value)


def add_flag(parser: argparse._ActionsContainer, spec: FlagSpec) -> None:
    """Add `spec` to `parser` the way `HfArgumentParser` adds a dataclass field."""
    options = [f"--{spec.name}"] + ([f"--{spec.name.replace('_', '-')}"] if "_" in spec.name else [])
    kwargs = dict(spec.metadata)
    aliases = kwargs.pop("aliases", [])
    options += [aliases] if isinstance(aliases, str) else list(aliases)
    kind = _argument_type(spec.members)
    missing = spec.default is dataclasses.MISSING
    bool_kwargs = dict(kwargs)
    if kind == "Literal":
        kwargs.update(choices=spec.choices, type=_choice(spec.choices))
        kwargs.update(required=True) if missing else kwargs.update(default=spec.default)
    elif kind in ("bool", "bool | None"):
        kwargs["type"] = string_to_bool
        if kind == "bool" or spec.default is not None and not missing:
            kwargs.update(default=False if missing else spec.default, nargs="?", const=True)
    elif kind.startswith("list["):
        kwargs.update(nargs="+", type=_SIMPLE_TYPES.get(kind[5:-1], str))
        if spec.factory:
            kwargs["default"] = spec.default
        elif missing:
            kwargs["required"] = True
    else:
        kwargs["type"] = _SIMPLE_TYPES.get(kind, str)
        kwargs.update(required=True) if missing else kwargs.update(default=spec.default)
    parser.add_argument(*options, **kwargs)
    if spec.default is True and kind in ("bool", "bool | None"):
        complement = [f"--no_{spec.name}", f"--no-{spec.name.replace('_', '-')}"]
        parser.add_argument(*complement, action="store_false", dest=spec.name, **{**bool_kwargs, "default": False})


class SayWhatHappensUnlessComputed(DefaultsSayWhatHappens):
    """`DefaultsSayWhatHappens`, and no `(default: ...)` for a default the source computes (`SourceDefault`)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if isinstance(action.default, SourceDefault):
            return action.help or ""
        return super()._get_help_string(action)


class LightTrainerParser(OneLineErrors, argparse.ArgumentParser):
    """A Trainer command's parser built from `FlagSpec`s (see the module docstring)."""


def replace_flags(flags: Iterable[FlagSpec], replacements: Mapping[str, FlagSpec]) -> list[FlagSpec]:
    """`flags` with the fields a dataclass subclass redeclares (`replacements`, by name) in their place."""
    return [replacements.get(spec.name, spec) for spec in flags]


def light_trainer_parser(
    groups: Sequence[Sequence[FlagSpec]], prog: str, description: str, epilog: str | None = None
) -> LightTrainerParser:
    """A parser over the flag groups (the command's dataclasses, then `TrainingArguments`'), with one-line errors
    and the help formatting of `commands.arguments.trainer_argument_parser`."""
    parser = LightTrainerParser(
        prog=prog, description=description, epilog=epilog, formatter_class=SayWhatHappensUnlessComputed
    )
    for flags in groups:
        for spec in flags:
            add_flag(parser, spec)
    return parser
