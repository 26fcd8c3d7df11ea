"""The batcher in-process, with a fake model: length-sorted batches bounded by words, the wait limit, the queue
bound (429), failures per input, and every result back to its own caller."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from modeling_elmo.serve.batcher import Batcher, QueueFull, cut_batches


def entries(*word_counts: int) -> list:
    return [SimpleNamespace(words=count, arrival=index) for index, count in enumerate(word_counts)]


def test_cut_batches_sorts_by_words_then_arrival_and_bounds_the_words():
    batches = cut_batches(entries(5, 1, 3, 1, 9, 2), max_batch_words=6)
    assert [[entry.words for entry in batch] for batch in batches] == [[1, 1, 2], [3], [5], [9]]
    assert [entry.arrival for entry in batches[0]] == [1, 3, 5]


def test_an_input_longer_than_a_batch_runs_alone():
    assert [[entry.words for entry in batch] for batch in cut_batches(entries(2, 50, 2), 10)] == [[2, 2], [50]]


class FakeModel:
    """Jobs are strings; the result of one is its upper case, "boom" fails; records each batch it ran."""

    def __init__(self, seconds: float = 0.0):
        self.batches: list[list[str]] = []
        self.seconds = seconds

    def __call__(self, jobs: list[str]) -> list:
        time.sleep(self.seconds)
        self.batches.append(list(jobs))
        return [ValueError(job) if job == "boom" else job.upper() for job in jobs]


def batcher(model, **settings) -> Batcher:
    options = {"max_batch_words": 100, "max_wait": 0.0, "max_queued_inputs": 100, **settings}
    return Batcher(model, ThreadPoolExecutor(1), words_of=len, **options)


def run(coroutine):
    return asyncio.run(coroutine)


def test_every_caller_gets_its_own_results_and_batches_hold_several_callers():
    model = FakeModel(seconds=0.02)

    async def main():
        queue = batcher(model, max_batch_words=12)
        requests = [[f"r{k}a", f"r{k}bb"] for k in range(10)]
        answers = await asyncio.gather(*(queue.submit(request) for request in requests))
        await queue.close()
        return requests, answers

    requests, answers = run(main())
    assert answers == [[job.upper() for job in request] for request in requests]
    assert len(model.batches) < 10  # requests queued while the model ran went together
    assert all(sum(map(len, batch)) <= 12 for batch in model.batches)
    for batch in model.batches:
        assert [len(job) for job in batch] == sorted(len(job) for job in batch)


def test_a_free_model_waits_for_as_many_inputs_as_the_last_round_answered():
    model = FakeModel(seconds=1.0)  # a wait of up to a quarter of it: 0.25 s

    async def main():
        queue = batcher(model, max_wait=5.0)
        await queue.submit(["a", "b"])  # a round of 2
        first = asyncio.create_task(queue.submit(["one"]))
        await asyncio.sleep(0.1)
        second = await queue.submit(["two"])
        return await first, second

    assert run(main()) == (["ONE"], ["TWO"])
    assert model.batches == [["a", "b"], ["one", "two"]]


@pytest.mark.parametrize(("max_wait", "model_seconds", "waited"), [(0.1, 1.0, 0.1), (30.0, 0.4, 0.1)])
def test_the_wait_ends_at_the_limit_or_at_a_share_of_the_model_time(max_wait, model_seconds, waited):
    model = FakeModel(seconds=model_seconds)

    async def main():
        queue = batcher(model, max_wait=max_wait)
        await queue.submit(["a", "b"])
        started = time.monotonic()
        answer = await queue.submit(["one"])  # the second input of the round never comes
        return answer, time.monotonic() - started

    answer, seconds = run(main())
    assert answer == ["ONE"] and model_seconds + waited <= seconds < model_seconds + 10


def test_inputs_queued_while_the_model_ran_wait_for_the_clients_it_answers():
    """Two groups of clients out of step (one queues while the other's batch runs) come together again: the queued
    input waits, from when the model is free, for the input of the client just answered."""
    model = FakeModel(seconds=2.0)  # waits of up to 0.5 s

    async def main():
        queue = batcher(model, max_wait=5.0)
        await queue.submit(["a", "b"])  # a round of 2
        alone = asyncio.create_task(queue.submit(["c"]))  # runs alone after its wait
        await asyncio.sleep(1.0)
        queued = asyncio.create_task(queue.submit(["d"]))  # queued while "c" runs
        await alone
        back = await queue.submit(["e"])  # c's client again, right after its answer
        return await queued, back

    assert run(main()) == (["D"], ["E"])
    assert model.batches == [["a", "b"], ["c"], ["d", "e"]]


def test_a_lone_client_never_waits():
    model = FakeModel()

    async def main():
        queue = batcher(model, max_wait=30.0)
        started = time.monotonic()
        for text in ("one", "two", "three"):
            await queue.submit([text])
        return time.monotonic() - started

    assert run(main()) < 10
    assert model.batches == [["one"], ["two"], ["three"]]


def test_a_full_batch_does_not_wait():
    model = FakeModel()

    async def main():
        queue = batcher(model, max_wait=30.0, max_batch_words=6)
        started = time.monotonic()
        answer = await queue.submit(["abc", "def"])
        return answer, time.monotonic() - started

    answer, seconds = run(main())
    assert answer == ["ABC", "DEF"] and seconds < 10


def test_more_inputs_than_the_queue_holds_are_refused():
    model = FakeModel(seconds=0.2)

    async def main():
        queue = batcher(model, max_queued_inputs=3)
        running = asyncio.create_task(queue.submit(["a", "b"]))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull, match="2 inputs queued or running, at most 3"):
            await queue.submit(["c", "d"])
        assert await queue.submit(["e"]) == ["E"]
        return await running, queue.unanswered

    assert run(main()) == (["A", "B"], 0)


def test_a_failed_input_fails_its_request_only():
    model = FakeModel()

    async def main():
        queue = batcher(model, max_wait=0.1)
        return await asyncio.gather(queue.submit(["ok", "boom"]), queue.submit(["fine"]), return_exceptions=True)

    failed, fine = run(main())
    assert isinstance(failed, ValueError) and fine == ["FINE"]


def test_a_batch_whose_model_call_raises_fails_its_inputs_and_the_loop_goes_on():
    calls = []

    def model(jobs):
        calls.append(jobs)
        if len(calls) == 1:
            raise RuntimeError("broken")
        return [job.upper() for job in jobs]

    async def main():
        queue = batcher(model)
        with pytest.raises(RuntimeError, match="broken"):
            await queue.submit(["x"])
        return await queue.submit(["y"])

    assert run(main()) == ["Y"]
