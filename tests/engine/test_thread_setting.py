"""torch's thread count set for a block from several Python threads at once (`engine.thread_setting`, and the thread
chooser built on it): each block runs at its own count, and the caller's count is the one left at the end."""

import threading
import time

import pytest
import torch
from python_threads import at_once, caller_threads

from modeling_elmo.engine.recurrence_tuning import ThreadCountChooser
from modeling_elmo.engine.thread_setting import THREAD_SETTING, num_threads

THREADS = 4
BLOCKS = 20  # per Python thread


@pytest.fixture
def two_threads():
    with caller_threads(2) as count:
        yield count


def test_blocks_of_several_python_threads_each_run_at_their_count(two_threads):
    seen = []

    def blocks(index: int) -> None:
        count = 1 + index % 3  # 1, 2, 3, 1: the caller's count among them
        for _ in range(BLOCKS):
            with num_threads(count):
                time.sleep(1e-4)  # the other threads run meanwhile
                seen.append((count, torch.get_num_threads()))

    at_once(blocks, THREADS)
    assert len(seen) == THREADS * BLOCKS and all(wanted == ran for wanted, ran in seen)
    assert torch.get_num_threads() == two_threads


def test_the_chooser_from_several_python_threads_leaves_the_caller_s_count(two_threads):
    chooser, seen = ThreadCountChooser(), []

    def blocks(index: int) -> None:
        for _ in range(BLOCKS):
            with chooser.run(("key", index % 2), steps=1) as count:
                time.sleep(1e-4)
                seen.append((count, torch.get_num_threads()))

    at_once(blocks, THREADS)
    assert {count for count, _ in seen} == {1, 2}  # both counts measured, so the count changed between blocks
    assert all(chosen == ran for chosen, ran in seen) and torch.get_num_threads() == two_threads


def test_the_setting_is_held_for_the_whole_block_and_nests(two_threads):
    """A block holds `THREAD_SETTING` from setting to restoring (another Python thread cannot take it meanwhile);
    a block inside a block of the same Python thread does not wait for itself."""
    taken = []
    with num_threads(1):
        other = threading.Thread(target=lambda: taken.append(THREAD_SETTING.acquire(blocking=False)))
        other.start()
        other.join()
        with num_threads(3):
            assert torch.get_num_threads() == 3
        assert torch.get_num_threads() == 1
    assert taken == [False] and torch.get_num_threads() == two_threads
