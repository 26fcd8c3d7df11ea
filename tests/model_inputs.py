"""Inputs and models shared by the fast-path tests: character ids built straight from the character-id rules, and
ElmoModels with random weights written in the original format."""

import torch

from modeling_elmo import ElmoModel
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.conversion.original_checkpoint import load_original_checkpoint


def char_ids(sentences: list[list[str]]) -> torch.Tensor:
    """Right-padded character ids (batch, max_words, 50)."""
    ids = torch.zeros(len(sentences), max(map(len, sentences)), 50, dtype=torch.long)
    for row, words in enumerate(sentences):
        ids[row, : len(words)] = torch.tensor([word_to_char_ids(word) for word in words])
    return ids


def random_model(random_checkpoint, seed: int = 0, **architecture) -> ElmoModel:
    """An ElmoModel in eval mode loaded from a random original-format checkpoint (the `random_checkpoint` fixture)."""
    config, state = load_original_checkpoint(*random_checkpoint(seed=seed, **architecture))
    model = ElmoModel(config)
    model.load_state_dict(state)
    return model.eval()
