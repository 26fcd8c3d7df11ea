"""The HTTP app in-process (Starlette's test client) over a fake model: readiness, the routes' bodies, the error
bodies, a failure kept to its request, and the metrics and log lines; the real model and server are
test_serve_process.py's."""

import logging
import threading

import numpy as np
import pytest
from starlette.testclient import TestClient

from modeling_elmo.serve.app import build_app
from modeling_elmo.serve.batcher import StepReport
from modeling_elmo.serve.protocol import Limits, parse_openai_request, parse_word_request, response_bytes
from modeling_elmo.serve.runner import SENTENCE, ModelFailure
from modeling_elmo.serve.service import EmbeddingService
from modeling_elmo.serve.settings import ServeSettings
from modeling_elmo.word_splitter import split_words

WIDTH, LAYERS = 4, 3


class FakeRunner:
    """Splits as the tokenizer does; a word's vector in layer k is (k + len(word)) in every dimension; "FAIL" fails;
    `load` waits for `release`. Each job finishes at the step after it is added (the batcher's `StepModel`)."""

    num_layers, width = LAYERS, WIDTH

    def __init__(self):
        self.release = threading.Event()
        self.non_finite = False  # every result holds an infinity (a model that would give one unchecked)
        self.jobs: dict = {}
        self.added = 0

    def split_words(self, text: str):
        return split_words(text)

    def load(self) -> None:
        assert self.release.wait(30)

    @property
    def busy(self) -> bool:
        return bool(self.jobs)

    def add(self, key, job) -> None:
        self.added += 1
        self.jobs[key] = job

    def cancel(self, request) -> None:
        self.jobs = {key: job for key, job in self.jobs.items() if job.request != request}

    def reset(self) -> list:
        keys, self.jobs = list(self.jobs), {}
        return keys

    def step(self) -> StepReport:
        jobs, self.jobs = self.jobs, {}
        return StepReport(len(jobs), [(key, self.result(job)) for key, job in jobs.items()])

    def result(self, job):
        if "FAIL" in job.words:
            return ModelFailure("the model failed on this request (RuntimeError)")
        layers = np.array([[[k + len(word)] * WIDTH for word in job.words] for k in range(LAYERS)], np.float32)
        sentence = layers[-1].mean(0) / np.linalg.norm(layers[-1].mean(0))
        if self.non_finite:
            layers[..., 0] = sentence[0] = np.inf
        return sentence if job.kind == SENTENCE else layers


@pytest.fixture
def app_client():
    runner = FakeRunner()
    service = EmbeddingService(ServeSettings("some/model"), runner=runner)
    with TestClient(build_app(service)) as client:
        yield client, runner
        runner.release.set()  # a load a test left waiting ends now: the app's shutdown waits for it


def ready(app_client) -> TestClient:
    client, runner = app_client
    runner.release.set()
    for _ in range(300):
        if client.get("/health").status_code == 200:
            return client
        threading.Event().wait(0.1)
    raise AssertionError("never ready")


def test_loading_then_ready(app_client):
    client, runner = app_client
    assert client.get("/health").json() == {"status": "loading"}
    answer = client.post("/v1/embeddings", json={"input": "a"})
    assert answer.status_code == 503 and answer.json()["error"]["type"] == "server_error"
    ready(app_client)
    assert client.get("/health").json() == {"status": "ready"}


def test_openai_route(app_client):
    client = ready(app_client)
    body = client.post("/v1/embeddings", json={"input": ["ab c", "xyz"], "model": "whatever"}).json()
    assert body["model"] == "some/model" and body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    np.testing.assert_allclose(body["data"][1]["embedding"], [0.5] * WIDTH)  # unit vector of (5, 5, 5, 5)


