"""`WeightSnapshot`: a change of any bit, anywhere, in any of its tensors is seen, by every comparison path."""

import pytest
import torch

from modeling_elmo import weight_snapshot
from modeling_elmo.weight_snapshot import WeightSnapshot, same_bits


@pytest.fixture(params=["memcmp", "torch"])
def comparison(request, monkeypatch):
    """Run a test with libc's memcmp (the CPU path) and with torch's comparison (other devices, no C library)."""
    if request.param == "torch":
        monkeypatch.setattr(weight_snapshot, "_memcmp", lambda: None)
    else:
        assert weight_snapshot._memcmp() is not None
    return request.param


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def _weights() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    # 4 MiB (split over the threads), a small one, a non-contiguous view and a scalar
    large = torch.randn(2, 256, 2048, generator=generator)
    return [
        large,
        torch.randn(7, 3, generator=generator),
        torch.randn(8, 6, generator=generator).t(),
        torch.tensor(1.5),
    ]


@pytest.mark.parametrize("weight_index", range(4))
@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_one_flipped_bit_is_a_change(comparison, threads, weight_index, position):
    weights = _weights()
    snapshot = WeightSnapshot(weights)
    assert snapshot.matches(weights)
    target = weights[weight_index]
    index = {"first": 0, "middle": target.numel() // 2, "last": target.numel() - 1}[position]
    bits = target.reshape(-1).view(torch.int32).clone()
    bits[index] ^= 1  # the lowest bit of one mantissa
    with torch.no_grad():
        target.copy_(bits.view(torch.float32).view(target.shape))
    assert not snapshot.matches(weights)


def test_same_bits_match_nan_included_and_signed_zeros_differ(comparison):
    """Bits decide: a NaN left as it is is no change (the derived values stay right); -0.0 for 0.0 is one."""
    weights = [torch.tensor([float("nan"), 0.0, float("inf")])]
    snapshot = WeightSnapshot(weights)
    assert snapshot.matches(weights)
    assert not snapshot.matches([torch.tensor([float("nan"), -0.0, float("inf")])])


def test_other_shapes_dtypes_or_counts_do_not_match(comparison):
    weights = _weights()
    snapshot = WeightSnapshot(weights)
    assert not snapshot.matches(weights[:-1])
    assert not snapshot.matches([weights[0].reshape(2, 2048, 256), *weights[1:]])  # same bytes, other shape
    assert not snapshot.matches([weights[0].view(torch.int32), *weights[1:]])  # same bytes, other dtype


def test_snapshot_is_a_copy(comparison):
    weights = _weights()
    snapshot = WeightSnapshot(weights)
    with torch.no_grad():
        weights[0].data.add_(1.0)  # through .data: no trace in the version counter
    assert not snapshot.matches(weights)


def test_empty_tensors_and_lists(comparison):
    assert same_bits([])
    assert WeightSnapshot([torch.empty(0, 5)]).matches([torch.empty(0, 5)])


def test_complex_values_are_compared(comparison):
    """No integer has the size of a complex128 element: compared by value (and still as a change)."""
    weights = [torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128)]
    snapshot = WeightSnapshot(weights)
    assert snapshot.matches(weights)
    assert not snapshot.matches([torch.tensor([1 + 2j, 3 + 1j], dtype=torch.complex128)])


def test_ranges_cover_every_byte_once():
    for total in (0, 1, (1 << 20) - 1, 1 << 20, 5 * (1 << 20) + 3):
        for parts in (1, 2, 3, 16):
            ranges = weight_snapshot._byte_ranges(total, parts)
            assert sum(length for _, length in ranges) == total
            assert [start for start, _ in ranges] == [
                sum(length for _, length in ranges[:i]) for i in range(len(ranges))
            ]
            assert len(ranges) <= max(1, parts)
