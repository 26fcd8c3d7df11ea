"""The batcher in-process with a fake step model on the model's one thread: every result back to its own caller, an
input joining the running ones at the next step (not after them), the queue bound (429), a failed input failing its
request only (the rest of it dropped from the model), clients that leave, and the loop supervised: a step that raises
fails the inputs the model held with `BatchFailure` and the loop goes on, as it does past a metrics report that
raises. (tests/inference/test_step_scheduler.py tests the scheduling itself; test_serve_process.py the real model.)"""

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from modeling_elmo.serve.batcher import Batcher, BatchFailure, QueueFull, StepReport

ANSWER_SECONDS = 30  # far longer than any fake step takes: a request not answered by then never is


class FakeStepModel:
    """A job is (name, steps): it finishes after `steps` time steps with the result `name.upper()`, or fails with
    `RuntimeError` if its name is "fail". Every job added runs from the next step. `raise_at_step`: the step numbers
    that raise instead of answering. `gate`: each step waits until it is set (a test holds the model with it)."""

    def __init__(self):
        self.running: dict = {}  # key -> [job, steps left]
        self.steps = 0
        self.raise_at_step: set[int] = set()
        self.cancelled: list = []
        self.gate = threading.Event()
        self.gate.set()
        self.thread: set[str] = set()

    @property
    def busy(self) -> bool:
        return bool(self.running)

    def add(self, key, job) -> None:
        self.thread.add(threading.current_thread().name)
        self.running[key] = [job, job[1]]

    def cancel(self, request) -> None:
        self.cancelled.append(request)
        for key in [key for key, (job, _) in self.running.items() if job[2] == request]:
            del self.running[key]

    def reset(self) -> list:
        keys = list(self.running)
        self.running.clear()
        return keys

    def step(self) -> StepReport:
        assert self.gate.wait(ANSWER_SECONDS)
        self.steps += 1
        if self.steps in self.raise_at_step:
            raise ValueError("the step failed")
        finished = []
        rows = len(self.running)
        for key, entry in list(self.running.items()):
            entry[1] -= 1
            if entry[1] == 0:
                del self.running[key]
                name = entry[0][0]
                finished.append((key, RuntimeError("model failure") if name == "fail" else name.upper()))
        return StepReport(rows, finished)


def job(name: str, steps: int = 1, request: int = 0) -> tuple:
    return (name, steps, request)


def scenario(check, model: FakeStepModel | None = None, max_queued_inputs: int = 100, reports: list | None = None):
    """Run `await check(batcher, model)` with a batcher over `model` on a one-thread executor."""
    model = model or FakeStepModel()

    async def run():
        with ThreadPoolExecutor(1, thread_name_prefix="model") as executor:
            queue = Batcher(
                model,
                executor,
                words_of=lambda job: len(job[0]),
                request_of=lambda job: job[2],
                max_queued_inputs=max_queued_inputs,
                on_step=(reports.append if reports is not None else lambda report: None),
            )
            try:
                await asyncio.wait_for(check(queue, model), ANSWER_SECONDS)
            finally:
                model.gate.set()
                await queue.close()

    asyncio.run(run())
    return model


def test_every_request_gets_its_own_results_in_order():
    async def check(queue, model):
        requests = [[job(f"r{r}j{j}", steps=1 + (r + j) % 4, request=r) for j in range(r + 1)] for r in range(8)]
        answers = await asyncio.gather(*(queue.submit(jobs) for jobs in requests))
        assert answers == [[name.upper() for name, _, _ in jobs] for jobs in requests]
        assert queue.unanswered == 0 and queue.queued == 0

    model = scenario(check)
    assert model.thread == {"model_0"}  # the model is touched on its own thread only


def test_an_input_joins_at_the_next_step_and_does_not_wait_for_a_longer_one():
    """A 1-step request sent while a 1,000-step one runs is answered while the long one still runs."""

    async def check(queue, model):
        long = asyncio.ensure_future(queue.submit([job("long", steps=1000, request=0)]))
        while model.steps < 3:
            await asyncio.sleep(0.001)
        assert await queue.submit([job("short", request=1)]) == ["SHORT"]
        assert not long.done()
        assert await long == ["LONG"]

    scenario(check)


