"""AllenNLP's precomputed context-independent token embeddings (`elmo_token_embeddings.hdf5` beside its vocabulary
file) and the plain word lists ELMo models come with (`vocab.txt`: one word per line, most frequent first, as the NLPL
repository and bilm-tf keep them)."""

import os

import h5py
import torch

from .vocab import MAXTERMID


def read_token_embedding_table(
    vocab_path: str | os.PathLike, embeddings_path: str | os.PathLike, dataset: str = "embedding"
) -> tuple[list[str], torch.Tensor]:
    """The words of `vocab_path` (one per line) and their rows of `embeddings_path[dataset]`: (num_words, dim)."""
    with open(vocab_path, encoding="utf-8") as handle:
        words = [line.rstrip("\r\n") for line in handle if line.rstrip("\r\n")]
    try:
        with h5py.File(embeddings_path, "r") as handle:
            stored = handle.get(dataset)
            if not isinstance(stored, h5py.Dataset) or stored.dtype.kind not in "fiu":
                raise ValueError(f"{embeddings_path}: no numeric dataset '{dataset}'.")
            embeddings = torch.from_numpy(stored[...]).float()
    except OSError as error:  # missing, unreadable, truncated or not HDF5
        raise ValueError(f"{embeddings_path}: cannot read it as HDF5 ({error}).") from error
    if embeddings.ndim != 2 or embeddings.shape[0] != len(words):
        raise ValueError(
            f"{embeddings_path}: dataset '{dataset}' has shape {tuple(embeddings.shape)}, but {vocab_path} has "
            f"{len(words)} words."
        )
    return words, embeddings


def read_word_list(vocab_path: str | os.PathLike, limit: int | None = None) -> list[str]:
    """The first `limit` words (all when None) of the word list `vocab_path`: blank lines and bilm-tf's
    `!!!MAXTERMID` line are skipped."""
    words = []
    with open(vocab_path, encoding="utf-8") as handle:
        for line in handle:
            word = line.strip()
            if word and word != MAXTERMID:
                words.append(word)
            if len(words) == limit:
                break
    return words


__all__ = ["read_token_embedding_table", "read_word_list"]
