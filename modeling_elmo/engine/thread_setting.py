"""
torch's intra-op thread count, set for a block of work and put back after: the one way the package changes it for a
call (`ElmoBatchEmbedder`'s `threads`, the engine's pinned and chosen counts, `recurrence_tuning`'s measurements).

`torch.set_num_threads` changes settings the whole process shares (the count that threads start from, MKL's), not
only the calling Python thread's, so two Python threads that each set their own count and restore the one they found
can leave the process on the other's count (the second finds the first's count, and restores it). Every block that
sets the count holds `THREAD_SETTING`, one reentrant lock of the process, from reading the count to putting it back:
blocks that set it run one at a time (nested blocks of one Python thread included), and the count is the one they
found when the last leaves. Work that does not set the count (the model's default calls) takes no lock and runs
under whatever count is set at the time.
"""

import contextlib
import threading
from collections.abc import Iterator

import torch

THREAD_SETTING = threading.RLock()  # held by every block that sets torch's thread count, for the whole block


@contextlib.contextmanager
def num_threads(count: int) -> Iterator[None]:
    """Run the block with `torch.set_num_threads(count)`, holding `THREAD_SETTING`, then restore the previous
    count (also when the block raises)."""
    with THREAD_SETTING:
        before = torch.get_num_threads()
        if count == before:
            yield
            return
        torch.set_num_threads(count)
        try:
            yield
        finally:
            torch.set_num_threads(before)
