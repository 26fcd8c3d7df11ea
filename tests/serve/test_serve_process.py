"""`elmo serve` as a real process on 127.0.0.1, over HTTP (the `openai` client included): its vectors against the
model's (sentence-transformers, and the model called on each input alone), concurrent clients, every bad input,
the size limits, 429, a model failure, SIGTERM with requests in flight, and the metrics of what was sent."""

import base64
import json
import signal
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from serve_process import ELMO_SERVE, ServeProcess

pytestmark = pytest.mark.integration

TOLERANCE = 1e-6  # a sentence in a batch of others against the same sentence alone (docs/serving.md)
SENTENCES = [
    "The bank closed its doors .",
    "River bank",
    "Zürich 's café — naïve 東京 Ελλάδα .",
    "ELMo reads every word with a character CNN, then a two-layer biLM reads the sentence both ways.",
    "Short",
    "A sentence of seven words in it.",
]


@pytest.fixture(scope="module")
def server(converted_fixture, tmp_path_factory):
    served = ServeProcess(
        converted_fixture,
        "--max-inputs",
        "8",
        "--max-words",
        "40",
        "--max-body-bytes",
        "20000",
        log=tmp_path_factory.mktemp("serve") / "server.log",
    )
    yield served
    served.stop()


@pytest.fixture(scope="module")
def sentence_vectors(converted_fixture):
    """Each sentence alone through `SentenceTransformer(folder).encode`, L2-normalised: (width,) by text."""
    from sentence_transformers import SentenceTransformer

    import modeling_elmo  # noqa: F401  (registers ELMo with the Auto classes)

    encoder = SentenceTransformer(str(converted_fixture), device="cpu")
    return lambda text: encoder.encode([text], normalize_embeddings=True)[0]


@pytest.fixture(scope="module")
def word_layers(converted_fixture):
    """Each text alone through `ElmoModel`: its words' layers (num_layers, words, width) and its words."""
    from modeling_elmo import ElmoModel, ElmoTokenizer

    model = ElmoModel.from_pretrained(str(converted_fixture)).eval()
    tokenizer = ElmoTokenizer.from_pretrained(str(converted_fixture))

    def layers(text: str):
        batch = tokenizer([text], return_tensors="pt")
        with torch.inference_mode():
            output = model(**batch, output_hidden_states=True)
        return torch.stack(output.hidden_states, dim=1)[0].numpy(), tokenizer.tokenize(text)

    return layers


def embeddings(server, document):
    status, body = server.post("/v1/embeddings", document)
    assert status == 200, body
    return body


def test_health_and_openai_shape(server, sentence_vectors):
    status, body = server.get("/health")
    assert status == 200 and json.loads(body) == {"status": "ready"}
    body = embeddings(server, {"model": "elmo-fixture", "input": SENTENCES[:2]})
    assert body["object"] == "list" and body["model"] == "elmo-fixture"
    assert [item["index"] for item in body["data"]] == [0, 1]
    assert {item["object"] for item in body["data"]} == {"embedding"}
    assert body["usage"] == {"prompt_tokens": 6 + 2, "total_tokens": 6 + 2}
    for item, text in zip(body["data"], SENTENCES[:2], strict=True):
        vector = np.asarray(item["embedding"], dtype=np.float32)
        assert vector.shape == (32,) and abs(np.linalg.norm(vector) - 1) < 1e-6
        np.testing.assert_allclose(vector, sentence_vectors(text), atol=TOLERANCE, rtol=0)


