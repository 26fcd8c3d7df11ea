"""The one module of argument checks (`foundation/checks.py`) and the one error-message helper (`foundation.errors.
one_line`), issue 41 item 2: the drop-ins word their refusals their own way (tests/allennlp, tests/elmoformanylangs,
tests/simple_elmo); here the shared rules."""

import argparse

import pytest

from modeling_elmo.embed import cli as embed_cli
from modeling_elmo.foundation.checks import TokenListWording, check_count, check_token_lists, integer_flag
from modeling_elmo.foundation.errors import one_line

WORDING = TokenListWording(
    batch="batch: {type}", batch_is_str="batch is a str", text_is_str="{index}: {head!r}", text="{index}: {type}",
    token="{index}.{position}: {value!r} ({type})",
)  # fmt: skip


@pytest.mark.parametrize("value", [0, -1, True, 1.0, "3", None])
def test_check_count_refuses_what_is_not_an_int_at_least_the_minimum(value):
    with pytest.raises(LookupError, match=r"^n must be an int >= 1, got .*\. hint$"):
        check_count("n", value, error=LookupError, hint=" hint")


def test_check_count_returns_the_count():
    assert check_count("n", 0, minimum=0) == 0 and check_count("n", 7) == 7


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ("a b", "batch is a str"),
        (b"ab", "batch: bytes"),
        (None, "batch: NoneType"),
        ([["a"], "b" * 40], f"1: {'b' * 30!r}"),
        ([["a"], {"b"}], "1: set"),
        ([["a", 3]], "0.1: 3 (int)"),
    ],
)
def test_check_token_lists_names_the_first_problem(texts, message):
    with pytest.raises(ValueError) as caught:
        check_token_lists(texts, WORDING)
    assert str(caught.value) == message


def test_check_token_lists_gives_lists():
    assert check_token_lists((("a", "b"), []), WORDING, batch_types=tuple) == [["a", "b"], []]


@pytest.mark.parametrize(
    ("flag", "text", "message"),
    [
        (integer_flag(1), "0", "must be a positive integer, got '0'"),
        (integer_flag(1), "1.5", "must be a positive integer, got '1.5'"),
        (integer_flag(0), "-1", "must be an integer >= 0, got '-1'"),
        (integer_flag(1, 65535), "65536", "must be an integer from 1 to 65535, got '65536'"),
        (integer_flag(3, note=" (three words)"), "two", "must be an integer >= 3 (three words), got 'two'"),
    ],
)
def test_integer_flag_refuses_in_one_line(flag, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        flag(text)
    assert str(caught.value) == message


def test_integer_flag_gives_the_int():
    assert integer_flag(0)("0") == 0 and integer_flag(1, 65535)("65535") == 65535


EMBED = ["in.txt", "out.h5", "--model", "m"]


def _serve_parser():
    from modeling_elmo.serve.arguments import build_parser

    return build_parser()


def _build_vocab_parser():
    from modeling_elmo.pretraining.build_vocab import build_parser

    return build_parser()


@pytest.mark.parametrize(
    ("parser", "argv", "message"),
    [
        (embed_cli.build_parser, [*EMBED, "--window", "0"], "--window: must be a positive integer, got '0'"),
        (embed_cli.build_parser, [*EMBED, "--word-cache", "x"], "--word-cache: must be an integer >= 0, got 'x'"),
        (embed_cli.build_to_parquet_parser, ["in.h5", "out", "--rows-per-part", "0"], "--rows-per-part: must be a "),
        (_serve_parser, ["model", "--port", "65536"], "--port: must be an integer from 1 to 65535, got '65536'"),
        (_serve_parser, ["model", "--max-queue", "0"], "--max-queue: must be a positive integer, got '0'"),
        (_serve_parser, ["model", "--word-cache", "-1"], "--word-cache: must be an integer >= 0, got '-1'"),
        (_build_vocab_parser, ["--train_files", "c", "--output", "v", "--min_count", "0"], "--min_count: must be a "),
        (_build_vocab_parser, ["--train_files", "c", "--output", "v", "--max_size", "2"], "--max_size: must be an "),
    ],
)
def test_every_command_words_a_bad_integer_flag_alike(parser, argv, message, capsys):
    """One argparse type (`integer_flag`) behind every command's integer flags: its error line names the flag."""
    try:
        parser().parse_args(argv)
    except embed_cli.EmbedUsageError as error:  # elmo-embed raises its one line, printed by its `main`
        line = str(error)
    except SystemExit:
        line = capsys.readouterr().err.strip().splitlines()[-1]
    else:
        pytest.fail(f"{argv} was accepted")
    assert f"argument {message}" in line


def test_one_line():
    error = OSError("first line\n  second\tline\n")
    assert one_line(error) == "first line second line"
    assert one_line(error, first=True) == "first line"
    assert one_line(ValueError("")) == "ValueError"
