"""The batcher in-process, on a virtual clock, with a fake model that takes time: length-sorted batches bounded by
words, the inputs that come while the model runs going together, the wait for more inputs and its limits, the queue
bound (429), failures per input, clients that leave, and every result back to its own caller.

Nothing here sleeps: the batcher's clock (`batcher.time.monotonic`, patched) and its event loop's clock are one
`VirtualClock`, which stands still while any task can run and jumps to the next timer when every task waits; the fake
model's call returns its results after the seconds its batch costs on that clock. So each test states when each
input comes, and asserts which batches ran, when each answer came and how long each input waited, to the exact
instant: none races a window, and each would fail if the batcher grouped, waited or ordered otherwise."""

import asyncio
import selectors
from concurrent.futures import Executor, Future
from types import SimpleNamespace

import pytest

from modeling_elmo.serve import batcher as batcher_module
from modeling_elmo.serve.batcher import ROUNDS_REMEMBERED, WAIT_SHARE, Batcher, QueueFull, cut_batches

START = 1000.0  # the virtual clock's reading when a test starts (a monotonic clock's zero is arbitrary)


def entries(*word_counts: int) -> list:
    return [SimpleNamespace(words=count, arrival=index) for index, count in enumerate(word_counts)]


def test_cut_batches_sorts_by_words_then_arrival_and_bounds_the_words():
    batches = cut_batches(entries(5, 1, 3, 1, 9, 2), max_batch_words=6)
    assert [[entry.words for entry in batch] for batch in batches] == [[1, 1, 2], [3], [5], [9]]
    assert [entry.arrival for entry in batches[0]] == [1, 3, 5]


def test_an_input_longer_than_a_batch_runs_alone():
    assert [[entry.words for entry in batch] for batch in cut_batches(entries(2, 50, 2), 10)] == [[2, 2], [50]]


# ---- the virtual clock, its event loop and the fake model ----------------------------------------------------------


class VirtualClock:
    """Seconds that pass only when every task of the loop waits (then straight to the next timer)."""

    def __init__(self):
        self.now = START

    def __call__(self) -> float:
        return self.now


class _JumpingSelector(selectors.DefaultSelector):
    """Polls without blocking; where the loop would block until its next timer, moves the clock there instead."""

    def __init__(self, clock: VirtualClock):
        super().__init__()
        self.clock = clock

    def select(self, timeout=None):
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # no timer and nothing to run: nothing could ever wake the loop
            raise RuntimeError("every task waits and no timer is set: the batcher would hang here")
        self.clock.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock):
        super().__init__(_JumpingSelector(clock))
        self.clock = clock

    def time(self) -> float:
        return self.clock.now


class FakeModel:
    """Jobs are strings (a job's words: its letters); the result of one is its upper case, "boom" fails, and the
    calls numbered in `broken_calls` (from 1) raise as a whole. Records each batch it ran and when it started (seconds
    since START). A call costs `seconds_per_call + seconds_per_word * words` on the virtual clock."""

    def __init__(self, seconds_per_call: float = 1.0, seconds_per_word: float = 0.0, broken_calls=()):
        self.seconds_per_call, self.seconds_per_word = seconds_per_call, seconds_per_word
        self.broken_calls = broken_calls
        self.batches: list[list[str]] = []
        self.started: list[float] = []

    def seconds(self, jobs: list[str]) -> float:
        return self.seconds_per_call + self.seconds_per_word * sum(map(len, jobs))

    def __call__(self, jobs: list[str]) -> list:
        self.batches.append(list(jobs))
        if len(self.batches) in self.broken_calls:
            raise RuntimeError("broken")
        return [ValueError(job) if job == "boom" else job.upper() for job in jobs]


class ModelThread(Executor):
    """The model's one thread, on the virtual clock: a call is made when the batcher submits it and its outcome comes
    back `model.seconds(jobs)` later; a second call before the first's outcome fails the test."""

    def __init__(self, model: FakeModel):
        self.model, self.busy = model, False

    def submit(self, fn, /, *args, **kwargs) -> Future:
        assert not self.busy, "the batcher ran two batches at once on the model's one thread"
        loop = asyncio.get_running_loop()
        self.busy = True
        self.model.started.append(loop.time() - START)
        future: Future = Future()
        future.set_running_or_notify_cancel()  # as a thread's call: running, no longer cancellable
        try:
            outcome, failed = fn(*args, **kwargs), False
        except Exception as error:
            outcome, failed = error, True

        def done():
            self.busy = False
            (future.set_exception if failed else future.set_result)(outcome)

        loop.call_later(self.model.seconds(*args), done)
        return future


