"""Helpers of the tests that call the package from several Python threads at once, and of those that need the
caller's torch thread count set to a known value."""

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

Result = TypeVar("Result")


def at_once(call: Callable[[int], Result], count: int) -> list[Result]:
    """`call(index)` from `count` Python threads started together; their results by index (a thread's exception is
    raised in the caller)."""
    results, errors, barrier = [None] * count, [], threading.Barrier(count)

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = call(index)
        except BaseException as error:  # noqa: BLE001  (re-raised in the calling thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@contextlib.contextmanager
def caller_threads(count: int) -> Iterator[int]:
    """torch at `count` threads in the block (whatever the machine has), the previous count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def frequent_thread_switches() -> Iterator[None]:
    """Threads interleave inside the Python code of a call, where unguarded shared state would show: the interpreter
    switches threads every microsecond instead of every 5 ms, and the word cache yields to the other threads each
    time it picks a row for a new word."""
    from modeling_elmo.word_embedding_store import WordEmbeddingStore

    interval, free_slot = sys.getswitchinterval(), WordEmbeddingStore._free_slot

    def yielding_free_slot(self):
        slot = free_slot(self)
        time.sleep(1e-4)
        return slot

    sys.setswitchinterval(1e-6)
    WordEmbeddingStore._free_slot = yielding_free_slot
    try:
        yield
    finally:
        WordEmbeddingStore._free_slot = free_slot
        sys.setswitchinterval(interval)