def test_word_route(app_client):
    client = ready(app_client)
    body = client.post("/v1/word-embeddings", json={"input": "ab c", "layers": [0]}).json()
    (item,) = body["data"]
    assert item["words"] == ["ab", "c"] and item["offsets"] == [[0, 2], [3, 4]] and item["shape"] == [1, 2, WIDTH]
    assert item["embedding"] == [[[2.0] * WIDTH, [1.0] * WIDTH]]
    mixed = client.post("/v1/word-embeddings", json={"input": "c", "scalar_mix": {"weights": [0, 0, 0], "gamma": 3}})
    np.testing.assert_allclose(mixed.json()["data"][0]["embedding"], [[3 * (1 + 2 + 3) / 3] * WIDTH], rtol=1e-6)


def test_errors_and_the_metrics_and_log(app_client, caplog):
    client = ready(app_client)
    with caplog.at_level(logging.INFO, logger="modeling_elmo.serve"):
        assert client.post("/v1/embeddings", json={"input": "A secret FAIL"}).status_code == 500
        assert client.post("/v1/embeddings", json={"input": "fine"}).status_code == 200
        assert client.post("/v1/embeddings", content=b"{").json()["error"]["param"] == "body"
        assert client.get("/nowhere").json()["error"]["type"] == "not_found"
    metrics = client.get("/metrics").text
    assert 'elmo_requests_total{route="/v1/embeddings",status="500"} 1.0' in metrics
    assert 'elmo_requests_total{route="/v1/embeddings",status="200"} 1.0' in metrics
    assert 'elmo_request_errors_total{status="400"} 1.0' in metrics
    assert 'elmo_requests_total{route="other",status="404"} 1.0' in metrics
    assert "elmo_words_total 4.0" in metrics and "elmo_ready 1.0" in metrics  # the failed input's words count too
    lines = [record.getMessage() for record in caplog.records if "POST /v1/embeddings" in record.getMessage()]
    assert len(lines) == 3 and '" 500 inputs=1 words=3' in lines[0]
    assert not any("secret" in line for line in lines)


def test_the_models_routes(app_client):
    client, _ = app_client  # they answer while the model loads too
    listed = client.get("/v1/models").json()
    assert listed["object"] == "list" and len(listed["data"]) == 1
    (model,) = listed["data"]
    assert set(model) == {"id", "object", "created", "owned_by"}
    assert model["id"] == "some/model" and model["object"] == "model" and isinstance(model["created"], int)
    assert client.get("/v1/models/some/model").json() == model
    unknown = client.get("/v1/models/other")
    error = unknown.json()["error"]
    assert unknown.status_code == 404 and error["code"] == "model_not_found" and error["param"] == "model"
    assert error["message"].startswith("model: ") and "\n" not in error["message"]
    metrics = client.get("/metrics").text
    assert 'elmo_requests_total{route="/v1/models",status="200"} 1.0' in metrics
    assert 'elmo_requests_total{route="/v1/models/{id}",status="200"} 1.0' in metrics
    assert 'elmo_requests_total{route="/v1/models/{id}",status="404"} 1.0' in metrics


def test_dimensions_the_models_width_is_accepted(app_client):
    client = ready(app_client)
    assert client.post("/v1/embeddings", json={"input": "a b", "dimensions": WIDTH}).status_code == 200
    for refused in (WIDTH - 1, WIDTH + 1, float(WIDTH), True, str(WIDTH)):
        answer = client.post("/v1/embeddings", json={"input": "a b", "dimensions": refused})
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "dimensions"


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
@pytest.mark.parametrize(
    ("scalar_mix", "status", "param"),
    [
        ({"weights": [0, 0, 0], "gamma": 1e39}, 400, "scalar_mix.gamma"),  # beyond float32: infinite there
        ({"weights": [0, 0, 0], "gamma": -1e39}, 400, "scalar_mix.gamma"),
        ({"weights": [1e39, 0, 0]}, 400, "scalar_mix.weights"),
        ({"weights": [0, 10**400, 0]}, 400, "scalar_mix.weights"),  # too large for a double
        ({"weights": [0, 0, 0], "gamma": 3e38}, 422, "scalar_mix.gamma"),  # in range, but the mixed values overflow
    ],
)
def test_numbers_beyond_float32_are_refused_never_answered_as_infinity(
    app_client, scalar_mix, status, param, encoding_format
):
    client = ready(app_client)
    document = {"input": "ab c", "scalar_mix": scalar_mix, "encoding_format": encoding_format}
    answer = client.post("/v1/word-embeddings", json=document)
    error = answer.json()["error"]
    assert (answer.status_code, error["param"]) == (status, param)
    assert error["message"].startswith(f"{param}: ") and "\n" not in error["message"]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_json_non_finite_literals_are_refused(app_client, literal):
    client = ready(app_client)
    body = b'{"input": "c", "scalar_mix": {"weights": [0, 0, 0], "gamma": ' + literal + b"}}"
    answer = client.post("/v1/word-embeddings", content=body)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "scalar_mix.gamma"