@pytest.fixture
def clock(monkeypatch) -> VirtualClock:
    """The virtual clock, which the batcher reads as its `time.monotonic`."""
    clock = VirtualClock()
    monkeypatch.setattr(batcher_module, "time", SimpleNamespace(monotonic=clock))
    return clock


def run(clock: VirtualClock, coroutine):
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(clock)) as runner:
        return runner.run(coroutine)


def batcher(model: FakeModel, reports: list | None = None, **settings) -> Batcher:
    options = {"max_batch_words": 100, "max_wait": 0.0, "max_queued_inputs": 100, **settings}
    on_batch = reports.append if reports is not None else lambda report: None
    return Batcher(model, ModelThread(model), words_of=len, on_batch=on_batch, **options)


def now() -> float:
    """Seconds since START on the virtual clock."""
    return asyncio.get_running_loop().time() - START


async def at(seconds: float) -> None:
    """Wait until `seconds` after START (not yet passed)."""
    assert now() <= seconds, f"{seconds} s is past: it is {now()} s"
    await asyncio.sleep(seconds - now())


async def client(queue: Batcher, jobs: list[str], when: float = 0.0) -> tuple[list[str], float]:
    """`jobs` submitted at `when`: (their results, when they came)."""
    await at(when)
    results = await queue.submit(jobs)
    return results, now()


def waits(reports) -> list[tuple[float, ...]]:
    return [report.queue_waits for report in reports]


approx = pytest.approx  # times: binary fractions of a second, exact on the clock, compared within float rounding


# ---- batches ------------------------------------------------------------------------------------------------------


def test_inputs_that_come_while_the_model_runs_go_together_sorted_by_words_and_bounded(clock):
    """While the first input runs (1 s: a quarter second a word), four clients queue; when the model is free they run
    in one round, sorted by words and cut at 12 words (the 15 words alone), one batch after the other, and every
    client gets its own results when its last input's batch ends."""
    model = FakeModel(seconds_per_call=0.0, seconds_per_word=0.25)
    reports = []

    async def main():
        queue = batcher(model, reports, max_batch_words=12)
        requests = [(["aaaa"], 0.0), (["ccc", "a"], 0.25), (["bb"], 0.5), (["d" * 8], 0.75), (["e" * 15], 0.875)]
        return await asyncio.gather(*(client(queue, jobs, when) for jobs, when in requests))

    answers = run(clock, main())
    assert model.batches == [["aaaa"], ["a", "bb", "ccc"], ["d" * 8], ["e" * 15]]
    assert model.started == approx([0.0, 1.0, 2.5, 4.5])  # one batch at a time, each right after the last
    assert answers == [
        (["AAAA"], approx(1.0)),
        (["CCC", "A"], approx(2.5)),
        (["BB"], approx(2.5)),
        (["D" * 8], approx(4.5)),
        (["E" * 15], approx(8.25)),
    ]
    assert [(report.inputs, report.words) for report in reports] == [(1, 4), (3, 6), (1, 8), (1, 15)]
    assert [report.model_seconds for report in reports] == approx([1.0, 1.5, 2.0, 3.75])
    assert waits(reports) == [(0.0,), approx((0.75, 0.5, 0.75)), approx((1.75,)), approx((3.625,))]


def test_inputs_that_come_during_a_rounds_batches_wait_for_the_next_round(clock):
    """A round's inputs are taken when it starts: an input that comes while its first batch runs does not join its
    later batches, though it is shorter than their inputs."""
    model = FakeModel(seconds_per_call=1.0)

    async def main():
        queue = batcher(model, max_batch_words=4)
        return await asyncio.gather(client(queue, ["aaa", "bbb", "ccc"]), client(queue, ["d"], when=0.5))

    assert run(clock, main()) == [(["AAA", "BBB", "CCC"], approx(3.0)), (["D"], approx(4.0))]
    assert model.batches == [["aaa"], ["bbb"], ["ccc"], ["d"]]


