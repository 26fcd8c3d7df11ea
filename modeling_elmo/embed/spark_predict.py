"""
`spark_predict_batch_fn`: the `make_predict_fn` that Spark's `pyspark.ml.functions.predict_batch_udf` wants, for
pooled ELMo vectors of a text column. That API passes each batch as a numpy array of the column's values (no ids,
no other columns), so only one vector per row fits: the mean over the row's words, zeros for an empty text. Nothing
here imports pyspark; the function returned is pickled to the workers, which load the model once per process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .batch_embedder import ElmoBatchEmbedder, words_of_text

if TYPE_CHECKING:
    import numpy as np


def spark_predict_batch_fn(
    model: str | os.PathLike,
    layers: str = "top",
    threads: int = 1,
    device: str | None = None,
    **options: int,
) -> Callable[[], Callable[[np.ndarray], np.ndarray | dict[str, np.ndarray]]]:
    """
    For `predict_batch_udf(spark_predict_batch_fn(model), return_type=..., batch_size=...)` on a string column: the
    pooled vectors of `layers` `"top"` or `"average"` as a float32 array (rows, width) (return type
    `ArrayType(FloatType())`), or for `"all"` a dict `layer_0` ... `layer_N` -> (rows, width) (a `StructType` of
    those names, each `ArrayType(FloatType())`). `options`: `batch_size`, `max_tokens`, `word_cache`, as for
    `ElmoBatchEmbedder`; arguments out of range fail here, in the driver.
    """
    embedder = ElmoBatchEmbedder(model, layers, "mean", "float32", threads, device, **options)

    def make_predict_fn() -> Callable[[np.ndarray], np.ndarray | dict[str, np.ndarray]]:
        def predict(texts: np.ndarray) -> np.ndarray | dict[str, np.ndarray]:
            """(rows,) strings -> (rows, width) float32 vectors, or a dict of them per layer."""
            import numpy as np

            table = embedder.embed(range(len(texts)), [words_of_text(row, text) for row, text in enumerate(texts)])
            columns = {
                name: np.stack(table.column(name).to_numpy(zero_copy_only=False)).astype(np.float32)
                for name in table.column_names[2:]
            }
            return columns if layers == "all" else columns["embedding"]

        return predict

    return make_predict_fn
