"""`WeightFingerprint`: what the engine's packed and compressed weights are checked against. A change of any bit of
any word, words swapped within a row or a column, another shape, dtype or tensor count: all seen; the same bits
(NaN included) match."""

import pytest
import torch

from modeling_elmo.engine.weight_fingerprint import WeightFingerprint


def _weights() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(2, 8, 24, generator=generator), torch.randn(2, 24, 6, generator=generator)]


def test_same_bits_match_nan_included():
    weights = _weights()
    weights[0][0, 0, 0] = float("nan")
    fingerprint = WeightFingerprint(weights)
    assert fingerprint.matches([weight.clone() for weight in weights])


@pytest.mark.parametrize("bit", [0, 13, 31])
@pytest.mark.parametrize("position", [(0, 0, 0, 0), (0, 1, 7, 23), (1, 0, 23, 5), (1, 1, 11, 3)])
def test_any_flipped_bit_is_seen(bit, position):
    weights = _weights()
    fingerprint = WeightFingerprint(weights)
    tensor, *index = position
    changed = [weight.clone() for weight in weights]
    changed[tensor].view(torch.int32)[tuple(index)] ^= 1 << bit if bit < 31 else -(1 << 31)
    assert not fingerprint.matches(changed)


def test_signed_zeros_differ():
    weights = [torch.zeros(3, 4)]
    assert not WeightFingerprint(weights).matches([-torch.zeros(3, 4)])


@pytest.mark.parametrize("axis", [0, 1])
def test_words_swapped_within_a_row_or_a_column_are_seen(axis):
    """Swaps keep the total sum: the per-row and per-column sums tell them apart."""
    weight = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    fingerprint = WeightFingerprint([weight])
    swapped = weight.clone()
    first, second = ((0, 0), (0, 2)) if axis else ((0, 0), (2, 0))  # 64-bit words: columns pair up
    words = swapped.view(torch.int64)
    words[first], words[second] = words[second].clone(), words[first].clone()
    assert not torch.equal(swapped, weight)
    assert not fingerprint.matches([swapped])


def test_shapes_dtypes_and_counts_are_checked():
    weights = _weights()
    fingerprint = WeightFingerprint(weights)
    assert not fingerprint.matches(weights[:1])
    assert not fingerprint.matches([weights[0].reshape(2, 24, 8), weights[1]])
    assert not fingerprint.matches([weights[0].double(), weights[1]])


def test_odd_widths_and_empty_weights():
    odd = torch.randn(5, 3)
    fingerprint = WeightFingerprint([odd, torch.empty(0, 4)])
    assert fingerprint.matches([odd.clone(), torch.empty(0, 4)])
    changed = odd.clone()
    changed[4, 2] += 1.0
    assert not fingerprint.matches([changed, torch.empty(0, 4)])
