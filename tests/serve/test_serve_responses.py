"""The response bodies in-process: streamed in pieces, they are the compact JSON the server always sent (Starlette's
`JSONResponse` form), and the size bound checked before any model work (`protocol.response_bytes`) is never below
the real body, for every shape: both routes, float and base64, every layer, some, one, a scalar mix, and texts with
escapes, non-ASCII characters and lone surrogates."""

import base64
import json

import numpy as np
import pytest

from modeling_elmo.serve import responses
from modeling_elmo.serve.protocol import Limits, parse_openai_request, parse_word_request, response_bytes
from modeling_elmo.word_splitter import split_words

LAYERS, NAME = 3, "elmo-fixture"
LONGEST = np.float32(-1.1754944e-38)  # the smallest normal float32, negated: 23 bytes as a JSON number
TEXTS = [
    "The bank closed its doors .",
    'He said "no" \\ then left , twice: a\tb',  # JSON's escapes: quotes, a backslash
    "Zürich 's café — naïve 東京 Ελλάδα 😀 .",  # 2-, 3- and 4-byte UTF-8
    " ".join(f"w{k}" for k in range(120)),  # offsets of 1, 2 and 3 digits
    "lone \ud800 surrogate",  # sent as the JSON escape "\ud800": goes back escaped
    "a,b",
]
SHAPES = [
    {"layers": "all"},
    {"layers": "top"},
    {"layers": "average"},
    {"layers": [2, 0]},
    {"layers": [1]},
    {"scalar_mix": {"weights": [0.5, -1, 2], "gamma": 0.7}},
]


def request_of(texts, per_word: bool, encoding_format: str, **shape):
    document = {"input": texts, "encoding_format": encoding_format, **shape}
    if per_word:
        return parse_word_request(document, Limits(), split_words, LAYERS)
    return parse_openai_request(document, Limits(), split_words)


def values_of(request, width: int, kind: str, seed: int = 0) -> list[np.ndarray]:
    """Each input's model output: (num_layers, words, width) for the per-word route, (width,) for a sentence;
    random numbers (`kind` "random"), or every one as long as a JSON number gets ("longest")."""
    rng = np.random.default_rng(seed)
    shapes = [(LAYERS, len(words), width) for words in request.words]
    if kind == "longest":
        return [np.full(shape, LONGEST, np.float32) for shape in shapes]
    return [(rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)).astype(np.float32) for shape in shapes]


def body_of(request, layers: list[np.ndarray], per_word: bool) -> bytes:
    if per_word:
        return b"".join(responses.word_body(request, responses.word_values(request, layers), NAME))
    vectors = responses.sentence_values(request, [values[-1].mean(axis=0) for values in layers])
    return b"".join(responses.openai_body(request, vectors, NAME))


def reference(request, layers: list[np.ndarray], per_word: bool) -> dict:
    """The response as one dict, as the server built it before it streamed (`JSONResponse` of it)."""
    data = []
    for index, values in enumerate(layers):
        array = responses.selected_layers(request, values) if per_word else values[-1].mean(axis=0)
        if request.encoding_format == "base64":
            embedding = base64.b64encode(np.ascontiguousarray(array, "<f4").tobytes()).decode()
        else:
            embedding = array.tolist()
        item = {"object": "word_embeddings" if per_word else "embedding", "index": index}
        if per_word:
            offsets = [list(pair) for pair in request.offsets[index]]
            item |= {"words": request.words[index], "offsets": offsets, "shape": list(array.shape)}
        data.append(item | {"embedding": embedding})
    usage = {"prompt_tokens": request.word_count, "total_tokens": request.word_count}
    return {"object": "list", "data": data, "model": NAME, "usage": usage}


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: json.dumps(shape))
@pytest.mark.parametrize("kind", ["random", "longest"])
def test_the_bound_holds_and_the_body_is_the_response_as_before(encoding_format, shape, kind):
    for per_word in (True, False):
        request = request_of(TEXTS, per_word, encoding_format, **(shape if per_word else {}))
        layers = values_of(request, 16, kind)
        body = body_of(request, layers, per_word)
        assert len(body) <= response_bytes(request, 16, LAYERS, per_word, NAME)
        assert json.loads(body) == reference(request, layers, per_word)
        plain = request_of([text for text in TEXTS if "\ud800" not in text], per_word, encoding_format)
        plain_layers = values_of(plain, 16, kind)
        expected = json.dumps(reference(plain, plain_layers, per_word), ensure_ascii=False, separators=(",", ":"))
        assert body_of(plain, plain_layers, per_word) == expected.encode()  # byte for byte


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_the_bound_is_exact_where_every_number_is_longest(encoding_format):
    """Words that fill their text ("a,b": three words, offsets of one digit) and numbers of 23 bytes: the bound is
    the body's size, so it is as tight as a bound known before the values can be."""
    for per_word in (True, False):
        request = request_of(["a,b", "c,d"], per_word, encoding_format)
        body = body_of(request, values_of(request, 8, "longest"), per_word)
        assert len(body) == response_bytes(request, 8, LAYERS, per_word, NAME)


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_large_arrays_are_encoded_in_short_pieces(encoding_format):
    """Arrays of more than `PIECE_VALUES` values (rows of `width`, and rows wider than a piece) come in pieces of
    at most `PIECE_BYTES` and a piece's encoding, and join into the same JSON."""
    rng = np.random.default_rng(1)
    for shape in [(3, 700, 40), (2, responses.PIECE_VALUES + 7), (responses.PIECE_VALUES * 2 + 1,)]:
        array = rng.standard_normal(shape).astype(np.float32)
        pieces = list(responses.encoded(array, encoding_format))
        assert len(pieces) > 2
        joined = b"".join(pieces)
        if encoding_format == "base64":
            assert joined == b'"' + base64.b64encode(array.astype("<f4").tobytes()) + b'"'
        else:
            assert joined == json.dumps(array.tolist(), separators=(",", ":")).encode()
            assert max(map(len, pieces)) <= 24 * responses.PIECE_VALUES


def test_a_lone_surrogate_goes_back_escaped():
    request = request_of(["lone \ud800 surrogate"], True, "float", layers="top")
    body = body_of(request, values_of(request, 4, "random"), True)
    assert b"\\ud800" in body
    assert json.loads(body)["data"][0]["words"] == ["lone", "\ud800", "surrogate"]
    body.decode("utf-8")  # valid UTF-8 throughout
