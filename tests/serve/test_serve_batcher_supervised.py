"""The batcher's loop supervised, in-process with a fake model: a failure inside the model's call, and failures of
the loop's own parts outside it (the round's cut, a `run` that answers the wrong number of results, a batch report
that raises), each fail the inputs they touched with an error and leave the loop answering the next requests.
(test_serve_batcher.py tests the batching itself.)"""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from modeling_elmo.serve import batcher as batcher_module
from modeling_elmo.serve.batcher import Batcher, BatchFailure

ANSWER_SECONDS = 10  # far longer than a fake batch takes: a request not answered by then never is


class Once:
    """A callable that raises `error` on its first call, then does what `then` does."""

    def __init__(self, error: Exception, then):
        self.error, self.then, self.calls = error, then, 0

    def __call__(self, *args):
        self.calls += 1
        if self.calls == 1:
            raise self.error
        return self.then(*args)


def double(jobs):
    return [2 * job for job in jobs]


async def requests(batcher: Batcher, *requests: list) -> list:
    """Each request's results (or its exception), all submitted at once."""
    answers = asyncio.gather(*(batcher.submit(jobs) for jobs in requests), return_exceptions=True)
    return await asyncio.wait_for(answers, ANSWER_SECONDS)


def run_with(run=double, on_batch=lambda report: None, check=None) -> None:
    async def scenario():
        with ThreadPoolExecutor(1) as executor:
            batcher = Batcher(run, executor, lambda job: 1, 100, 0.0, 100, on_batch)
            try:
                await check(batcher)
            finally:
                await batcher.close()

    asyncio.run(scenario())


def test_a_model_call_that_raises_once_fails_its_batch_and_the_loop_goes_on():
    async def check(batcher):
        first = await requests(batcher, [1, 2], [3])
        assert all(isinstance(answer, RuntimeError) and str(answer) == "model down" for answer in first)
        assert await requests(batcher, [4], [5, 6]) == [[8], [10, 12]]

    run_with(run=Once(RuntimeError("model down"), double), check=check)


def test_a_wrong_number_of_results_fails_that_batch_with_batch_failure():
    async def check(batcher):
        (failed,) = await requests(batcher, [1, 2, 3])
        assert isinstance(failed, BatchFailure) and "ValueError" in str(failed)
        assert await requests(batcher, [7], [8]) == [[14], [16]]

    run_with(run=lambda jobs: double(jobs)[:-1] if 3 in jobs else double(jobs), check=check)


def test_a_failure_of_the_round_outside_the_model_call_fails_its_inputs_and_the_loop_goes_on(monkeypatch):
    monkeypatch.setattr(batcher_module, "cut_batches", Once(KeyError("cut"), batcher_module.cut_batches))

    async def check(batcher):
        first = await requests(batcher, [1], [2, 3])
        assert all(isinstance(answer, BatchFailure) and "KeyError" in str(answer) for answer in first)
        assert batcher.queued == 0 == batcher.unanswered
        assert await requests(batcher, [4], [5]) == [[8], [10]]

    run_with(check=check)


def test_a_batch_report_that_raises_leaves_the_answers_and_the_loop(caplog):
    reports = []

    async def check(batcher):
        assert await requests(batcher, [1, 2]) == [[2, 4]]  # answered before the report failed
        assert await requests(batcher, [3]) == [[6]]
        assert [report.inputs for report in reports] == [1]  # the second round's report

    with caplog.at_level("ERROR", logger="modeling_elmo.serve"):
        run_with(on_batch=Once(OSError("metrics down"), reports.append), check=check)
    assert "the batcher failed on 2 inputs" in caplog.text and "OSError: metrics down" in caplog.text


@pytest.mark.parametrize("failing_rounds", [1, 3])
def test_every_round_after_the_failures_is_answered(monkeypatch, failing_rounds):
    calls = {"count": 0}
    cut = batcher_module.cut_batches

    def flaky(entries, max_words):
        calls["count"] += 1
        if calls["count"] <= failing_rounds:
            raise RuntimeError("flaky")
        return cut(entries, max_words)

    monkeypatch.setattr(batcher_module, "cut_batches", flaky)

    async def check(batcher):
        for _ in range(failing_rounds):
            (failed,) = await requests(batcher, [1])
            assert isinstance(failed, BatchFailure)
        assert await requests(batcher, [1], [2]) == [[2], [4]]

    run_with(check=check)
