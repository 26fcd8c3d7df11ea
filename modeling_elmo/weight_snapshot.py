"""Copies of weights that caches derived from them are checked against, value by value, on every use.

Fused optimizers (the Trainer's default `adamw_torch_fused`), writes through `.data` and reloads can change a
parameter without a trace in its version counter or address, so a cache of something computed from weights (packed
oneDNN weights, character-CNN word embeddings) is only kept while the weights still equal the copy it was computed
from. NaN never equals itself: weights holding NaN are never taken as unchanged.
"""

import torch


class WeightSnapshot:
    """Detached copies of `weights`, to tell later whether tensors still hold the same values."""

    def __init__(self, weights: list[torch.Tensor]):
        self._copies = [weight.detach().clone() for weight in weights]

    def matches(self, weights: list[torch.Tensor]) -> bool:
        """Whether `weights` have the snapshot's shapes, dtypes, devices and values (reads every value)."""
        return len(weights) == len(self._copies) and all(
            now.shape == then.shape
            and now.dtype == then.dtype
            and now.device == then.device
            and torch.equal(now.detach(), then)
            for now, then in zip(weights, self._copies, strict=True)
        )
