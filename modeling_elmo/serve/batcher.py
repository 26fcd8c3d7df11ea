"""
The requests' inputs and the model's thread: batching at the time step (`inference.step_scheduler`), fed from the
server's event loop.

A request's inputs are queued together (`submit`), or refused at once (`QueueFull`, HTTP 429) where the inputs
accepted and not yet answered would exceed `max_queued_inputs`. The model's thread runs one loop (`_drive`): it takes
what the event loop sent (new inputs, requests to drop), and while the model has work it runs one time step
(`StepModel.step`: admission, one step of every layer) and sends the finished inputs' results back to the event loop;
with no work it sleeps until an input comes. So an input joins the running rows at the next time step: nothing waits
for a batch or a round, and the loop never waits for more inputs. A request whose input failed, or whose client left,
is dropped from the model (`StepModel.cancel`).

The loop is supervised: an error of its own (a `step` that raises instead of answering) fails every input then on the
model with `BatchFailure`, is logged with its traceback, empties the model (`StepModel.reset`), and the loop goes on
with the next inputs; a loop that ended anyhow is started again by the next `submit`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol


class QueueFull(Exception):
    """The queue cannot take a request's inputs (HTTP 429): `queued` inputs waiting or running, at most `limit`."""

    def __init__(self, queued: int, limit: int):
        super().__init__(f"the server is busy: {queued} inputs queued or running, at most {limit} (--max-queue)")
        self.queued, self.limit = queued, limit


class BatchFailure(RuntimeError):
    """The server's loop failed while a request's inputs were on the model (HTTP 500; the log has the traceback)."""

    def __init__(self, error: BaseException):
        super().__init__(f"the server failed on this request ({type(error).__name__}); its log has the details")


class StepModel(Protocol):
    """The model side the loop drives (`runner.ModelRunner`), called on the model's thread only."""

    @property
    def busy(self) -> bool: ...

    def add(self, key: Hashable, job: Any) -> None: ...

    def cancel(self, request: Hashable) -> None: ...

    def step(self) -> StepReport: ...

    def reset(self) -> list[Hashable]: ...


@dataclass(frozen=True)
class StepReport:
    """One time step: `rows` run, and the inputs it finished, (key, result or exception)."""

    rows: int
    finished: list[tuple[Hashable, Any]]


@dataclass(frozen=True)
class StepMetrics:
    """What one time step was, for the metrics: its rows, seconds on the model, and the inputs it finished (their
    words, and each one's seconds from arrival to result)."""

    rows: int
    model_seconds: float
    words: int
    input_seconds: tuple[float, ...]


LOG = logging.getLogger("modeling_elmo.serve")
_STOP = object()


@dataclass(eq=False)
class _Entry:
    job: Any
    request: int
    words: int
    arrival: float
    future: asyncio.Future = field(repr=False)


