"""
What decides which implementation computes a part of a model's call (`ElmoCall`), as the registry of implementations
(`elmo_implementations`) and every implementation's `supports(call)` read it, and whether the call is being exported
(`is_exporting`). Imports only torch (shipped as remote code beside modeling_elmo.py).
"""

from dataclasses import dataclass

import torch

PARTS = ("char_cnn", "lstm")  # the parts of the model an implementation may compute


def is_exporting() -> bool:
    """Whether `torch.export` (also under `torch.onnx.export(..., dynamo=True)`) is tracing the current call."""
    check = getattr(torch.compiler, "is_exporting", None)  # torch >= 2.5
    return bool(check is not None and check())


@dataclass(frozen=True)
class ElmoCall:
    """What decides which implementation computes a part of a call: the `part` (one of `PARTS`), the inputs' `device`
    and `dtype`, the part's weights' `weight_dtype`, whether a gradient is needed, whether the call is being exported,
    and the model's `choice` (a name, or `None`)."""

    part: str
    device: torch.device
    dtype: torch.dtype
    weight_dtype: torch.dtype
    needs_grad: bool
    exporting: bool
    choice: str | None