def test_a_non_finite_result_is_500_not_200(app_client):
    client, runner = app_client
    runner.non_finite = True
    client = ready(app_client)
    for route in ("/v1/embeddings", "/v1/word-embeddings"):
        answer = client.post(route, json={"input": "ab c", "encoding_format": "base64"})
        assert answer.status_code == 500 and answer.json()["error"]["code"] == "not_finite"


def test_an_unexpected_failure_is_one_line_json_500(app_client, monkeypatch):
    client = ready(app_client)
    monkeypatch.setattr("modeling_elmo.serve.responses.openai_body", lambda *args: 1 / 0)
    with TestClient(client.app, raise_server_exceptions=False) as quiet:
        answer = quiet.post("/v1/embeddings", json={"input": "ab"})
    error = answer.json()["error"]
    assert answer.status_code == 500 and error["code"] == "server_failure" and "ZeroDivisionError" in error["message"]
    assert "\n" not in error["message"] and "Traceback" not in answer.text


def test_a_loop_failure_is_500_for_its_request_and_the_server_goes_on(app_client, monkeypatch):
    client = ready(app_client)
    runner = app_client[1]
    step = runner.step
    monkeypatch.setattr(runner, "step", lambda: 1 / 0)  # the loop's own failure, outside any input
    answer = client.post("/v1/embeddings", json={"input": ["ab", "c"]})
    error = answer.json()["error"]
    assert answer.status_code == 500 and error["code"] == "batch_failure" and "ZeroDivisionError" in error["message"]
    monkeypatch.setattr(runner, "step", step)
    assert client.post("/v1/embeddings", json={"input": ["ab", "c"]}).status_code == 200


def test_2048_inputs_by_default_and_an_over_budget_response_is_refused_before_the_model():
    runner = FakeRunner()
    runner.release.set()
    two_words = parse_word_request({"input": ["ab c"] * 2048}, Limits(), split_words, LAYERS)
    budget = response_bytes(two_words, WIDTH, LAYERS, True, "some/model")  # 2,048 inputs of two words, every layer
    settings = ServeSettings("some/model", limits=Limits(response_bytes=budget))
    with TestClient(build_app(EmbeddingService(settings, runner=runner), load_in_background=False)) as client:
        answer = client.post("/v1/embeddings", json={"input": ["ab c"] * 2048})
        assert answer.status_code == 200 and len(answer.json()["data"]) == 2048
        assert client.post("/v1/word-embeddings", json={"input": ["ab c"] * 2048}).status_code == 200
        answered = runner.added
        over = client.post("/v1/word-embeddings", json={"input": ["ab c d"] * 2048})
        error = over.json()["error"]
        assert over.status_code == 413 and error["param"] == "input" and "--max-response-bytes" in error["message"]
        assert runner.added == answered  # refused before any model work
        assert client.post("/v1/embeddings", json={"input": ["ab c"] * 2049}).status_code == 413
        document = {"input": ["ab c d"] * 2048, "encoding_format": "base64"}  # a quarter of the size fits
        assert client.post("/v1/word-embeddings", json=document).status_code == 200


