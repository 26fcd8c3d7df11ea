"""The one base class of the tools' errors: an input or a situation a command cannot work with, said in one line
(the message names the file, field, argument or shape). A command reports any of them the same way,
`PROG: error: MESSAGE` on stderr, and exits with the error's `exit_status`: 2 where what the user gave cannot be used
(arguments, input files, an output folder in use or not to be replaced, sizes beyond memory), 1 where the work
failed on something else (a download, the Hub, a write, a model that does not load). `one_line` is the one way to
put an exception's message on one line, for every wing; `reason_of` the cause of a failed read or write; and
`extra_install_hint` the one way a message says how to install an extra."""

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_TYPED_COMMAND: ContextVar[str | None] = ContextVar("typed_command", default=None)
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # the colour codes some libraries put in their messages


class ToolError(Exception):
    """An error a command reports in one line (see the module docstring); `exit_status` 1."""

    exit_status = 1


class ToolInputError(ToolError):
    """What the user gave (arguments, files, an output folder) cannot be used; `exit_status` 2."""

    exit_status = 2


def one_line(error: BaseException, *, first: bool = False) -> str:
    """`error`'s message on one line, without terminal colour codes (torch.export's messages have them): its lines
    joined by single spaces, or with `first=True` only its first line (where the lines after it are hints, such as
    Transformers' advice on where a file may be); the error's type name when the message is empty."""
    text = _TERMINAL_COLOURS.sub("", str(error)).strip()
    if not text:
        return type(error).__name__
    return text.splitlines()[0] if first else " ".join(text.split())


def extra_install_hint(extra: str) -> str:
    """How a message tells the user to install the package's `extra`. The package is not yet on PyPI, so the hint
    names a checkout's editable install and docs/install.md (which also covers the repository URL and the wheel);
    once it is published, this is the one place to change (docs/releasing.md)."""
    return f"install the {extra} extra: pip install -e '.[{extra}]' in a checkout, or see docs/install.md"


def reason_of(error: BaseException, with_file: bool = True) -> str:
    """The cause of a failed read or write, on one line: the OS's reason where there is one (with the file the OS
    names, unless `with_file` is False; a library's long message for an OS error, such as h5py's, gives way to the
    OS's words for its errno)."""
    if isinstance(error, OSError) and (error.errno or error.strerror):
        reason = os.strerror(error.errno) if error.errno else one_line(error.strerror)
        return f"{reason} ({error.filename})" if error.filename and with_file else reason
    return one_line(error)


def report(prog: str, error: ToolError) -> int:
    """Print `error` as the one line `PROG: error: MESSAGE` on stderr; the command's exit status."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return error.exit_status


@contextmanager
def typed_as(command: str) -> Iterator[None]:
    """Within the block, the running command is named `command` (`elmo NAME` or `elmo-NAME`, as the user typed it)."""
    token = _TYPED_COMMAND.set(command)
    try:
        yield
    finally:
        _TYPED_COMMAND.reset(token)


def command_as_typed(prog: str) -> str:
    """The running command's name as typed (see `typed_as`); `prog` when it was not started through `elmo`."""
    return _TYPED_COMMAND.get() or prog
