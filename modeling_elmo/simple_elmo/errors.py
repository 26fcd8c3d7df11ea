"""The error of the simple_elmo drop-in: an argument, input or model file it cannot work with, said in one line that
names the argument, text or file."""


class SimpleElmoError(ValueError):
    """What `modeling_elmo.simple_elmo` refuses (simple_elmo itself raises `SystemExit` or fails further on)."""
