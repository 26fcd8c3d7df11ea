"""The Ray Serve deployment (`serve.ray_deployment`) on a local Ray cluster of 2 CPUs: two replicas of the same app
as `elmo serve`, over HTTP through Ray Serve's proxy; every answer of 16 concurrent clients equal to the model's
vector of that input alone, the bad-input answers those of `elmo serve`. Skipped where Ray Serve is missing (a failure
with `ELMO_REQUIRE_SCALE_OUT=1`, as CI's scale-out job sets)."""

import os
import shutil
import tempfile
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
