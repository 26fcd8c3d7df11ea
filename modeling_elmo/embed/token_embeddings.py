"""Precomputed context-independent token embeddings (AllenNLP's `elmo_token_embeddings.hdf5` + a vocabulary file).

Kept out of the modeling file because it needs h5py.
"""

import os

import h5py
import torch

from ..modeling_elmo import ElmoModel


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


def load_token_embedding_table(
    model: ElmoModel, vocab_path: str | os.PathLike, embeddings_path: str | os.PathLike, dataset: str = "embedding"
) -> None:
    """Make `model` use the precomputed embeddings of these words instead of running its character CNN on them."""
    model.set_token_embedding_table(*read_token_embedding_table(vocab_path, embeddings_path, dataset))
