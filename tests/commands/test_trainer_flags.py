"""The Trainer commands' light parser (built from the installed `TrainingArguments` source, without importing
Transformers) against the parser their work uses (`HfArgumentParser` over the imported dataclasses): the same flags,
spellings, defaults, help, value counts and choices, under whichever Transformers version this runs on."""

import argparse
import dataclasses

import pytest
from transformers import TrainingArguments

from modeling_elmo.classification.arguments import COMMAND_LINE as CLASSIFIER
from modeling_elmo.commands.trainer_flags import (
    SourceDefault,
    TrainerSourceError,
    read_dataclass_flags,
    string_to_bool,
    training_argument_flags,
)
from modeling_elmo.ner.arguments import COMMAND_LINE as NER
from modeling_elmo.pretraining.arguments import COMMAND_LINE as PRETRAIN

COMMAND_LINES = {"elmo-train-ner": NER, "elmo-train-classifier": CLASSIFIER, "elmo-pretrain": PRETRAIN}


def _options(parser: argparse.ArgumentParser) -> dict[tuple[str, ...], argparse.Action]:
    return {tuple(action.option_strings): action for action in parser._actions if action.option_strings}


def _shown_default(value):
    """A default as `--help` shows it: enum members by their value, a source expression by its text."""
    if isinstance(value, SourceDefault):
        return value.text
    return getattr(value, "value", value)


def test_every_training_argument_is_read_from_the_source():
    expected = [item.name for item in dataclasses.fields(TrainingArguments) if item.init]
    found = [spec.name for spec in training_argument_flags()]
    assert found == [name for name in expected if not name.startswith("_")]


@pytest.mark.parametrize("prog", COMMAND_LINES)
def test_the_light_parser_has_every_flag_of_the_work_parser(prog):
    light, heavy = _options(COMMAND_LINES[prog].light_parser()), _options(COMMAND_LINES[prog].parser())
    assert list(light) == list(heavy)


@pytest.mark.parametrize("prog", COMMAND_LINES)
def test_the_light_parser_shows_the_same_help_defaults_and_value_counts(prog):
    light, heavy = _options(COMMAND_LINES[prog].light_parser()), _options(COMMAND_LINES[prog].parser())
    differences = []
    for flags, action in heavy.items():
        mine = light[flags]
        expected = (
            action.dest,
            action.help,
            action.nargs,
            action.const,
            action.required,
            _shown_default(action.default),
        )
        found = (mine.dest, mine.help, mine.nargs, mine.const, mine.required, _shown_default(mine.default))
        if isinstance(mine.default, SourceDefault):  # computed by the source (`default_optim`): shown by neither
            expected, found = expected[:-1], found[:-1]
        if expected != found:
            differences.append((flags[0], expected, found))
    assert not differences, differences[:5]


@pytest.mark.parametrize("prog", COMMAND_LINES)
def test_choices_the_light_parser_checks_are_the_work_parsers(prog):
    """Literal choices are checked at once; Enum choices (`--eval_strategy`) are the work parser's."""
    light, heavy = _options(COMMAND_LINES[prog].light_parser()), _options(COMMAND_LINES[prog].parser())
    checked = {flags: action.choices for flags, action in light.items() if action.choices}
    assert checked, "no flag with choices checked at once"
    assert all(list(heavy[flags].choices) == list(choices) for flags, choices in checked.items())


@pytest.mark.parametrize("prog", COMMAND_LINES)
@pytest.mark.parametrize(
    "flags",
    [
        ["--do_train"],
        ["--do_train", "false"],
        ["--num_train_epochs", "2.5", "--logging_steps", "0.1"],
        ["--report_to", "none"],
        ["--no_remove_unused_columns"],
        ["--seed", "7", "--learning-rate", "0.5"],
    ],
)
def test_both_parsers_read_a_command_line_the_same(prog, flags):
    command_line = COMMAND_LINES[prog]
    required = {"elmo-pretrain": ["--options", "o.json", "--vocab_file", "v.txt"]}.get(prog, [])
    argv = ["--model_name_or_path", "m", *required, "--output_dir", "out", *flags]
    light = vars(command_line.light_parser().parse_args(argv))
    heavy = vars(command_line.parser().parse_args(argv))
    computed = {name for name, value in light.items() if isinstance(value, SourceDefault)}  # `optim`'s default
    assert computed <= {"optim"}
    assert {name: value for name, value in light.items() if name not in computed} == {
        name: getattr(value, "value", value) for name, value in heavy.items() if name not in computed
    }


def test_the_classifier_recipe_is_the_parsed_default():
    (*_, training_args) = CLASSIFIER.parse(["--model_name_or_path", "m", "--output_dir", "out"])
    for item in dataclasses.fields(CLASSIFIER.recipe):
        assert getattr(training_args, item.name) == item.default, item.name


def test_a_bool_flag_reads_as_hf_argparser_reads_it():
    assert [string_to_bool(text) for text in ("yes", "True", "1", "n", "FALSE", "0")] == [True] * 3 + [False] * 3
    with pytest.raises(argparse.ArgumentTypeError):
        string_to_bool("maybe")


def test_a_source_without_the_class_is_refused(tmp_path):
    source = tmp_path / "training_args.py"
    source.write_text("class Other:\n    x: int = 1\n")
    with pytest.raises(TrainerSourceError, match="no class TrainingArguments"):
        read_dataclass_flags(source, "TrainingArguments")
    source.write_text("class TrainingArguments(:\n")
    with pytest.raises(TrainerSourceError, match="training_args.py"):
        read_dataclass_flags(source, "TrainingArguments")


def test_an_unreadable_source_leaves_the_check_to_the_work_parser(tmp_path, monkeypatch):
    from modeling_elmo.commands import trainer_flags

    (tmp_path / "training_args.py").write_text("this is not python (\n")
    monkeypatch.setattr(trainer_flags, "training_args_source", lambda: tmp_path / "training_args.py")
    NER.check(["--model_name_or_path", str(tmp_path), "--bogus_flag"])  # no answer here
    with pytest.raises(SystemExit) as stop:
        NER.parse(["--model_name_or_path", str(tmp_path), "--output_dir", "out", "--bogus_flag"])
    assert stop.value.code == 2
