"""Precomputed context-independent token embeddings (AllenNLP's `elmo_token_embeddings.hdf5` + a vocabulary file),
or computed once from a vocabulary file (`cache_vocabulary`), for users who want `ElmoModel` to look words up
instead of running the character CNN on them (`ElmoModel.set_token_embedding_table`).

Kept out of the modeling file because it needs h5py.
"""

import os

import h5py
import torch

from ..character_ids import word_to_char_ids
from ..formats.vocab import MAXTERMID
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


def cache_vocabulary(model: ElmoModel, vocab_path: str | os.PathLike, limit: int | None = None) -> int:
    """Compute the token embeddings of the first `limit` words (all when None) of the vocabulary file `vocab_path`
    (one word per line, most frequent first: the `vocab.txt` that `elmo-convert --model-dir` keeps from an NLPL
    model) with `model`'s character CNN, and make `model` use them as its token-embedding table, as simple_elmo's
    `limit` does. Outputs are unchanged; words in the table skip the CNN. Returns the number of words cached."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive number of words or None, got {limit!r}.")
    words = []
    with open(vocab_path, encoding="utf-8") as handle:
        for line in handle:
            word = line.strip()
            if word and word != MAXTERMID:
                words.append(word)
            if len(words) == limit:
                break
    if not words:
        raise ValueError(f"{vocab_path}: no words.")
    size = model.config.max_characters_per_token
    char_ids = torch.tensor([word_to_char_ids(word, size) for word in words], device=model.device)
    model.set_token_embedding_table(words, None)
    with torch.no_grad():
        embeddings = model.char_encoder.embed_words(char_ids)
    model.set_token_embedding_table(words, embeddings)
    return len(words)
