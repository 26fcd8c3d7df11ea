"""The one module of argument checks (`foundation/checks.py`) and the one error-message helper (`foundation.errors.
one_line`), issue 41 item 2: the drop-ins word their refusals their own way (tests/allennlp, tests/elmoformanylangs,
tests/simple_elmo); here the shared rules."""

import pytest

from modeling_elmo.foundation.checks import TokenListWording, check_count, check_token_lists
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


def test_one_line():
    error = OSError("first line\n  second\tline\n")
    assert one_line(error) == "first line second line"
    assert one_line(error, first=True) == "first line"
    assert one_line(ValueError("")) == "ValueError"
