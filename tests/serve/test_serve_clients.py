"""The real LangChain and chromadb clients, at their own defaults, against `elmo serve` (a real process on
127.0.0.1, default flags: `--max-inputs` 2048, OpenAI's): LangChain's `OpenAIEmbeddings` sends 1,100 texts in its
default chunks of 1,000; chromadb's `OpenAIEmbeddingFunction` sends the 320 documents of one `collection.add` in one
request, and a query's text in another; an `add` of more than 2,048 documents is refused with the server's 413. Every
vector is compared with `ElmoModel` called on its text alone. Needs the `clients` extra: skipped without it, a failure
where `ELMO_REQUIRE_INTEGRATION=1` (CI's wheel job installs the extra)."""

import re
import time

import numpy as np
import pytest
import torch
from serve_process import ServeProcess

pytestmark = pytest.mark.integration

TOLERANCE = 1e-6  # a sentence in a batch of others against the same sentence alone (docs/serving.md)
DISTANCE_TOLERANCE = 1e-5  # chromadb's cosine distances, computed in float32 by its index
MISSING = "{} is not installed: pip install -e '.[clients]' (CI's wheel job installs the clients extra)"
SENTENCES = [
    "The bank closed its doors .",
    "River bank",
    "Zürich 's café — naïve 東京 Ελλάδα .",
    "ELMo reads every word with a character CNN .",
    "Short",
    "A sentence of seven words in it .",
]


def texts(count: int, start: int = 0) -> list[str]:
    """`count` distinct short texts (a sentence and a number)."""
    return [f"{SENTENCES[k % len(SENTENCES)]} {k}" for k in range(start, start + count)]


@pytest.fixture(scope="module")
def server(converted_fixture, tmp_path_factory):
    served = ServeProcess(converted_fixture, log=tmp_path_factory.mktemp("serve") / "server.log")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def model_vectors(converted_fixture):
    """Each text alone through `ElmoModel`: the mean of its top layer over its words, L2-normalised (what the server
    answers), as a (texts, width) array."""
    from modeling_elmo import ElmoModel, ElmoTokenizer

    model = ElmoModel.from_pretrained(str(converted_fixture)).eval()
    tokenizer = ElmoTokenizer.from_pretrained(str(converted_fixture))

    def vectors(batch: list[str]) -> np.ndarray:
        rows = []
        with torch.inference_mode():
            for text in batch:
                output = model(**tokenizer([text], return_tensors="pt"), output_hidden_states=True)
                rows.append(torch.nn.functional.normalize(output.hidden_states[-1][0].mean(0), dim=0).numpy())
        return np.stack(rows)

    return vectors


def logged_requests(server: ServeProcess, since: int, count: int, seconds: float = 30) -> list[int]:
    """The number of inputs of each `POST /v1/embeddings` the server logged past the first `since` characters of its
    log, once it has logged `count` of them (the line is written as the response ends) or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        found = [int(n) for n in re.findall(r'"POST /v1/embeddings" 200 inputs=(\d+) ', server.log()[since:])]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.fixture(scope="module")
def openai_embeddings():
    """LangChain's `OpenAIEmbeddings` (skipped where langchain-openai is missing, before the server starts)."""
    return pytest.importorskip("langchain_openai", reason=MISSING.format("langchain-openai")).OpenAIEmbeddings


@pytest.fixture(scope="module")
def chromadb():
    """The chromadb package (skipped where it is missing, before the server starts)."""
    return pytest.importorskip("chromadb", reason=MISSING.format("chromadb"))


@pytest.fixture
def chroma(chromadb, monkeypatch):
    """An in-memory chromadb client without telemetry, whose default embedding model would fail if it were loaded
    (it downloads; only the OpenAI function may embed here), and the OpenAI function's key variable set."""
    from chromadb.utils.embedding_functions import onnx_mini_lm_l6_v2

    def no_download(self):
        raise AssertionError("chromadb tried to download its default embedding model")

    monkeypatch.setattr(onnx_mini_lm_l6_v2.ONNXMiniLM_L6_V2, "_download_model_if_not_exists", no_download)
    monkeypatch.setenv("CHROMA_OPENAI_API_KEY", "unused")
    return chromadb.EphemeralClient(chromadb.Settings(anonymized_telemetry=False))


def openai_function(server: ServeProcess):
    from chromadb.utils.embedding_functions import OpenAIEmbeddingFunction

    return OpenAIEmbeddingFunction(model_name="elmo-fixture", api_base=server.url + "/v1")


def test_langchain_sends_1100_texts_in_its_default_chunks_of_1000(openai_embeddings, server, model_vectors):
    embeddings = openai_embeddings(
        model="elmo-fixture", base_url=server.url + "/v1", api_key="unused", check_embedding_ctx_length=False
    )
    assert embeddings.chunk_size == 1000  # LangChain's default, the one this test is about
    documents = texts(1100)
    since = len(server.log())
    vectors = np.asarray(embeddings.embed_documents(documents), np.float32)
    assert logged_requests(server, since, 2) == [1000, 100]
    assert vectors.shape == (1100, 32)
    np.testing.assert_allclose(vectors, model_vectors(documents), atol=TOLERANCE, rtol=0)
    query = "Where is the bank ?"
    vector = embeddings.embed_query(query)
    np.testing.assert_allclose(vector, model_vectors([query])[0], atol=TOLERANCE, rtol=0)


def test_chromadb_adds_320_documents_in_one_request_and_queries_them(chromadb, server, model_vectors, chroma):
    collection = chroma.create_collection("elmo-320", embedding_function=openai_function(server))
    documents = texts(320)
    ids = [f"doc-{k}" for k in range(len(documents))]
    expected = dict(zip(ids, model_vectors(documents), strict=True))
    since = len(server.log())
    collection.add(ids=ids, documents=documents)
    assert logged_requests(server, since, 1) == [320]
    stored = collection.get(ids=ids, include=["embeddings"])
    assert sorted(stored["ids"]) == sorted(ids)
    for name, vector in zip(stored["ids"], stored["embeddings"], strict=True):
        np.testing.assert_allclose(vector, expected[name], atol=TOLERANCE, rtol=0)

    query = documents[7]  # a document's own text: its nearest is itself
    since = len(server.log())
    found = collection.query(query_texts=[query], n_results=5, include=["distances"])
    assert logged_requests(server, since, 1) == [1]
    (query_vector,) = model_vectors([query])
    distances = {name: 1 - float(vector @ query_vector) for name, vector in expected.items()}  # cosine distance
    fifth = sorted(distances.values())[4]
    (names,), (found_distances,) = found["ids"], found["distances"]
    assert names[0] == ids[7] and len(names) == 5
    for name, distance in zip(names, found_distances, strict=True):  # the five nearest, each at its own distance
        assert abs(distance - distances[name]) <= DISTANCE_TOLERANCE and distance <= fifth + DISTANCE_TOLERANCE


def test_a_chromadb_add_over_2048_documents_is_refused_by_the_server(chromadb, server, chroma):
    import openai

    collection = chroma.create_collection("elmo-2049", embedding_function=openai_function(server))
    documents = texts(2049)
    with pytest.raises(openai.APIStatusError) as raised:
        collection.add(ids=[f"doc-{k}" for k in range(len(documents))], documents=documents)
    assert raised.value.status_code == 413 and raised.value.body["param"] == "input"
    assert "2048" in raised.value.body["message"] and "\n" not in raised.value.body["message"]
    assert collection.count() == 0
