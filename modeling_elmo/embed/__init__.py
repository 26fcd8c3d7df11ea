"""Bulk embedding: `elmo-embed` (`cli`), length-bucketed batches (`batching`), resumable HDF5 parts and shards
(`store`), AllenNLP-style precomputed token-embedding tables (`token_embeddings`), and for engines that map a function
over batches (Ray Data, Spark, `datasets`) `ElmoBatchEmbedder` (`batch_embedder`) and Spark's `predict_batch_udf`
helper `spark_predict_batch_fn` (`spark_predict`), imported on first use (they need pyarrow and torch)."""

from .cli import main

__all__ = ["ElmoBatchEmbedder", "main", "spark_predict_batch_fn"]


def __getattr__(name: str):
    """`ElmoBatchEmbedder` and `spark_predict_batch_fn`, imported on first use."""
    if name == "ElmoBatchEmbedder":
        from .batch_embedder import ElmoBatchEmbedder

        return ElmoBatchEmbedder
    if name == "spark_predict_batch_fn":
        from .spark_predict import spark_predict_batch_fn

        return spark_predict_batch_fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
