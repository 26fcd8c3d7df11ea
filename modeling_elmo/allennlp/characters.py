"""AllenNLP's character ids for ELMo: `ELMoCharacterMapper` (its constants and `convert_word_to_char_ids`) and
`batch_to_ids`. The ids are the project's own (`character_ids.word_to_char_ids`, what `ElmoTokenizer` encodes): a
word's UTF-8 bytes + 1, wrapped in begin/end-of-word, padded to 50; a padded word is all zeros."""

import functools
from typing import Any

import torch

from ..character_ids import BOS_TOKEN, EOS_TOKEN, word_to_char_ids


class _InstanceOrClassMethod:
    """A method callable on the class (AllenNLP 0.x: `ELMoCharacterMapper.convert_word_to_char_ids(word)`) and on an
    instance (AllenNLP 2.x: `ELMoCharacterMapper(tokens_to_add).convert_word_to_char_ids(word)`)."""

    def __init__(self, function):
        self.function = function
        self.__doc__ = function.__doc__

    def __get__(self, instance: Any, owner: type) -> Any:
        return lambda word: self.function(instance, word)


def _boundary_word(character: int) -> list[int]:
    """The char ids (before the +1 shift) of a sentence boundary word made of `character`."""
    ids = [ELMoCharacterMapper.padding_character] * ELMoCharacterMapper.max_word_length
    ids[:3] = [ELMoCharacterMapper.beginning_of_word_character, character, ELMoCharacterMapper.end_of_word_character]
    return ids


class ELMoCharacterMapper:
    """Maps a word to its 50 ELMo character ids (shifted by +1 so that 0 is padding). `tokens_to_add` maps extra
    special tokens to one character id each (before the shift), as in AllenNLP 2.x."""

    max_word_length = 50
    beginning_of_sentence_character = 256
    end_of_sentence_character = 257
    beginning_of_word_character = 258
    end_of_word_character = 259
    padding_character = 260
    bos_token = BOS_TOKEN
    eos_token = EOS_TOKEN

    def __init__(self, tokens_to_add: dict[str, int] | None = None) -> None:
        self.tokens_to_add = tokens_to_add or {}

    @_InstanceOrClassMethod
    def convert_word_to_char_ids(self, word: str) -> list[int]:
        """The 50 character ids of `word` (+1 shifted): its UTF-8 bytes cut at 48, or a special token's id."""
        if not isinstance(word, str):
            raise TypeError(f"convert_word_to_char_ids takes a str, got {type(word).__name__}.")
        if self is not None and word in self.tokens_to_add:
            return [char + 1 for char in _boundary_word(self.tokens_to_add[word])]
        return word_to_char_ids(word, ELMoCharacterMapper.max_word_length)

    def __eq__(self, other: object) -> bool:
        if isinstance(self, other.__class__):
            return self.__dict__ == other.__dict__
        return NotImplemented


ELMoCharacterMapper.beginning_of_sentence_characters = _boundary_word(256)
ELMoCharacterMapper.end_of_sentence_characters = _boundary_word(257)


@functools.lru_cache(maxsize=100_000)
def _word_ids(word: str) -> tuple[int, ...]:
    return tuple(word_to_char_ids(word, ELMoCharacterMapper.max_word_length))


def batch_to_ids(batch: list[list[str]]) -> torch.Tensor:
    """Tokenized sentences -> character ids (len(batch), longest sentence, 50), long, zero rows after each sentence
    ((len(batch), 0) when no sentence has a word, as in AllenNLP)."""
    if not isinstance(batch, list | tuple) or not all(isinstance(sentence, list | tuple) for sentence in batch):
        raise TypeError("batch_to_ids takes a list of tokenized sentences (lists of str).")
    for index, sentence in enumerate(batch):
        if not all(isinstance(token, str) for token in sentence):
            raise TypeError(f"batch_to_ids: sentence {index} holds a token that is not a str.")
    length = max((len(sentence) for sentence in batch), default=0)
    if length == 0:  # AllenNLP's shape when no sentence has a word
        return torch.zeros(len(batch), 0, dtype=torch.long)
    ids = torch.zeros(len(batch), length, ELMoCharacterMapper.max_word_length, dtype=torch.long)
    for row, sentence in enumerate(batch):
        if sentence:
            ids[row, : len(sentence)] = torch.tensor([_word_ids(token) for token in sentence])
    return ids
