"""
The Arrow layout of ELMo vectors, shared by `ElmoBatchEmbedder` and `elmo-embed --format parquet`.

One row per sentence:

- `id` (int64): the caller's id (`elmo-embed`: the line's 0-based index);
- `num_words` (int32): the sentence's words (0 for an empty text);
- the vectors: `layer_0` ... `layer_N` (the character CNN, then each biLM layer) for `layers="all"`, or `embedding`
  (the top layer, or the mean of all layers) for `"top"` / `"average"`. Per word, each is a
  `list<fixed_size_list<float, width>>` (one vector of `width = 2 * projection_dim` per word); with `pooling="mean"`
  a `fixed_size_list<float, width>`: the mean over the words, zeros for an empty text.

`float` is float32, or float16 when asked for (the values are computed in float32 and rounded once, on output).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

LAYERS = ("all", "top", "average")
POOLINGS = ("none", "mean")
VALUE_TYPES = {"float32": pa.float32(), "float16": pa.float16()}


def vector_columns(layers: str, num_layers: int) -> list[str]:
    """The names of the vector columns: `layer_0` ... `layer_{num_layers - 1}` for `"all"`, else `embedding`.
    `num_layers` counts the character CNN (the model's `num_hidden_layers + 1`)."""
    return [f"layer_{k}" for k in range(num_layers)] if layers == "all" else ["embedding"]


def arrow_schema(layers: str, pooling: str, num_layers: int, width: int, value_type: str = "float32") -> pa.Schema:
    """The schema of a table of `layers` / `pooling` vectors of `width` values of `value_type`."""
    vector = pa.list_(VALUE_TYPES[value_type], width)
    column_type = vector if pooling == "mean" else pa.list_(vector)
    fields = [pa.field("id", pa.int64(), nullable=False), pa.field("num_words", pa.int32(), nullable=False)]
    fields += [pa.field(name, column_type, nullable=False) for name in vector_columns(layers, num_layers)]
    return pa.schema(fields)


def vectors_table(
    ids: Sequence[int],
    num_words: Sequence[int],
    arrays: Sequence[np.ndarray],
    layers: str,
    pooling: str,
    num_layers: int,
    width: int,
    value_type: str = "float32",
) -> pa.Table:
    """
    A table in `arrow_schema`'s layout from one float32 array per sentence, shaped as `elmo-embed` computes them:
    `(num_layers, num_words, width)` for `"all"`, `(num_words, width)` otherwise; with `pooling="mean"` the word
    axis removed. Rows keep the order given.
    """
    schema = arrow_schema(layers, pooling, num_layers, width, value_type)
    dtype = np.dtype(value_type)
    per_layer = [array if layers == "all" else array[None] for array in arrays]  # (layers, [words,] width)
    if pooling == "mean":
        columns = [_fixed_lists(_stacked(per_layer, k, width).astype(dtype), width) for k in range(len(schema) - 2)]
    else:
        offsets = pa.array(np.concatenate([[0], np.cumsum(num_words, dtype=np.int64)]).astype(np.int32))
        columns = [
            pa.ListArray.from_arrays(offsets, _fixed_lists(_stacked(per_layer, k, width).astype(dtype), width))
            for k in range(len(schema) - 2)
        ]
    head = [pa.array(np.asarray(ids, dtype=np.int64)), pa.array(np.asarray(num_words, dtype=np.int32))]
    return pa.Table.from_arrays([*head, *columns], schema=schema)


def _stacked(per_layer: list[np.ndarray], layer: int, width: int) -> np.ndarray:
    """Layer `layer` of every sentence, one after another: (total words, width) per word, (sentences, width)
    pooled."""
    parts = [array[layer].reshape(-1, width) for array in per_layer]
    return np.concatenate(parts) if parts else np.zeros((0, width), np.float32)


def _fixed_lists(values: np.ndarray, width: int) -> pa.FixedSizeListArray:
    """(rows, width) values as `rows` fixed-size lists."""
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(values).reshape(-1)), width)