# ---- the wait for more inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gap", "batches", "answered", "queue_waits"),
    [
        (0.125, [["a", "b"], ["one", "two"]], (2.125, 2.125), [(0.0, 0.0), (0.125, 0.0)]),
        (0.375, [["a", "b"], ["one"], ["two"]], (2.25, 3.5), [(0.0, 0.0), (0.25,), (1.125,)]),
    ],
    ids=["second-within-the-wait", "second-after-it"],
)
def test_a_free_model_waits_for_as_many_inputs_as_the_last_round_answered(clock, gap, batches, answered, queue_waits):
    """After a round of 2 that took 1 s, a lone input waits up to a quarter of it (max_wait 5 s) for a second: one
    that comes 0.125 s later runs with it at once; one that comes 0.375 s later finds the first running alone since
    0.25 s, and waits its own quarter second from when the model is free."""
    model = FakeModel(seconds_per_call=1.0)
    reports = []

    async def main():
        queue = batcher(model, reports, max_wait=5.0)
        await queue.submit(["a", "b"])  # a round of 2, answered at 1 s
        return await asyncio.gather(client(queue, ["one"], 1.0), client(queue, ["two"], 1.0 + gap))

    assert run(clock, main()) == [(["ONE"], approx(answered[0])), (["TWO"], approx(answered[1]))]
    assert model.batches == batches
    assert waits(reports) == [approx(wait) for wait in queue_waits]


@pytest.mark.parametrize(
    ("max_wait", "model_seconds", "waited"), [(0.125, 1.0, 0.125), (30.0, 0.5, 0.125), (0.0, 1.0, 0.0)]
)
def test_the_wait_ends_at_the_limit_or_at_a_share_of_the_model_time(clock, max_wait, model_seconds, waited):
    """The second input of the round never comes: the first waits `max_wait` or `WAIT_SHARE` of the last batch's
    time on the model, whichever is shorter, then runs alone."""
    assert WAIT_SHARE == 0.25  # the cases' arithmetic
    model = FakeModel(seconds_per_call=model_seconds)
    reports = []

    async def main():
        queue = batcher(model, reports, max_wait=max_wait)
        await queue.submit(["a", "b"])
        return await client(queue, ["one"], model_seconds)

    assert run(clock, main()) == (["ONE"], approx(2 * model_seconds + waited))
    assert waits(reports)[1] == approx((waited,))
    assert model.batches == [["a", "b"], ["one"]]


def test_inputs_queued_while_the_model_ran_wait_for_the_clients_it_answers(clock):
    """Two groups of clients out of step (one queues while the other's batch runs) come together again: the queued
    input waits, from when the model is free, for the input of the client just answered."""
    model = FakeModel(seconds_per_call=2.0)  # waits of up to 0.5 s
    reports = []

    async def main():
        queue = batcher(model, reports, max_wait=5.0)
        await queue.submit(["a", "b"])  # a round of 2, answered at 2 s
        alone = asyncio.create_task(client(queue, ["c"], 2.0))  # runs alone after its wait: 2.5 s to 4.5 s
        queued = asyncio.create_task(client(queue, ["d"], 3.5))  # queued while "c" runs
        await alone
        back = await client(queue, ["e"], now())  # c's client again, right after its answer
        return await queued, back

    assert run(clock, main()) == ((["D"], approx(6.5)), (["E"], approx(6.5)))
    assert model.batches == [["a", "b"], ["c"], ["d", "e"]]
    assert waits(reports) == [(0.0, 0.0), approx((0.5,)), approx((1.0, 0.0))]


def test_the_largest_of_the_recent_rounds_is_waited_for_until_it_is_forgotten(clock):
    """After a round of 3, a lone client's inputs each wait the whole quarter of the model time for two more, until
    `ROUNDS_REMEMBERED` rounds of 1 have pushed the round of 3 out; then they run at once."""
    model = FakeModel(seconds_per_call=1.0)
    reports = []

    async def main():
        queue = batcher(model, reports, max_wait=5.0)
        await queue.submit(["a", "b", "c"])
        for number in range(ROUNDS_REMEMBERED + 1):
            await queue.submit([f"x{number}"])
        return now()

    lone_waits = [0.25] * ROUNDS_REMEMBERED + [0.0]
    assert run(clock, main()) == approx(1.0 + sum(1.0 + wait for wait in lone_waits))
    assert waits(reports)[1:] == [approx((wait,)) for wait in lone_waits]


def test_a_lone_client_never_waits(clock):
    model = FakeModel(seconds_per_call=1.0)

    async def main():
        queue = batcher(model, max_wait=30.0)
        return [await client(queue, [text], now()) for text in ("one", "two", "three")]

    assert run(clock, main()) == [(["ONE"], approx(1.0)), (["TWO"], approx(2.0)), (["THREE"], approx(3.0))]
    assert model.batches == [["one"], ["two"], ["three"]]


