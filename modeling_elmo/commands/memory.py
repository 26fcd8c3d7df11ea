"""The memory a command's model needs, counted before anything is allocated (on the `meta` device), against the
memory free where it runs: sizes that cannot fit are refused with one line saying how much they need, instead of
dying in the allocator."""

import os

from ..foundation.errors import ToolInputError

GIB = 1 << 30
# float32 weight, and for a trained parameter its gradient and AdamW's two moments
BYTES_PER_FROZEN_PARAMETER = 4
BYTES_PER_TRAINED_PARAMETER = 4 * 4


class MemoryNeedError(ToolInputError, ValueError):
    """A run whose sizes need more memory than the machine has."""


def available_bytes(device) -> int | None:
    """Memory free for a run on the torch device `device` (`MemAvailable` of the host for the CPU); None where
    unknown."""
    if device.type == "cuda":
        import torch

        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def training_bytes(build_model) -> tuple[int, int]:
    """(parameters, bytes of their weights, gradients and AdamW moments) of the model `build_model()` returns,
    built on the `meta` device (nothing allocated)."""
    import torch

    try:
        with torch.device("meta"):
            model = build_model()
    except RuntimeError as error:  # "Storage size calculation overflowed": more bytes than an int64 counts
        raise MemoryNeedError(f"the model's sizes are beyond any machine's memory ({error}).") from None
    parameters = list(model.parameters())
    needed = sum(
        parameter.numel() * (BYTES_PER_TRAINED_PARAMETER if parameter.requires_grad else BYTES_PER_FROZEN_PARAMETER)
        for parameter in parameters
    )
    return sum(parameter.numel() for parameter in parameters), needed


def check_memory(needed: int, device, what: str) -> None:
    """Raise `MemoryNeedError` when `needed` bytes exceed what `device` has free; `what` says what needs them."""
    available = available_bytes(device)
    if available is not None and needed > available:
        raise MemoryNeedError(
            f"this run needs at least {needed / GIB:,.1f} GiB of memory, more than the {available / GIB:,.1f} GiB "
            f"free on {device.type}: {what}. Lower them."
        )
