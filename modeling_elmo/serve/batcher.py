"""
Dynamic batching: the requests' inputs wait in one queue and run on the model's one thread in length-sorted batches
bounded by words, as `elmo-embed` and `ElmoBatchEmbedder` cut their windows.

The batcher lives in the server's event loop. A request's inputs are queued together (`submit`), or refused at once
(`QueueFull`, HTTP 429) where the inputs accepted and not yet answered would exceed `max_queued_inputs`. While the
model is busy, inputs accumulate; when it is free, the batcher waits until the queue holds `max_batch_words` words, or
as many inputs as the largest of the last `ROUNDS_REMEMBERED` rounds (the clients it answered are likely to send again:
one client alone never waits; the largest, so that clients slow to come back once do not halve the batches for good),
or until it has waited `max_wait` seconds or `WAIT_SHARE` of the last batch's time on the model since the model became
free or its oldest input came (whichever is shorter: a wait never costs more than a fraction of what a batch costs);
then it takes every queued input, sorts them by (words, arrival) and cuts them into batches of at most
`max_batch_words` words (an input longer than that runs alone), which run one after the other while new inputs queue
for the next round. The model side (`run`) is any function of a list of jobs that returns one result or exception per
job, called on the executor's thread.

The loop is supervised: an error of its own (a round or a batch that fails outside the model's call, a `run` that
returns the wrong number of results, an `on_batch` that raises) fails, with `BatchFailure`, the inputs of that batch
(or that round) not yet answered, is logged with its traceback, and the loop goes on with the next inputs.
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

WAIT_SHARE = 0.25  # the longest wait for more inputs, as a share of the last batch's time on the model
ROUNDS_REMEMBERED = 4  # the rounds whose largest number of inputs a free model waits for


class QueueFull(Exception):
    """The queue cannot take a request's inputs (HTTP 429): `queued` inputs waiting or running, at most `limit`."""

    def __init__(self, queued: int, limit: int):
        super().__init__(f"the server is busy: {queued} inputs queued or running, at most {limit} (--max-queue)")
        self.queued, self.limit = queued, limit


class BatchFailure(RuntimeError):
    """The batcher itself failed on a batch holding a request's inputs (HTTP 500; the log has the traceback)."""

    def __init__(self, error: BaseException):
        super().__init__(
            f"the server failed on this request's batch ({type(error).__name__}); its log has the details"
        )


LOG = logging.getLogger("modeling_elmo.serve")


@dataclass
class _Entry:
    job: Any
    words: int
    arrival: int
    enqueued: float
    future: asyncio.Future = field(repr=False)


@dataclass(frozen=True)
class BatchReport:
    """What one batch was, for the metrics: its inputs, words, seconds on the model and each input's queue wait."""

    inputs: int
    words: int
    model_seconds: float
    queue_waits: tuple[float, ...]