@pytest.mark.parametrize(("jobs", "waited"), [(["abc", "def"], 0.0), (["ab", "def"], 0.25)], ids=["full", "short"])
def test_a_full_batch_does_not_wait(clock, jobs, waited):
    """After a round of 3 inputs (1 s on the model), 2 inputs of 6 words (a batch's words) run at once, though the
    model expects a third; 2 of 5 words wait the quarter second for it."""
    model = FakeModel(seconds_per_call=1.0)
    reports = []

    async def main():
        queue = batcher(model, reports, max_wait=30.0, max_batch_words=6)
        await queue.submit(["a", "b", "c"])
        return await client(queue, jobs, 1.0)

    assert run(clock, main()) == ([job.upper() for job in jobs], approx(2.0 + waited))
    assert waits(reports)[1] == approx((waited, waited))


# ---- the queue bound, failures, clients that leave, the end ------------------------------------------------------


def test_more_inputs_than_the_queue_holds_are_refused(clock):
    """The inputs on the model count until they are answered: with 2 running and a bound of 3, 2 more are refused,
    1 is taken, and then a fourth is refused; once all are answered nothing counts."""
    model = FakeModel(seconds_per_call=1.0)

    async def main():
        queue = batcher(model, max_queued_inputs=3)
        running = asyncio.create_task(client(queue, ["a", "b"]))
        await at(0.5)
        assert (queue.queued, queue.unanswered) == (0, 2)
        with pytest.raises(QueueFull, match="2 inputs queued or running, at most 3"):
            await queue.submit(["c", "d"])
        taken = asyncio.create_task(queue.submit(["e"]))
        await asyncio.sleep(0)
        assert (queue.queued, queue.unanswered) == (1, 3)
        with pytest.raises(QueueFull, match="3 inputs queued or running, at most 3"):
            await queue.submit(["f"])
        return await running, await taken, now(), queue.unanswered

    assert run(clock, main()) == ((["A", "B"], approx(1.0)), ["E"], approx(2.0), 0)
    assert model.batches == [["a", "b"], ["e"]]


def test_a_failed_input_fails_its_request_only(clock):
    """Two requests in one batch: the one with the failing input raises its error, the other gets its results."""
    model = FakeModel(seconds_per_call=1.0)

    async def main():
        queue = batcher(model)
        return await asyncio.gather(queue.submit(["ok", "boom"]), queue.submit(["fine"]), return_exceptions=True)

    failed, fine = run(clock, main())
    assert isinstance(failed, ValueError) and str(failed) == "boom" and fine == ["FINE"]
    assert model.batches == [["ok", "boom", "fine"]]


def test_a_batch_whose_model_call_raises_fails_its_inputs_and_the_loop_goes_on(clock):
    model = FakeModel(seconds_per_call=1.0, broken_calls={1})

    async def main():
        queue = batcher(model)
        failures = await asyncio.gather(queue.submit(["x"]), queue.submit(["y"]), return_exceptions=True)
        return failures, await client(queue, ["z"], now())

    failures, answer = run(clock, main())
    assert [str(failure) for failure in failures] == ["broken", "broken"]
    assert answer == (["Z"], approx(2.0))
    assert model.batches == [["x", "y"], ["z"]]


def test_the_inputs_of_a_client_that_left_are_not_run(clock):
    """A request cancelled while its input waits (its client went away) leaves the queue's count at once, and its
    input is left out of the next batch."""
    model = FakeModel(seconds_per_call=1.0)
    reports = []

    async def main():
        queue = batcher(model, reports)
        first = asyncio.create_task(client(queue, ["a"]))
        leaving = asyncio.create_task(client(queue, ["gone"], 0.25))
        await at(0.5)
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        unanswered = queue.unanswered
        kept = await client(queue, ["kept"], 0.75)
        return await first, kept, unanswered

    assert run(clock, main()) == ((["A"], approx(1.0)), (["KEPT"], approx(2.0)), 1)
    assert model.batches == [["a"], ["kept"]]
    assert [report.inputs for report in reports] == [1, 1]


def test_close_stops_the_loop_and_a_later_request_starts_it_again(clock):
    model = FakeModel(seconds_per_call=1.0)

    async def main():
        queue = batcher(model)
        first = await queue.submit(["a"])
        await queue.close()
        left = asyncio.all_tasks() - {asyncio.current_task()}
        return first, left, await client(queue, ["b"], now())

    assert run(clock, main()) == (["A"], set(), (["B"], approx(2.0)))
