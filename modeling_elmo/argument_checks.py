"""Checks of the arguments the public APIs take (drop-ins, embedders), each refusal one line naming the argument. At
the top of the package, so that every wing can use them."""


def check_count(
    name: str, value: object, minimum: int = 1, error: type[Exception] = ValueError, hint: str = ""
) -> int:
    """`value` when it is an int (not a bool) >= `minimum`; else `error("NAME must be an int >= MINIMUM, got VALUE.")`
    with `hint` appended."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(f"{name} must be an int >= {minimum}, got {value!r}.{hint}")
    return value
