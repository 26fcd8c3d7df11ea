"""The Ray Serve deployment (`serve.ray_deployment`) on a local Ray cluster of 2 CPUs: two replicas of the same app
as `elmo serve`, over HTTP through Ray Serve's proxy; every answer of 16 concurrent clients, and of 64 requests sent at
once, equal to the model's vector of that input alone, the bad-input answers those of `elmo serve`. Without a
cluster: a replica takes as many requests at once as its queue holds, and its torch threads follow the project's
policy for the CPUs Ray reserved. Skipped where Ray Serve is missing (a failure with `ELMO_REQUIRE_SCALE_OUT=1`, as
CI's scale-out job sets)."""

import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scale_out_checks import require_engine
from serve_process import free_port

pytestmark = pytest.mark.integration

TOLERANCE = 1e-6


def require_ray_serve() -> None:
    require_engine("ray")
    try:
        import ray.serve  # noqa: F401  (its own dependencies come with ray[serve] only)
    except ImportError as error:
        lacking = f"Ray Serve cannot be imported ({error}; pip install -e '.[serve,ray]')"
        if os.environ.get("ELMO_REQUIRE_SCALE_OUT") == "1":
            pytest.fail(f"{lacking}, and ELMO_REQUIRE_SCALE_OUT=1", pytrace=False)
        pytest.skip(lacking)


@pytest.fixture(scope="module")
def ray_serve_url(converted_fixture):
    """Two replicas of the fixture's app on a local Ray cluster of 2 CPUs; the proxy's address."""
    require_ray_serve()
    import ray
    from ray import serve

    from modeling_elmo.serve.ray_deployment import elmo_deployment
    from modeling_elmo.serve.settings import ServeSettings

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp_dir = tempfile.mkdtemp(prefix="ray")
    port = free_port()
    try:
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        settings = ServeSettings(str(converted_fixture), served_model_name="elmo-fixture")
        serve.run(elmo_deployment(settings, num_replicas=2, num_cpus=1), name="elmo", route_prefix="/")
        replicas = serve.status().applications["elmo"].deployments["ElmoEmbeddings"].replica_states
        assert replicas.get("RUNNING") == 2, replicas
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def post(url: str, path: str, document: dict) -> tuple[int, dict]:
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url + path, json.dumps(document).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_two_replicas_answer_every_request_as_the_model(ray_serve_url, converted_fixture):
    from sentence_transformers import SentenceTransformer

    import modeling_elmo  # noqa: F401  (registers ELMo with the Auto classes)

    encoder = SentenceTransformer(str(converted_fixture), device="cpu")
    texts = [f"Sentence number {k} of the Ray Serve test , {'with more words ' * (k % 4)}." for k in range(48)]

    def client(start: int) -> list[tuple[str, int, dict]]:
        return [(text, *post(ray_serve_url, "/v1/embeddings", {"input": text})) for text in texts[start::16]]

    with ThreadPoolExecutor(16) as pool:
        answers = [answer for part in pool.map(client, range(16)) for answer in part]
    assert len(answers) == len(texts)
    for text, status, body in answers:
        assert status == 200, body
        assert body["model"] == "elmo-fixture"
        expected = encoder.encode([text], normalize_embeddings=True)[0]
        np.testing.assert_allclose(body["data"][0]["embedding"], expected, atol=TOLERANCE, rtol=0)


def test_the_replicas_check_input_as_elmo_serve(ray_serve_url):
    status, body = post(ray_serve_url, "/v1/embeddings", {"input": ["fine", ""]})
    assert status == 400 and body["error"]["param"] == "input[1]"
    status, body = post(ray_serve_url, "/v1/word-embeddings", {"input": "River bank", "layers": "top"})
    assert status == 200 and body["data"][0]["shape"] == [2, 32]


