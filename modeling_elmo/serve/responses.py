"""The response bodies: OpenAI's embeddings list and the per-word route's, with vectors as JSON numbers or as
base64 (the float32 little-endian bytes of the array, which the `openai` client decodes with NumPy)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .protocol import EmbeddingsRequest

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
        {"object": "embedding", "index": index, "embedding": encoded(vector, request.encoding_format)}
        for index, vector in enumerate(vectors)
    ]
    return {"object": "list", "data": data, "model": model_name, "usage": _usage(request)}


def selected_layers(request: EmbeddingsRequest, layers: np.ndarray) -> np.ndarray:
    """The per-word values asked for, from every layer of one input (num_layers, words, width): the named layers
    ((num_layers, ...) for "all", (words, width) for "top" and "average"), the listed indices (len(list), words,
    width), or the scalar mix (words, width)."""
    import numpy as np

    if request.scalar_mix is not None:
        weights = np.asarray(request.scalar_mix.weights, dtype=np.float64)
        weights = np.exp(weights - weights.max())
        weights = (weights / weights.sum()).astype(np.float32)
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
        values = selected_layers(request, all_layers)
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
