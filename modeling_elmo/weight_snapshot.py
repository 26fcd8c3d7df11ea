"""
Copies of weights that caches derived from them are checked against, bit by bit, on every use: for the model's word
cache (`word_embedding_store`; the engine's packed and compressed weights keep a fingerprint instead,
`engine.weight_fingerprint`).

Fused optimizers (the Trainer's default `adamw_torch_fused`), writes through `.data` and reloads can change a
parameter without a trace in its version counter or address, so a cache of something computed from weights is only
kept while the weights still hold the bits of the copy it was computed from: the same bits give the same derived
values (NaN included), and any other bits count as a change. The comparison reads every byte, so it runs at memory
speed: libc's `memcmp` on contiguous CPU tensors, split over `torch.get_num_threads()` Python threads (ctypes
releases the GIL) of a pool that lives for one comparison, so that no thread outlives the call; elsewhere
`torch.equal` on integer views of the same bits.
"""

import ctypes
import functools
import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import torch

# below this many bytes a tensor is compared in one call: splitting costs more than it saves
_SPLIT_BYTES = 1 << 20
# the integer dtype of each element size, to compare or sum a tensor's bits
INTEGER_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@functools.cache
def _memcmp():
    """libc's `memcmp(a, b, n)` through ctypes, or None where the C library cannot be found."""
    try:
        library = ctypes.CDLL("msvcrt") if os.name == "nt" else ctypes.CDLL(None)
        memcmp = library.memcmp
    except (OSError, AttributeError):
        return None
    memcmp.restype = ctypes.c_int
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return memcmp


def _byte_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """`total` bytes as up to `parts` (start, length) ranges of nearly equal lengths."""
    parts = max(1, min(parts, total // _SPLIT_BYTES))
    bounds = [total * part // parts for part in range(parts + 1)]
    return [(start, end - start) for start, end in itertools.pairwise(bounds) if end > start]


def _same_bits_torch(now: torch.Tensor, then: torch.Tensor) -> bool:
    """`same_bits` for one pair with torch's own comparison, on integer views of the bits where the dtype has one."""
    integer = INTEGER_OF_SIZE.get(now.element_size())
    if integer is None:  # no integer of that size (complex128): compared by value
        return torch.equal(now, then)
    return torch.equal(now.contiguous().view(integer), then.contiguous().view(integer))


def same_bits(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> bool:
    """Whether the two tensors of every pair hold the same bits (same shapes and dtypes are the caller's check)."""
    memcmp, threads = _memcmp(), torch.get_num_threads()
    ranges = []  # (address, address, length) for memcmp
    for now, then in pairs:
        on_cpu = now.device.type == then.device.type == "cpu"
        if memcmp is None or not (on_cpu and now.is_contiguous() and then.is_contiguous()):
            if not _same_bits_torch(now, then):
                return False
            continue
        for start, length in _byte_ranges(now.numel() * now.element_size(), threads):
            ranges.append((now.data_ptr() + start, then.data_ptr() + start, length))

    def same(group: list[tuple[int, int, int]]) -> bool:
        return all(memcmp(*arguments) == 0 for arguments in group)

    if threads == 1 or sum(length for _, _, length in ranges) < threads * _SPLIT_BYTES:
        return same(ranges)  # too little to split: starting threads costs more than it saves
    groups = [ranges[thread::threads] for thread in range(threads)]
    with ThreadPoolExecutor(threads - 1, thread_name_prefix="weight-snapshot") as pool:  # closed before returning
        others = pool.map(same, groups[1:])
        first = same(groups[0])  # the calling thread compares the first group meanwhile
        return all(others) and first


class WeightSnapshot:
    """Detached copies of `weights`, to tell later whether tensors still hold the same bits."""

    def __init__(self, weights: list[torch.Tensor]):
        self._copies = [weight.detach().clone(memory_format=torch.contiguous_format) for weight in weights]

    def matches(self, weights: list[torch.Tensor]) -> bool:
        """Whether `weights` have the snapshot's shapes, dtypes, devices and bits (reads every byte)."""
        return (
            len(weights) == len(self._copies)
            and all(
                now.shape == then.shape and now.dtype == then.dtype and now.device == then.device
                for now, then in zip(weights, self._copies, strict=True)
            )
            and same_bits([(now.detach(), then) for now, then in zip(weights, self._copies, strict=True)])
        )
