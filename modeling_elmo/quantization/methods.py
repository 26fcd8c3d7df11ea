"""The quantization methods of `ElmoQuantizationConfig`, named here once: the kernels (`kernels`), the config's and
the layers' check (`check_method`) and the tools' choices (`elmo-embed --quantization`, `ElmoBatchEmbedder`) all read
them from this module, which imports nothing (with the package's lazy `__init__`, naming or checking a method imports
no torch: a command answers its argument errors at once)."""

METHODS = ("int8", "int8_weight_only", "bf16")


def check_method(method: object) -> None:
    """Refuse a quantization method that is not one of `METHODS` (`ValueError`, one line)."""
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"quantization method must be one of {', '.join(map(repr, METHODS))}, got {method!r}.")
