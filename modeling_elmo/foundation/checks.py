"""Checks of the arguments the public APIs take (drop-ins, embedders) and of the commands' integer flags, each refusal
one line naming the argument: in the workshop every tool and drop-in builds on."""

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass

COUNT_WORDING = "{name} must be an int >= {minimum}, got {value!r}."


def check_count(
    name: str,
    value: object,
    minimum: int = 1,
    error: type[Exception] = ValueError,
    hint: str = "",
    wording: str = COUNT_WORDING,
) -> int:
    """`value` when it is an int (not a bool) >= `minimum`; else `error(wording)` ("NAME must be an int >= MINIMUM,
    got VALUE." by default; fields `name`, `minimum`, `value`) with `hint` appended."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(wording.format(name=name, minimum=minimum, value=value) + hint)
    return value


def integer_flag(minimum: int, maximum: int | None = None, note: str = "") -> Callable[[str], int]:
    """An argparse `type` for an integer flag: its text as an int from `minimum` (to `maximum`); else argparse's one
    line naming the flag, "argument --FLAG: must be a positive integer, got '0'" (`note` after the bound)."""
    if maximum is not None:
        bound = f"an integer from {minimum} to {maximum}"
    else:
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {bound}{note}, got {text!r}")
        return value

    return parse


def check_choice(name: str, value: object, choices: tuple, error: type[Exception] = ValueError) -> object:
    """`value` when it is one of `choices` (never a bool); else `error("NAME: one of CHOICES, got VALUE")`."""
    if value not in choices or isinstance(value, bool):
        raise error(f"{name}: one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


@dataclass(frozen=True)
class TokenListWording:
    """How a caller words each refusal of `check_token_lists`. Fields of the templates: `type` (the offending value's
    type name), `value` (the value), `head` (a str text's first 30 characters), `index` (the text's position) and
    `position` (the token's)."""

    batch: str  # the batch is not a container of texts
    batch_is_str: str  # the batch is itself a str
    text_is_str: str  # a text is a str, where a list of tokens is expected
    text: str  # a text is not a container of tokens
    token: str  # a token is not a str


def check_token_lists(
    texts: object,
    wording: TokenListWording,
    error: type[Exception] = ValueError,
    batch_types: type | tuple[type, ...] = Iterable,
    text_types: type | tuple[type, ...] = (list, tuple),
) -> list[list[str]]:
    """`texts` (a `batch_types` of `text_types` of str tokens; a str is never a container) as a list of token lists;
    else the first thing wrong, as `error(wording...)`."""
    if isinstance(texts, str | bytes) or not isinstance(texts, batch_types):
        template = wording.batch_is_str if isinstance(texts, str) else wording.batch
        raise error(template.format(type=type(texts).__name__, value=texts))
    checked = []
    for index, text in enumerate(texts):
        if isinstance(text, str):
            raise error(wording.text_is_str.format(index=index, head=text[:30]))
        if not isinstance(text, text_types):
            raise error(wording.text.format(index=index, type=type(text).__name__, value=text))
        for position, token in enumerate(text):
            if not isinstance(token, str):
                raise error(
                    wording.token.format(index=index, position=position, type=type(token).__name__, value=token)
                )
        checked.append(list(text))
    return checked
