"""The response bodies: OpenAI's embeddings list and the per-word route's, with vectors as JSON numbers or as
base64 (the float32 little-endian bytes of the array, which the `openai` client decodes with NumPy).

A body is made in two steps, both for a worker thread, never the event loop: the values (`sentence_values`,
`word_values`: each input's array, checked finite, so that a refusal comes before the first byte), then the body's
bytes in pieces (`openai_body`, `word_body`) that the app streams as they come. Each piece is one short call that
holds the GIL (at most `PIECE_VALUES` values encoded at once), so the event loop answers `/health` between two; the
JSON is the compact form of `protocol.compact_json`, whose size `protocol.response_bytes` bounds.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .protocol import ApiError, EmbeddingsRequest, compact_json

if TYPE_CHECKING:
    import numpy as np

PIECE_VALUES = 3 * 2**12  # values encoded in one call: about 250 KB of JSON numbers, 3 ms (base64 needs 3k)
PIECE_BYTES = 2**18  # the pieces the app sends: small encodings gathered up to this size


def sentence_values(request: EmbeddingsRequest, vectors: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each input's unit sentence vector (width,), checked finite (`finite`)."""
    return [finite(request, vector, index) for index, vector in enumerate(vectors)]


def word_values(request: EmbeddingsRequest, layers: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each input's values asked for (`selected_layers`) from its every layer (num_layers, words, width), checked
    finite (`finite`)."""
    return [finite(request, selected_layers(request, values), index) for index, values in enumerate(layers)]


def openai_body(request: EmbeddingsRequest, values: Sequence[np.ndarray], model_name: str) -> Iterator[bytes]:
    """OpenAI's embeddings response in pieces: `data[i]` holds the unit sentence vector of `input[i]` (`values[i]`,
    (width,)); tokens are words."""

    def item(index: int, vector: np.ndarray) -> Iterator[bytes]:
        yield b'{"object":"embedding","index":%d,"embedding":' % index
        yield from encoded(vector, request.encoding_format)
        yield b"}"

    return _gathered(_envelope(request, (item(index, vector) for index, vector in enumerate(values)), model_name))


def word_body(request: EmbeddingsRequest, values: Sequence[np.ndarray], model_name: str) -> Iterator[bytes]:
    """The per-word route's response in pieces: for each input its words, their character offsets, the values'
    shape and the values (`values[i]`, from `word_values`)."""

    def item(index: int, array: np.ndarray) -> Iterator[bytes]:
        offsets = [list(pair) for pair in request.offsets[index]]
        yield b'{"object":"word_embeddings","index":%d,"words":' % index
        yield compact_json(request.words[index])
        yield b',"offsets":' + compact_json(offsets) + b',"shape":' + compact_json(list(array.shape))
        yield b',"embedding":'
        yield from encoded(array, request.encoding_format)
        yield b"}"

    return _gathered(_envelope(request, (item(index, array) for index, array in enumerate(values)), model_name))


def encoded(array: np.ndarray, encoding_format: str) -> Iterator[bytes]:
    """`array` in pieces: nested lists of JSON numbers (each float32 value exactly, as `array.tolist()` gives it), or
    a base64 string of its float32 bytes."""
    import numpy as np

    if encoding_format == "base64":
        flat = np.ascontiguousarray(array, dtype="<f4").reshape(-1)
        yield b'"'
        for start in range(0, flat.size, PIECE_VALUES):  # whole 3-byte groups: the pieces join into one base64
            yield base64.b64encode(flat[start : start + PIECE_VALUES].tobytes())
        yield b'"'
        return
    yield from _numbers(array)


def _numbers(array: np.ndarray) -> Iterator[bytes]:
    """`array` as nested JSON lists, at most `PIECE_VALUES` values a call."""
    if array.size <= PIECE_VALUES:
        yield compact_json(array.tolist())
        return
    row_values = array[0].size if array.ndim > 1 else 1
    yield b"["
    if row_values > PIECE_VALUES:
        for index, row in enumerate(array):
            if index:
                yield b","
            yield from _numbers(row)
    else:
        rows = PIECE_VALUES // row_values
        for start in range(0, len(array), rows):
            if start:
                yield b","
            yield compact_json(array[start : start + rows].tolist())[1:-1]  # the rows, less the list's brackets
    yield b"]"


def _envelope(request: EmbeddingsRequest, items: Iterable[Iterable[bytes]], model_name: str) -> Iterator[bytes]:
    """`{"object": "list", "data": [items], "model", "usage"}`, each item's pieces in turn."""
    yield b'{"object":"list","data":['
    for index, item in enumerate(items):
        if index:
            yield b","
        yield from item
    usage = {"prompt_tokens": request.word_count, "total_tokens": request.word_count}
    yield b'],"model":' + compact_json(model_name) + b',"usage":' + compact_json(usage) + b"}"


def _gathered(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """`pieces` joined into pieces of about `PIECE_BYTES` (one send each)."""
    held: list[bytes] = []
    size = 0
    for piece in pieces:
        held.append(piece)
        size += len(piece)
        if size >= PIECE_BYTES:
            yield b"".join(held)
            held, size = [], 0
    if held:
        yield b"".join(held)


def finite(request: EmbeddingsRequest, values: np.ndarray, index: int) -> np.ndarray:
    """`values` (input `index`'s), where every one is finite; else the request is refused rather than answered with
    infinities or NaN: 422 where its scalar mix overflowed float32, 500 otherwise (the model's values are checked
    before, so this is a bug's)."""
    import numpy as np

    if np.isfinite(values).all():
        return values
    if request.scalar_mix is not None:
        raise ApiError(
            422,
            "scalar_mix.gamma: the mixed values overflow float32 (beyond 3.4e38 in size); give a smaller gamma",
            "scalar_mix.gamma",
            code="overflow",
        )
    message = f"the values of input {index} are not finite (NaN or infinite); the server does not send them"
    raise ApiError(500, message, type="server_error", code="not_finite")


def selected_layers(request: EmbeddingsRequest, layers: np.ndarray) -> np.ndarray:
    """The per-word values asked for, from every layer of one input (num_layers, words, width): the named layers
    ((num_layers, ...) for "all", (words, width) for "top" and "average"), the listed indices (len(list), words,
    width), or the scalar mix (words, width)."""
    import numpy as np

    if request.scalar_mix is not None:
        weights = np.asarray(request.scalar_mix.weights, dtype=np.float64)
        weights = np.exp(weights - weights.max())
        weights = (weights / weights.sum()).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused after (`finite`)
            return (request.scalar_mix.gamma * np.tensordot(weights, layers, axes=1)).astype(np.float32)
    if request.layers == "all":
        return layers
    if request.layers == "top":
        return layers[-1]
    if request.layers == "average":
        return layers.mean(axis=0)
    return layers[list(request.layers)]