class Batcher:
    """
    The queue and the loop that feeds the model (see the module docstring).

    Args:
        run: jobs -> a result or an exception per job, in order (called on `executor`'s thread).
        executor: the one thread that owns the model.
        words_of: a job's number of words.
        max_batch_words: words per batch (an input with more runs alone).
        max_wait: seconds a free model waits for more inputs after the first (0: none).
        max_queued_inputs: inputs queued or running at once; beyond it `submit` raises `QueueFull`.
        on_batch: called in the event loop with each batch's `BatchReport`.
    """

    def __init__(
        self,
        run: Callable[[list[Any]], Sequence[Any]],
        executor: Executor,
        words_of: Callable[[Any], int],
        max_batch_words: int,
        max_wait: float,
        max_queued_inputs: int,
        on_batch: Callable[[BatchReport], None] = lambda report: None,
    ):
        self.run, self.executor, self.words_of = run, executor, words_of
        self.max_batch_words, self.max_wait, self.max_queued_inputs = max_batch_words, max_wait, max_queued_inputs
        self.on_batch = on_batch
        self._queue: list[_Entry] = []
        self._unanswered = 0  # inputs queued or running
        self._arrivals = 0
        self._rounds: deque[int] = deque(maxlen=ROUNDS_REMEMBERED)  # inputs of each recent round
        self._last_model_seconds = 0.0  # the last batch's time on the model
        self._free_since = 0.0  # when the model finished its last batch
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None

    @property
    def queued(self) -> int:
        """Inputs waiting for the model (not counting the batches running)."""
        return len(self._queue)

    @property
    def unanswered(self) -> int:
        """Inputs queued or running."""
        return self._unanswered

    async def submit(self, jobs: Sequence[Any]) -> list[Any]:
        """The results of `jobs` (one request's inputs), in order; an exception for a job is raised (the first
        one); `QueueFull` where the queue cannot take them all."""
        if self._unanswered + len(jobs) > self.max_queued_inputs:
            raise QueueFull(self._unanswered, self.max_queued_inputs)
        loop = asyncio.get_running_loop()
        self._start(loop)
        now = time.monotonic()
        entries = []
        for job in jobs:
            entries.append(_Entry(job, self.words_of(job), self._arrivals, now, loop.create_future()))
            self._arrivals += 1
        self._queue.extend(entries)
        self._unanswered += len(entries)
        self._wake.set()
        try:
            results = await asyncio.gather(*(entry.future for entry in entries), return_exceptions=True)
        finally:
            self._unanswered -= len(entries)
        failure = next((result for result in results if isinstance(result, BaseException)), None)
        if failure is not None:
            raise failure
        return results

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop_task is None or self._loop_task.done():  # a loop that ended anyhow starts again
            self._wake = asyncio.Event()
            self._loop_task = loop.create_task(self._feed())

    async def close(self) -> None:
        """Stop the loop (after the server has answered every request it accepted)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
            self._loop_task = None

    async def _feed(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queue:
                continue
            taken: list[_Entry] = []
            try:
                await self._gather_more()
                taken, self._queue = self._queue, []
                self._rounds.append(len(taken))
                for batch in cut_batches(taken, self.max_batch_words):
                    try:
                        await self._run_batch(batch)
                    except Exception as error:
                        _fail(batch, error)
            except Exception as error:  # the round itself failed: every input it took (or the queue) fails
                if not taken:
                    taken, self._queue = self._queue, []
                _fail(taken, error)

    async def _gather_more(self) -> None:
        """Wait for a full batch of words, or the recent rounds' largest number of inputs, or until the oldest input
        has waited `max_wait` or `WAIT_SHARE` of the last batch's time on the model."""
        waiting_since = max(
            self._queue[0].enqueued, self._free_since
        )  # inputs queued while the model ran count from now
        deadline = waiting_since + min(self.max_wait, WAIT_SHARE * self._last_model_seconds)
        expected = max(self._rounds, default=0)
        while len(self._queue) < expected and sum(entry.words for entry in self._queue) < self.max_batch_words:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    async def _run_batch(self, batch: list[_Entry]) -> None:
        live = [entry for entry in batch if not entry.future.done()]  # a client that left: its inputs are skipped
        if not live:
            return
        started = time.monotonic()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.run, [entry.job for entry in live]
            )
        except Exception as error:  # `run` itself failed: every input of the batch gets the error
            results = [error] * len(live)
        self._free_since = time.monotonic()
        model_seconds = self._last_model_seconds = self._free_since - started
        for entry, result in zip(live, results, strict=True):
            if entry.future.done():
                continue
            if isinstance(result, BaseException):
                entry.future.set_exception(result)
            else:
                entry.future.set_result(result)
        waits = tuple(started - entry.enqueued for entry in live)
        self.on_batch(BatchReport(len(live), sum(entry.words for entry in live), model_seconds, waits))


def _fail(entries: list[_Entry], error: Exception) -> None:
    """The loop's own `error`: logged, and every input of `entries` not yet answered fails with `BatchFailure`."""
    LOG.error("the batcher failed on %d inputs", len(entries), exc_info=error)
    for entry in entries:
        if not entry.future.done():
            entry.future.set_exception(BatchFailure(error))


def cut_batches(entries: list[Any], max_batch_words: int) -> list[list[Any]]:
    """`entries` (with `.words` and `.arrival`) sorted by (words, arrival) and cut into batches of at most
    `max_batch_words` words; an entry with more words than that is a batch of its own."""
    batches: list[list[Any]] = []
    current: list[Any] = []
    words = 0
    for entry in sorted(entries, key=lambda entry: (entry.words, entry.arrival)):
        if current and words + entry.words > max_batch_words:
            batches.append(current)
            current, words = [], 0
        current.append(entry)
        words += entry.words
    if current:
        batches.append(current)
    return batches
