"""
Fingerprints of weights that the engine's derived weights (packed into oneDNN's layout) are checked against on every
call, so that a change of the weights renews them on the next call.

Fused optimizers (the Trainer's default `adamw_torch_fused`), writes through `.data` and reloads can change a
parameter without a trace in its version counter or address, so the check reads the bits themselves: a weight's bits
as 64-bit integers (32-bit where its size needs it) arranged as a matrix, and their wrapping sums along every row and
every column. Any change of one word changes its row's and its column's sum; a change goes unseen only if it leaves
every row's and every column's sum as it was (a rectangle of words changed by amounts that cancel in both directions),
which no weight update or reload does by accident. The fingerprint costs a few kilobytes (a full copy, as
`weight_snapshot.WeightSnapshot` keeps for the word cache, costs the weights again) and is taken at memory speed.
"""

import torch

from ..weight_snapshot import INTEGER_OF_SIZE


def _bit_sums(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The wrapping int64 sums of `weight`'s bits over each row and each column of its (rows, words) matrix: the
    last dimension, in 64-bit words where its bytes allow, against all the others."""
    bits = weight.detach().contiguous()
    width = bits.shape[-1] if bits.dim() else 1
    bits = bits.reshape(-1, width)
    if (width * bits.element_size()) % 8 == 0 and bits.numel():
        words = bits.view(torch.uint8).view(torch.int64)
    else:
        words = bits.view(INTEGER_OF_SIZE[bits.element_size()])
    return words.sum(dim=1, dtype=torch.int64), words.sum(dim=0, dtype=torch.int64)


class WeightFingerprint:
    """The shapes, dtypes, devices and bit sums (`_bit_sums`) of `weights`, to tell later whether tensors still hold
    the same bits."""

    def __init__(self, weights: list[torch.Tensor]):
        self._facts = [self._facts_of(weight) for weight in weights]

    @staticmethod
    def _facts_of(weight: torch.Tensor) -> tuple:
        rows, columns = _bit_sums(weight)
        return weight.shape, weight.dtype, weight.device, rows, columns

    def matches(self, weights: list[torch.Tensor]) -> bool:
        """Whether `weights` have the fingerprinted shapes, dtypes, devices and bit sums (reads every byte)."""
        if len(weights) != len(self._facts):
            return False
        for weight, (shape, dtype, device, rows, columns) in zip(weights, self._facts, strict=True):
            if weight.shape != shape or weight.dtype != dtype or weight.device != device:
                return False
            now_rows, now_columns = _bit_sums(weight)
            if not (torch.equal(now_rows, rows) and torch.equal(now_columns, columns)):
                return False
        return True