def test_a_string_input_and_base64(server, sentence_vectors):
    floats = embeddings(server, {"input": SENTENCES[2]})["data"]
    encoded = embeddings(server, {"input": SENTENCES[2], "encoding_format": "base64"})["data"]
    assert len(floats) == len(encoded) == 1
    decoded = np.frombuffer(base64.b64decode(encoded[0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, sentence_vectors(SENTENCES[2]), atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(decoded, np.asarray(floats[0]["embedding"], np.float32), atol=TOLERANCE, rtol=0)


def test_the_openai_client(server, sentence_vectors):
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    for encoding_format in ("float", "base64"):  # the client asks for base64 unless told and decodes it itself
        kwargs = {} if encoding_format == "base64" else {"encoding_format": "float"}
        answer = client.embeddings.create(model="elmo-fixture", input=SENTENCES, **kwargs)
        assert [item.index for item in answer.data] == list(range(len(SENTENCES)))
        for item, text in zip(answer.data, SENTENCES, strict=True):
            np.testing.assert_allclose(item.embedding, sentence_vectors(text), atol=TOLERANCE, rtol=0)
    assert answer.usage.prompt_tokens == answer.usage.total_tokens > len(SENTENCES)


def test_the_openai_client_sees_a_bad_request(server):
    import openai

    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as raised:
        client.embeddings.create(model="elmo-fixture", input="some text", dimensions=8)
    assert raised.value.body["param"] == "dimensions"
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("text-embedding-3-small")
    assert raised.value.body["code"] == "model_not_found"


def test_the_openai_client_models_and_dimensions(server, sentence_vectors):
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    (model,) = client.models.list().data
    assert (model.id, model.object, model.owned_by) == ("elmo-fixture", "model", "elmo-serve")
    assert isinstance(model.created, int) and client.models.retrieve("elmo-fixture") == model
    answer = client.embeddings.create(model=model.id, input=SENTENCES[0], dimensions=32)  # the model's width
    np.testing.assert_allclose(answer.data[0].embedding, sentence_vectors(SENTENCES[0]), atol=TOLERANCE, rtol=0)


def test_numbers_beyond_float32_get_400_naming_the_field(server):
    for encoding_format in ("float", "base64"):
        for mix, param in (({"weights": [0, 0, 0], "gamma": 1e39}, "gamma"), ({"weights": [1e39, 0, 0]}, "weights")):
            document = {"input": "text", "scalar_mix": mix, "encoding_format": encoding_format}
            status, body = server.post("/v1/word-embeddings", document)
            assert status == 400 and body["error"]["param"] == f"scalar_mix.{param}", body


def shared_steps(server) -> float:
    """Time steps that ran more than one row so far (`elmo_step_rows`)."""
    return server.metric("elmo_step_rows_count") - server.metric('elmo_step_rows_bucket{le="1.0"}')


def test_concurrent_clients_get_their_own_vectors(server, sentence_vectors):
    """16 clients at once, each sending its sentences one request at a time: every answer is its own input's
    vector, as alone (the requests ran beside each other: the metrics count time steps of several rows)."""
    shared_before = shared_steps(server)
    inputs_before = server.metric("elmo_inputs_total")
    texts = [f"{SENTENCES[k % len(SENTENCES)]} number {k} ." for k in range(64)]

    def client(start: int) -> list[tuple[str, np.ndarray]]:
        got = []
        for text in texts[start::16]:
            data = embeddings(server, {"input": text})["data"]
            got.append((text, np.asarray(data[0]["embedding"], np.float32)))
        return got

    with ThreadPoolExecutor(16) as pool:
        answers = [pair for part in pool.map(client, range(16)) for pair in part]
    assert len(answers) == len(texts)
    for text, vector in answers:
        np.testing.assert_allclose(vector, sentence_vectors(text), atol=TOLERANCE, rtol=0)
    assert server.metric("elmo_inputs_total") - inputs_before == len(texts)
    assert shared_steps(server) > shared_before  # some time steps ran several requests' inputs


def test_word_embeddings_every_layer_and_the_offsets(server, word_layers):
    status, body = server.post("/v1/word-embeddings", {"input": SENTENCES[:3]})
    assert status == 200, body
    for item, text in zip(body["data"], SENTENCES[:3], strict=True):
        expected, words = word_layers(text)
        assert item["words"] == words and item["shape"] == [3, len(words), 32]
        assert [text[start:end] for start, end in item["offsets"]] == words
        np.testing.assert_allclose(np.asarray(item["embedding"], np.float32), expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize(
    "options",
    [
        {"layers": "top"},
        {"layers": "average"},
        {"layers": [2, 0]},
        {"scalar_mix": {"weights": [0.5, -1, 2], "gamma": 0.7}},
    ],
)
def test_word_embeddings_layers_and_mix(server, word_layers, options):
    text = SENTENCES[3]
    status, body = server.post("/v1/word-embeddings", {"input": text, "encoding_format": "base64", **options})
    assert status == 200, body
    (item,) = body["data"]
    values = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4").reshape(item["shape"])
    layers, _ = word_layers(text)
    if "scalar_mix" in options:
        weights = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0).numpy()
        expected = 0.7 * np.einsum("l,lwd->wd", weights, layers)
    else:
        named = {"top": layers[-1], "average": layers.mean(0)}
        expected = named[options["layers"]] if isinstance(options["layers"], str) else layers[[2, 0]]
    assert values.shape == expected.shape
    np.testing.assert_allclose(values, expected, atol=TOLERANCE, rtol=0)


BAD_REQUESTS = [  # (body, status, param)
    (b'{"input": "unterminated', 400, "body"),
    (b"[1, 2]", 400, "body"),
    (b"\xff\xfe", 400, "body"),
    ({"model": "elmo-fixture"}, 400, "input"),
    ({"input": 5}, 400, "input"),
    ({"input": None}, 400, "input"),
    ({"input": []}, 400, "input"),
    ({"input": ""}, 400, "input"),
    ({"input": "   "}, 400, "input"),
    ({"input": ["fine", ""]}, 400, "input[1]"),
    ({"input": ["fine", 3]}, 400, "input[1]"),
    ({"input": [[1, 2, 3]]}, 400, "input[0]"),
    ({"input": "text", "model": 3}, 400, "model"),
    ({"input": "text", "encoding_format": "int8"}, 400, "encoding_format"),
    ({"input": "text", "dimensions": 16}, 400, "dimensions"),
    ({"input": "text", "user": 7}, 400, "user"),
    ({"input": "text", "inputs": "typo"}, 400, "inputs"),
    ({"input": ["word"] * 9}, 413, "input"),
    ({"input": " ".join(["word"] * 41)}, 413, "input"),
    ({"input": ["short", " ".join(["word"] * 41)]}, 413, "input[1]"),
    ({"input": "x" * 20_001}, 413, "body"),
]


@pytest.mark.parametrize(("document", "status", "param"), BAD_REQUESTS)
def test_bad_requests_get_the_openai_error_body(server, document, status, param):
    errors_before = server.metric(f'elmo_request_errors_total{{status="{status}"}}')
    found, body = server.post("/v1/embeddings", document)
    assert found == status
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["message"].startswith(f"{param}: ")
    assert "\n" not in error["message"]
    assert server.metric(f'elmo_request_errors_total{{status="{status}"}}') == errors_before + 1


@pytest.mark.parametrize(
    ("document", "param"),
    [
        ({"input": "text", "layers": [0, 3]}, "layers"),
        ({"input": "text", "layers": [1, 1]}, "layers"),
        ({"input": "text", "layers": "middle"}, "layers"),
        ({"input": "text", "layers": "top", "scalar_mix": {"weights": [1, 1, 1]}}, "layers"),
        ({"input": "text", "scalar_mix": {"weights": [1, 1]}}, "scalar_mix.weights"),
        ({"input": "text", "scalar_mix": {"weights": [1, 1, 1], "gamma": "big"}}, "scalar_mix.gamma"),
        ({"input": "text", "dimensions": 4}, "dimensions"),
    ],
)
def test_bad_word_requests(server, document, param):
    status, body = server.post("/v1/word-embeddings", document)
    assert status == 400 and body["error"]["param"] == param


def test_a_declared_body_over_the_limit_is_refused_unread(server):
    status, body = server.request(
        "POST", "/v1/embeddings", b"{}", {"Content-Type": "application/json", "Content-Length": "20001"}
    )
    assert status == 413 and json.loads(body)["error"]["param"] == "body"


def test_unknown_routes_and_methods(server):
    assert server.get("/v1/nowhere")[0] == 404
    status, body = server.get("/v1/embeddings")
    assert status == 405 and json.loads(body)["error"]["message"].startswith("GET /v1/embeddings")


def test_the_metrics_count_what_was_sent(server, word_layers):
    route = 'elmo_requests_total{route="/v1/embeddings",status="200"}'
    requests_before, words_before = server.metric(route), server.metric("elmo_words_total")
    inputs_before = server.metric("elmo_inputs_total")
    for text in SENTENCES[:3]:
        body = embeddings(server, {"input": [text, "River bank"]})
        assert body["usage"]["prompt_tokens"] == len(word_layers(text)[1]) + 2
    assert server.metric(route) == requests_before + 3
    assert server.metric("elmo_inputs_total") == inputs_before + 6
    sent_words = sum(len(word_layers(text)[1]) + 2 for text in SENTENCES[:3])  # the tokenizer's words
    assert server.metric("elmo_words_total") == words_before + sent_words
    assert server.metric("elmo_ready") == 1
    assert server.metric("elmo_queued_inputs") == 0 == server.metric("elmo_unanswered_inputs")
    assert server.metric("elmo_model_seconds_count") == server.metric("elmo_step_rows_count") > 0


def test_the_log_has_a_line_per_request_without_the_text(server):
    embeddings(server, {"input": "A secret sentence nobody logs ."})
    log = server.log()
    assert '"POST /v1/embeddings" 200 inputs=1 words=6' in log
    assert "secret" not in log


SLOW = "This SLOW sentence keeps the model busy ."  # 3 s on the model (injected_server.py)


def post_in_threads(server: ServeProcess, texts: list[str]) -> tuple[list, list[threading.Thread]]:
    answers: list = [None] * len(texts)

    def send(index: int) -> None:
        answers[index] = server.post("/v1/embeddings", {"input": texts[index]})

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(texts))]
    for thread in threads:
        thread.start()
    return answers, threads


def busy_server(model, tmp_path, *args: str) -> tuple[ServeProcess, list, list[threading.Thread]]:
    """A server whose model runs the slow sentence (3 s): the answers and threads of that request."""
    server = ServeProcess(model, *args, log=tmp_path / "log", injected=True)
    answers, threads = post_in_threads(server, [SLOW])
    server.wait_for_metric("elmo_unanswered_inputs", 1)
    return server, answers, threads


def test_a_full_queue_answers_429(converted_fixture, tmp_path, sentence_vectors):
    server, slow, slow_thread = busy_server(converted_fixture, tmp_path, "--max-queue", "4", "--max-inputs", "2")
    try:
        answers, threads = post_in_threads(server, SENTENCES[:2])
        server.wait_for_metric("elmo_unanswered_inputs", 3)  # the slow one running, two queued
        status, body = server.post("/v1/embeddings", {"input": SENTENCES[3:5]})  # 3 + 2 > 4
        assert status == 429 and body["error"]["code"] == "queue_full"
        assert body["error"]["type"] == "rate_limit_error"
        status, body = server.post("/v1/embeddings", {"input": SENTENCES[5]})  # 3 + 1 fits
        assert status == 200
        for thread in threads + slow_thread:
            thread.join()
        for (status, body), text in zip(slow + answers, [SLOW, *SENTENCES[:2]], strict=True):
            assert status == 200
            np.testing.assert_allclose(body["data"][0]["embedding"], sentence_vectors(text), atol=TOLERANCE, rtol=0)
        assert server.metric('elmo_request_errors_total{status="429"}') == 1
    finally:
        server.stop()


def test_sigterm_answers_every_accepted_request_then_exits_0(converted_fixture, tmp_path, sentence_vectors):
    server, slow, slow_thread = busy_server(converted_fixture, tmp_path)
    try:
        answers, threads = post_in_threads(server, SENTENCES)
        server.wait_for_metric("elmo_unanswered_inputs", 1 + len(SENTENCES))  # the slow one running, the rest queued
        server.process.send_signal(signal.SIGTERM)
        for thread in threads + slow_thread:
            thread.join()
        assert server.wait() == 0, server.log()
    finally:
        server.stop()
    for (status, body), text in zip(slow + answers, [SLOW, *SENTENCES], strict=True):
        assert status == 200
        np.testing.assert_allclose(body["data"][0]["embedding"], sentence_vectors(text), atol=TOLERANCE, rtol=0)
    with pytest.raises(OSError):  # no longer listening
        server.get("/health")


def test_a_model_failure_fails_that_request_only(converted_fixture, tmp_path, sentence_vectors):
    server, slow, slow_thread = busy_server(converted_fixture, tmp_path)
    try:
        answers, threads = post_in_threads(server, ["This one will FAIL .", *SENTENCES[:3]])
        server.wait_for_metric("elmo_queued_inputs", 1 + 4)  # the slow one, then the failing input among others
        for thread in threads + slow_thread:
            thread.join()
        assert slow[0][0] == 200
        (status, body), *others = answers
        assert status == 500 and body["error"]["code"] == "model_failure"
        assert "FAIL" not in body["error"]["message"]
        for (status, body), text in zip(others, SENTENCES[:3], strict=True):
            assert status == 200
            np.testing.assert_allclose(body["data"][0]["embedding"], sentence_vectors(text), atol=TOLERANCE, rtol=0)
        assert server.metric("elmo_inputs_total") == 1 + 4  # the failed input ran (alone) and counts
        assert server.post("/v1/embeddings", {"input": SENTENCES[4]})[0] == 200  # still serving
        assert server.terminate() == 0
    finally:
        server.stop()


def test_a_model_that_cannot_load_exits_1_in_one_line(tmp_path):
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(AssertionError, match="exited with 1") as raised:
        ServeProcess(tmp_path / "not-a-model", log=tmp_path / "log")
    last = raised.value.args[0].strip().splitlines()[-1]
    assert last.startswith("elmo-serve: error: cannot serve")


def test_a_port_in_use_is_one_line_before_the_model_loads(converted_fixture):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [str(ELMO_SERVE), str(converted_fixture), "--port", str(port)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"elmo-serve: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


QUANTIZED_TOLERANCE = 1e-4  # a quantized model's products are batch-independent: a batch against the input alone


def test_a_quantized_server_answers_as_the_same_quantized_model_alone(converted_fixture, tmp_path):
    """`--quantization int8`: several concurrent requests (batched together) each answer what the same int8 model
    gives its input alone, for the sentence vectors and every word's layers; the int8 answers are not the float32
    model's (the flag reaches the model)."""
    from modeling_elmo.serve.runner import SENTENCE, WORDS, Job, ModelRunner

    alone = ModelRunner(str(converted_fixture), word_cache=0, quantization="int8")
    alone.load()
    exact = ModelRunner(str(converted_fixture), word_cache=0)
    exact.load()

    def by_itself(runner, text, kind):
        runner.add(0, Job([word for word, _, _ in runner.split_words(text)], kind, 0))
        (finished,) = [result for _ in iter(lambda: runner.busy, False) for _, result in runner.step().finished]
        return finished

    server = ServeProcess(converted_fixture, "--quantization", "int8", log=tmp_path / "log")
    try:
        shared_before = shared_steps(server)
        texts = [f"{SENTENCES[k % len(SENTENCES)]} number {k} ." for k in range(12)]
        with ThreadPoolExecutor(len(texts)) as pool:
            sentences = list(pool.map(lambda text: embeddings(server, {"input": text}), texts))
            words = list(pool.map(lambda text: server.post("/v1/word-embeddings", {"input": text}), texts))
        assert shared_steps(server) > shared_before  # some ran together
    finally:
        server.stop()
    for text, body, (status, word_body) in zip(texts, sentences, words, strict=True):
        assert status == 200, word_body
        served = np.asarray(body["data"][0]["embedding"], np.float32)
        np.testing.assert_allclose(served, by_itself(alone, text, SENTENCE), atol=QUANTIZED_TOLERANCE, rtol=0)
        layers = np.asarray(word_body["data"][0]["embedding"], np.float32)
        np.testing.assert_allclose(layers, by_itself(alone, text, WORDS), atol=QUANTIZED_TOLERANCE, rtol=0)
    assert np.abs(served - by_itself(exact, text, SENTENCE)).max() > QUANTIZED_TOLERANCE


def test_the_default_limits_take_2048_inputs_and_refuse_an_over_budget_response(converted_fixture, tmp_path):
    """Default flags: OpenAI's 2,048 inputs answer; every layer of 2,048 inputs of 40 words as JSON numbers (about
    165 MB on the fixture) is refused before any model work with one line naming the limit and what to do; the same
    words' top layer as base64 (about 14 MB) answers."""
    server = ServeProcess(converted_fixture, log=tmp_path / "log")
    try:
        texts = [f"{SENTENCES[k % len(SENTENCES)]} {k}" for k in range(2048)]
        body = embeddings(server, {"input": texts})
        assert len(body["data"]) == 2048 and body["data"][-1]["index"] == 2047
        inputs_before = server.metric("elmo_inputs_total")
        forty = [" ".join(f"w{k}" for k in range(40))] * 2048
        status, body = server.post("/v1/word-embeddings", {"input": forty})
        error = body["error"]
        assert status == 413 and error["param"] == "input" and "\n" not in error["message"]
        assert "(--max-response-bytes): ask for fewer inputs" in error["message"] and "base64" in error["message"]
        assert server.metric("elmo_inputs_total") == inputs_before  # no model work
        status, body = server.post(
            "/v1/word-embeddings", {"input": forty, "layers": "top", "encoding_format": "base64"}
        )
        assert status == 200 and body["data"][0]["shape"] == [40, 32]
    finally:
        server.stop()