class LongestNumbers(FakeRunner):
    """Every value as long as a JSON number gets (23 bytes: the smallest normal float32, negated)."""

    def result(self, job):
        return np.full_like(super().result(job), -1.1754944e-38)


AROUND_THE_BUDGET = 30_000


@pytest.mark.parametrize(
    ("route", "shape"),
    [
        ("/v1/embeddings", {}),
        ("/v1/embeddings", {"encoding_format": "base64"}),
        ("/v1/word-embeddings", {}),
        ("/v1/word-embeddings", {"layers": [2, 0]}),
        ("/v1/word-embeddings", {"layers": "top", "encoding_format": "base64"}),
        ("/v1/word-embeddings", {"scalar_mix": {"weights": [1, 2, 3], "gamma": 0.5}}),
    ],
)
def test_around_the_budget_the_body_fits_its_bound_and_one_word_more_is_413_before_the_model(route, shape):
    """The request of the most words whose bound fits the budget is answered within it (every number as long as
    a JSON number gets); one word more is 413 before any model work, in one line naming the limit and the smaller
    requests to make."""
    runner = LongestNumbers()
    runner.release.set()
    per_word = route == "/v1/word-embeddings"
    limits = Limits(response_bytes=AROUND_THE_BUDGET)

    def document(words: int) -> dict:  # inputs of up to 7 words ("ab" each), or of one on OpenAI's route
        size = 7 if per_word else 1
        return {"input": [" ".join(["ab"] * min(size, words - start)) for start in range(0, words, size)], **shape}

    def bound(words: int) -> int:
        parse = parse_word_request if per_word else parse_openai_request
        request = parse(document(words), limits, split_words, *((LAYERS,) if per_word else ()))
        return response_bytes(request, WIDTH, LAYERS, per_word, "some/model")

    most = 1
    while bound(most + 1) <= AROUND_THE_BUDGET:
        most += 1
    assert AROUND_THE_BUDGET - bound(most) < bound(most + 1) - bound(most)  # the most that fit
    settings = ServeSettings("some/model", limits=limits)
    with TestClient(build_app(EmbeddingService(settings, runner=runner), load_in_background=False)) as client:
        answer = client.post(route, json=document(most))
        assert answer.status_code == 200 and answer.json()["usage"]["prompt_tokens"] == most
        assert len(answer.content) <= bound(most) <= AROUND_THE_BUDGET
        answered = runner.added
        over = client.post(route, json=document(most + 1))
        error = over.json()["error"]
        assert (over.status_code, error["param"], error["code"]) == (413, "input", "too_large")
        assert runner.added == answered  # refused before any model work
        message = error["message"]
        limit = f"over the limit of {AROUND_THE_BUDGET} (--max-response-bytes)"
        assert f"may weigh up to {bound(most + 1)} bytes, {limit}" in message
        assert "fewer inputs" in message and "\n" not in message
        assert ("base64" in message) == (shape.get("encoding_format") != "base64")
        assert all(("`layers`" in message, "`scalar_mix`" in message)) == per_word


@pytest.mark.parametrize("freeze", [False, True])
def test_a_server_process_freezes_what_is_alive_once_loaded(freeze):
    """`elmo serve` and a Ray Serve replica (`freeze_after_load`) move the objects alive after loading out of the
    collector's scans; an app built in another program leaves its collector as it is."""
    import gc

    runner = FakeRunner()
    runner.release.set()
    service = EmbeddingService(ServeSettings("some/model"), runner=runner)
    before = gc.get_freeze_count()
    try:
        with TestClient(build_app(service, load_in_background=False, freeze_after_load=freeze)) as client:
            assert client.get("/health").status_code == 200
            assert (gc.get_freeze_count() > before) == freeze
    finally:
        gc.unfreeze()  # this test process's objects go back to the collector