class Batcher:
    """
    The queue and the model's loop (see the module docstring).

    Args:
        model: the model side (`StepModel`), used on `executor`'s thread only.
        executor: the one thread that owns the model.
        words_of: a job's number of words.
        request_of: the request a job belongs to (what the model shares its rows between).
        max_queued_inputs: inputs queued or running at once; beyond it `submit` raises `QueueFull`.
        on_step: called in the event loop with each time step's `StepMetrics`.
    """

    def __init__(
        self,
        model: StepModel,
        executor: Executor,
        words_of: Callable[[Any], int],
        request_of: Callable[[Any], int],
        max_queued_inputs: int,
        on_step: Callable[[StepMetrics], None] = lambda report: None,
    ):
        self.model, self.executor = model, executor
        self.words_of, self.request_of, self.max_queued_inputs = words_of, request_of, max_queued_inputs
        self.on_step = on_step
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()  # event loop -> model thread
        self._waiting: dict[int, _Entry] = {}  # key -> entry, every input sent and not answered
        self._keys = 0
        self._unanswered = 0
        self._drive_task: asyncio.Future | None = None

    @property
    def queued(self) -> int:
        """Inputs sent to the model's thread and not yet finished (waiting for admission or running)."""
        return len(self._waiting)

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
            entry = _Entry(job, self.request_of(job), self.words_of(job), now, loop.create_future())
            self._keys += 1
            self._waiting[self._keys] = entry
            self._inbox.put(("add", self._keys, job))
            entries.append(entry)
        self._unanswered += len(entries)
        try:
            results = await asyncio.gather(*(entry.future for entry in entries), return_exceptions=True)
        except asyncio.CancelledError:  # the client left: its inputs leave the model
            self._drop(entries[0].request)
            raise
        finally:
            self._unanswered -= len(entries)
        failure = next((result for result in results if isinstance(result, BaseException)), None)
        if failure is not None:
            raise failure
        return results

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._drive_task is None or self._drive_task.done():  # a loop that ended anyhow starts again
            self._drive_task = loop.run_in_executor(self.executor, self._drive, loop)

    async def close(self) -> None:
        """Stop the loop (after the server has answered every request it accepted)."""
        if self._drive_task is not None:
            self._inbox.put(_STOP)
            await asyncio.gather(self._drive_task, return_exceptions=True)
            self._drive_task = None

    # ---- the model's thread ---------------------------------------------------------------------------------

    def _drive(self, loop: asyncio.AbstractEventLoop) -> None:
        """The model's loop: take what came, run a time step while there is work, send the results back."""
        while True:
            try:
                item = self._inbox.get(block=not self.model.busy)
            except queue.Empty:
                item = None
            while item is not None:
                if item is _STOP:
                    return
                action, key, payload = item
                try:
                    self.model.add(key, payload) if action == "add" else self.model.cancel(payload)
                except Exception as error:  # the input (or the cancelling) failed on its own: the loop goes on
                    loop.call_soon_threadsafe(self._fail, [key] if action == "add" else [], error)
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    item = None
            if not self.model.busy:
                continue
            started = time.monotonic()
            try:
                report = self.model.step()
            except Exception as error:  # the loop's own failure: everything on the model fails, the loop goes on
                loop.call_soon_threadsafe(self._fail, self.model.reset(), error)
                continue
            loop.call_soon_threadsafe(self._answer, report, time.monotonic() - started)

    # ---- the event loop -------------------------------------------------------------------------------------

    def _answer(self, report: StepReport, model_seconds: float) -> None:
        now = time.monotonic()
        words, seconds = 0, []
        for key, result in report.finished:
            entry = self._waiting.pop(key, None)
            if entry is None:
                continue
            words += entry.words
            seconds.append(now - entry.arrival)
            if entry.future.done():  # the request failed already, or its client left
                continue
            if isinstance(result, BaseException):
                entry.future.set_exception(result)
                self._drop(entry.request, result)
            else:
                entry.future.set_result(result)
        try:
            self.on_step(StepMetrics(report.rows, model_seconds, words, tuple(seconds)))
        except Exception as error:  # the metrics' failure answers no request wrongly: logged, the loop goes on
            LOG.error("the step report failed", exc_info=error)

    def _drop(self, request: int, failure: BaseException | None = None) -> None:
        """Drop a request from the model: one whose input failed with `failure` (its other inputs fail with it), or
        one whose client left (`failure` None)."""
        self._inbox.put(("cancel", None, request))
        for key in [key for key, entry in self._waiting.items() if entry.request == request]:
            entry = self._waiting.pop(key)
            if not entry.future.done():
                entry.future.cancel() if failure is None else entry.future.set_exception(failure)

    def _fail(self, keys: list[Hashable], error: Exception) -> None:
        """The loop's own `error`: logged, and the inputs of `keys` (those the model held) fail with
        `BatchFailure`."""
        LOG.error("the server's loop failed on %d inputs", len(keys), exc_info=error)
        for key in keys:
            entry = self._waiting.pop(key, None)
            if entry is not None and not entry.future.done():
                entry.future.set_exception(BatchFailure(error))
