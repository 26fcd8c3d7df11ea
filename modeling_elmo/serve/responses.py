"""The response bodies: OpenAI's embeddings list and the per-word route's, with vectors as JSON numbers or as
base64 (the float32 little-endian bytes of the array, which the `openai` client decodes with NumPy)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .protocol import ApiError, EmbeddingsRequest

if TYPE_CHECKING:
    import numpy as np


def encoded(array: np.ndarray, encoding_format: str) -> list | str:
    """`array` as nested lists of numbers (each float32 value exactly), or as base64 of its float32 bytes."""
    import numpy as np

    if encoding_format == "base64":
        return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")
    return array.tolist()


def _usage(request: EmbeddingsRequest) -> dict:
    return {"prompt_tokens": request.word_count, "total_tokens": request.word_count}


def openai_embeddings(request: EmbeddingsRequest, vectors: Sequence[np.ndarray], model_name: str) -> dict:
    """OpenAI's embeddings response: `data[i]` holds the unit sentence vector of `input[i]`; tokens are words."""
    data = [
        {
            "object": "embedding",
            "index": index,
            "embedding": encoded(finite(request, vector, index), request.encoding_format),
        }
        for index, vector in enumerate(vectors)
    ]
    return {"object": "list", "data": data, "model": model_name, "usage": _usage(request)}


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


def word_embeddings(request: EmbeddingsRequest, layers: Sequence[np.ndarray], model_name: str) -> dict:
    """The per-word route's response: for each input its words, their character offsets, the values' shape and the
    values (`selected_layers`)."""
    data = []
    for index, all_layers in enumerate(layers):
        values = finite(request, selected_layers(request, all_layers), index)
        data.append(
            {
                "object": "word_embeddings",
                "index": index,
                "words": request.words[index],
                "offsets": [list(pair) for pair in request.offsets[index]],
                "shape": list(values.shape),
                "embedding": encoded(values, request.encoding_format),
            }
        )
    return {"object": "list", "data": data, "model": model_name, "usage": _usage(request)}
