"""AllenNLP's character ids (tests/data/token_indexers/elmo_indexer_test.py of allenai/allennlp 2.10.1, and 0.x's
static `convert_word_to_char_ids`), `batch_to_ids` and the sentence-boundary helpers."""

import torch

from modeling_elmo import ElmoTokenizer
from modeling_elmo.allennlp import (
    ELMoCharacterMapper,
    add_sentence_boundary_token_ids,
    batch_to_ids,
    remove_sentence_boundaries,
)

PADDING = [261] * 47


def test_sentence_boundary_words():
    assert ELMoCharacterMapper().convert_word_to_char_ids("<S>") == [259, 257, 260, *PADDING]
    assert ELMoCharacterMapper().convert_word_to_char_ids("</S>") == [259, 258, 260, *PADDING]
    assert ELMoCharacterMapper.beginning_of_sentence_characters == [258, 256, 259] + [260] * 47  # not shifted
    assert ELMoCharacterMapper.end_of_sentence_characters == [258, 257, 259] + [260] * 47


def test_unicode_bytes():
    assert ELMoCharacterMapper().convert_word_to_char_ids(chr(256) + "t") == [259, 197, 129, 117, 260, *[261] * 45]


def test_static_call_of_allennlp_0x_and_instance_call_of_2x():
    assert (
        ELMoCharacterMapper.convert_word_to_char_ids("Second") == [259, 84, 102, 100, 112, 111, 101, 260] + [261] * 42
    )
    assert ELMoCharacterMapper.convert_word_to_char_ids("a") == ELMoCharacterMapper().convert_word_to_char_ids("a")


def test_tokens_to_add():
    mapper = ELMoCharacterMapper(tokens_to_add={"<first>": 1})
    assert mapper.convert_word_to_char_ids("<first>") == [259, 2, 260, *PADDING]
    assert ELMoCharacterMapper.convert_word_to_char_ids("<first>")[:3] == [259, ord("<") + 1, ord("f") + 1]
    assert mapper == ELMoCharacterMapper(tokens_to_add={"<first>": 1}) and mapper != ELMoCharacterMapper()


def test_long_words_are_cut_at_48_bytes():
    ids = ELMoCharacterMapper.convert_word_to_char_ids("é" * 30)  # 60 bytes: cut inside a character
    assert len(ids) == 50 and ids[0] == 259 and ids[-1] == 260 and ids[1:49] == [0xC3 + 1, 0xA9 + 1] * 24


def test_batch_to_ids_pads_with_zero_words():
    ids = batch_to_ids([["Second", "."], []])
    assert ids.dtype == torch.long and tuple(ids.shape) == (2, 2, 50)
    assert ids[0, 0].tolist() == ELMoCharacterMapper.convert_word_to_char_ids("Second")
    assert ids[0, 1].tolist() == [259, 47, 260] + PADDING
    assert not ids[1].any()
    assert tuple(batch_to_ids([[]]).shape) == (1, 0)  # AllenNLP's shape when there are no words


def test_batch_to_ids_equals_the_tokenizer():
    sentences = [["The", "bank", "closed", "."], ["Ünïcödé", "<S>", "x" * 70], ["a"]]
    encoded = ElmoTokenizer()(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    assert torch.equal(batch_to_ids(sentences), encoded["input_ids"])


def test_sentence_boundaries_round_trip():
    tensor = torch.arange(1, 2 * 3 * 4 + 1, dtype=torch.float).view(2, 3, 4)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    tensor = tensor * mask.unsqueeze(-1)
    begin, end = torch.full((4,), 100.0), torch.full((4,), 200.0)
    with_boundaries, new_mask = add_sentence_boundary_token_ids(tensor, mask, begin, end)
    assert tuple(with_boundaries.shape) == (2, 5, 4) and new_mask.sum(dim=1).tolist() == [4, 5]
    assert torch.equal(with_boundaries[0, 0], begin) and torch.equal(with_boundaries[0, 3], end)
    assert torch.equal(with_boundaries[1, 4], end)
    restored, restored_mask = remove_sentence_boundaries(with_boundaries, new_mask)
    assert torch.equal(restored, tensor) and torch.equal(restored_mask, mask)


def test_sentence_boundaries_on_ids():
    ids, mask = add_sentence_boundary_token_ids(
        torch.tensor([[5, 6, 0], [7, 0, 0]]), torch.tensor([[1, 1, 0], [1, 0, 0]]), 1, 2
    )
    assert ids.tolist() == [[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]]
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, False, False]]
