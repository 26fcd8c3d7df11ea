"""Context-independent token embeddings that `ElmoModel` looks words up in instead of running the character CNN on
them (`ElmoModel.set_token_embedding_table`): AllenNLP's precomputed `elmo_token_embeddings.hdf5` with its vocabulary
file (read by `modeling_elmo.formats.token_table`), or computed once from a vocabulary file (`cache_vocabulary`).
Kept out of the modeling file because reading them needs h5py."""

import os

import torch

from ..character_ids import word_to_char_ids
from ..formats.token_table import read_token_embedding_table, read_word_list
from ..modeling_elmo import ElmoModel


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
    words = read_word_list(vocab_path, limit)
    if not words:
        raise ValueError(f"{vocab_path}: no words.")
    size = model.config.max_characters_per_token
    char_ids = torch.tensor([word_to_char_ids(word, size) for word in words], device=model.device)
    model.set_token_embedding_table(words, None)
    with torch.no_grad():
        embeddings = model.char_encoder.embed_words(char_ids)
    model.set_token_embedding_table(words, embeddings)
    return len(words)