def test_64_requests_at_once_are_answered_as_the_model(ray_serve_url, converted_fixture):
    """64 requests sent together (a barrier), far more than the 10 that Ray's default (5 a replica) would let into
    two replicas at once; each answer is the top layer's mean over the input's words, L2-normalised, of the model on
    that input alone (a request of two inputs: each its own)."""
    import torch

    from modeling_elmo import ElmoModel, ElmoTokenizer

    model = ElmoModel.from_pretrained(str(converted_fixture)).eval()
    tokenizer = ElmoTokenizer.from_pretrained(str(converted_fixture))

    def expected(text: str) -> np.ndarray:
        with torch.inference_mode():
            top = model(**tokenizer([text], return_tensors="pt")).last_hidden_state[0].numpy()
        return top.mean(0) / np.linalg.norm(top.mean(0))

    words = "the bank by the river closed its doors to every boat of the town".split()
    requests = [
        [f"Request {k} : {' '.join(words[: 1 + k % len(words)])} ."]
        + ([f"and its second input {k}"] if k % 8 == 0 else [])
        for k in range(64)
    ]
    start = threading.Barrier(len(requests))

    def send(inputs: list[str]) -> tuple[int, dict]:
        start.wait(60)
        return post(ray_serve_url, "/v1/embeddings", {"input": inputs})

    began = time.monotonic()
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(send, requests))
    print(f"64 requests at once through 2 replicas: {time.monotonic() - began:.2f} s")
    for inputs, (status, body) in zip(requests, answers, strict=True):
        assert status == 200, body
        assert [item["index"] for item in body["data"]] == list(range(len(inputs)))
        for text, item in zip(inputs, body["data"], strict=True):
            np.testing.assert_allclose(item["embedding"], expected(text), atol=TOLERANCE, rtol=0)


def test_a_replica_takes_as_many_requests_as_its_queue_holds():
    require_ray_serve()
    from ray.serve import Application

    from modeling_elmo.serve.ray_deployment import OTHER_REQUESTS, elmo_deployment, replica_deployment
    from modeling_elmo.serve.settings import DEFAULT_MAX_QUEUE, ServeSettings

    deployment = replica_deployment(ServeSettings("elmo-fixture"), num_replicas=2, num_cpus=2)
    assert deployment.max_ongoing_requests == DEFAULT_MAX_QUEUE + OTHER_REQUESTS
    assert deployment.num_replicas == 2 and deployment.ray_actor_options["num_cpus"] == 2
    small = replica_deployment(ServeSettings("elmo-fixture", max_queue=100), max_queued_requests=64)
    assert small.max_ongoing_requests == 100 + OTHER_REQUESTS and small.max_queued_requests == 64
    assert replica_deployment(ServeSettings("elmo-fixture"), max_ongoing_requests=7).max_ongoing_requests == 7
    assert isinstance(elmo_deployment(ServeSettings("elmo-fixture"), torch_threads=2), Application)


@pytest.mark.parametrize(
    "torch_threads, environment, runtime_env, reserved, policy",
    [
        (None, "2", {}, 2.0, 2.0),  # Ray's own OMP_NUM_THREADS: the policy for the reservation
        (None, "1", {}, 0.5, 0.5),
        (None, None, {}, None, 1.0),  # no CPU reserved: as Ray counts it, one
        (3, "2", {}, 2.0, None),  # an explicit count
        (None, "2", {"OMP_NUM_THREADS": "2"}, 2.0, None),  # the user's, through Ray's runtime_env
        (None, "4", {}, 1.0, None),  # the user's, from the environment Ray started in
    ],
)
def test_a_replica_sets_its_threads_by_the_policy(
    monkeypatch, torch_threads, environment, runtime_env, reserved, policy
):
    require_ray_serve()
    import ray
    import torch

    from modeling_elmo.serve import ray_deployment

    class Context:
        def get_assigned_resources(self) -> dict:
            return {} if reserved is None else {"CPU": reserved}

        class runtime_env:
            @staticmethod
            def env_vars() -> dict:
                return runtime_env

    calls = {"policy": [], "set": []}
    monkeypatch.setattr(ray, "get_runtime_context", Context)
    monkeypatch.setattr(
        ray_deployment, "configure_cpu_threads", lambda reserved_cpus: calls["policy"].append(reserved_cpus)
    )
    monkeypatch.setattr(torch, "set_num_threads", calls["set"].append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 9)
    if environment is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", environment)
    assert ray_deployment.replica_threads(torch_threads) == 9
    assert calls["policy"] == ([] if policy is None else [policy])
    assert calls["set"] == ([] if torch_threads is None else [torch_threads])
