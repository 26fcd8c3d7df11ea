"""`WeightSnapshot`: a change of any bit, anywhere, in any of its tensors is seen, by every comparison path."""

import os
import signal
import time

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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_process_compares_with_threads_of_its_own(threads):
    """After a fork the parent's comparison threads do not exist in the child: comparing there must not hang."""
    weights = _weights()
    snapshot = WeightSnapshot(weights)
    assert snapshot.matches(weights)  # the parent's pool is started (with 2 or 3 threads)
    child = os.fork()
    if child == 0:  # the child: exit status 0 if the comparison came back right
        os._exit(0 if snapshot.matches(weights) and not snapshot.matches(weights[::-1]) else 1)
    deadline = time.monotonic() + 60
    while (finished := os.waitpid(child, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            pytest.fail("the comparison in the forked process hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(finished[1]) == 0
