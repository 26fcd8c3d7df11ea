"""
What decides which implementation computes a part of a model's call (`ElmoCall`), as the registry of implementations
(`elmo_implementations`) and every implementation's `supports(call)` read it. Imports only torch (shipped as remote
code beside modeling_elmo.py).
"""

from dataclasses import dataclass

import torch

PARTS = ("char_cnn", "lstm")  # the parts of the model an implementation may compute


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
