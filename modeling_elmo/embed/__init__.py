"""Bulk embedding: `elmo-embed` (`cli`), length-bucketed batches (`batching`), resumable HDF5 parts and shards
(`store`), and AllenNLP-style precomputed token-embedding tables (`token_embeddings`)."""

from .cli import main

__all__ = ["main"]
