"""The one-line form of an exception's message, for the one-line errors of every tool and drop-in (a model file, an
HTTP error or a traceback often spans several lines). At the top of the package, so that every wing can use it."""


def one_line(error: BaseException, *, first: bool = False) -> str:
    """`error`'s message on one line: its lines joined by single spaces, or with `first=True` only its first line
    (where the lines after it are hints, such as Transformers' advice on where a file may be); the error's type name
    when the message is empty."""
    text = str(error).strip()
    if not text:
        return type(error).__name__
    return text.splitlines()[0] if first else " ".join(text.split())