def test_the_step_reports_count_rows_words_and_finished_inputs():
    reports = []

    async def check(queue, model):
        await asyncio.gather(queue.submit([job("ab", 2, 0), job("c", 1, 0)]), queue.submit([job("def", 2, 1)]))

    scenario(check, reports=reports)
    assert sum(report.words for report in reports) == 2 + 1 + 3
    assert sum(len(report.input_seconds) for report in reports) == 3
    assert max(report.rows for report in reports) == 3


def test_more_inputs_than_the_queue_holds_are_refused():
    async def check(queue, model):
        model.gate.clear()  # the model holds its first step
        held = asyncio.ensure_future(queue.submit([job("a", request=0), job("b", request=0), job("c", request=0)]))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull, match=r"3 inputs queued or running, at most 4 \(--max-queue\)"):
            await queue.submit([job("d", request=1), job("e", request=1)])
        fits = asyncio.ensure_future(queue.submit([job("d", request=1)]))
        model.gate.set()
        assert await held == ["A", "B", "C"] and await fits == ["D"]
        assert await queue.submit([job("x", request=2)] * 4) == ["X"] * 4  # answered inputs leave the count

    scenario(check, max_queued_inputs=4)


def test_a_failed_input_fails_its_request_only_and_drops_the_rest_of_it():
    async def check(queue, model):
        failing = queue.submit([job("fail", 1, request=0), job("slow", 50, request=0)])
        fine = queue.submit([job("fine", 3, request=1)])
        answers = await asyncio.gather(failing, fine, return_exceptions=True)
        assert isinstance(answers[0], RuntimeError) and str(answers[0]) == "model failure"
        assert answers[1] == ["FINE"]
        while not model.cancelled:  # the model's thread takes the cancelling at its next step
            await asyncio.sleep(0.001)
        assert model.cancelled == [0] and "slow" not in [job[0] for job, _ in model.running.values()]

    scenario(check)


def test_a_step_that_raises_fails_what_the_model_held_and_the_loop_goes_on(caplog):
    model = FakeStepModel()
    model.raise_at_step = {2}

    async def check(queue, model):
        with caplog.at_level(logging.ERROR, logger="modeling_elmo.serve"):
            answers = await asyncio.gather(
                queue.submit([job("a", 5, 0)]), queue.submit([job("b", 5, 1)]), return_exceptions=True
            )
        assert all(isinstance(answer, BatchFailure) for answer in answers)
        assert "ValueError" in str(answers[0]) and "log" in str(answers[0])
        assert await queue.submit([job("c", 2, 2)]) == ["C"]

    scenario(check, model)
    assert "the server's loop failed on 2 inputs" in caplog.text and "Traceback" in caplog.text


def test_a_metrics_report_that_raises_leaves_the_answers_and_the_loop(caplog):
    def report(metrics):
        raise KeyError("metrics")

    async def check(queue, model):
        queue.on_step = report
        with caplog.at_level(logging.ERROR, logger="modeling_elmo.serve"):
            assert await queue.submit([job("a", 2, 0)]) == ["A"]
            assert await queue.submit([job("b", 1, 1)]) == ["B"]

    scenario(check)
    assert "the step report failed" in caplog.text


def test_an_input_the_model_refuses_fails_alone():
    class Refusing(FakeStepModel):
        def add(self, key, job):
            if job[0] == "refused":
                raise ValueError("refused")
            super().add(key, job)

    async def check(queue, model):
        answers = await asyncio.gather(
            queue.submit([job("refused", 1, 0)]), queue.submit([job("b", 2, 1)]), return_exceptions=True
        )
        assert isinstance(answers[0], BatchFailure) and answers[1] == ["B"]

    scenario(check, Refusing())


def test_the_inputs_of_a_client_that_left_leave_the_model():
    async def check(queue, model):
        leaving = asyncio.ensure_future(queue.submit([job("a", 10_000, request=7)]))
        while not model.running:
            await asyncio.sleep(0.001)
        leaving.cancel()
        while model.running:
            await asyncio.sleep(0.001)
        assert model.cancelled == [7] and queue.unanswered == 0
        assert await queue.submit([job("b", 1, 8)]) == ["B"]

    scenario(check)


def test_close_stops_the_loop_and_a_later_request_starts_it_again():
    async def check(queue, model):
        assert await queue.submit([job("a")]) == ["A"]
        await queue.close()
        assert await queue.submit([job("b")]) == ["B"]

    scenario(check)
