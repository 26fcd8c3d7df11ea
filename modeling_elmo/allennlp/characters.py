"""AllenNLP's character ids for ELMo: `ELMoCharacterMapper` (its constants and `convert_word_to_char_ids`) and
`batch_to_ids`. The ids are the project's own (`character_ids.word_to_char_ids`, what `ElmoTokenizer` encodes): a
word's UTF-8 bytes + 1, wrapped in begin/end-of-word, padded to 50; a padded word is all zeros. AllenNLP's constants
are the same ids before the +1 shift."""

from typing import Any

import torch

from ..character_ids import (
    BEGIN_OF_SENTENCE_CHAR,
    BEGIN_OF_WORD_CHAR,
    BOS_TOKEN,
    END_OF_SENTENCE_CHAR,
    END_OF_WORD_CHAR,
    EOS_TOKEN,
    PADDING_CHAR,
    char_row,
    word_to_char_ids,
)
from ..foundation.checks import TokenListWording, check_token_lists
from ..tokenization_elmo import cached_char_ids, char_ids_tensor


class _InstanceOrClassMethod:
    """A method callable on the class (AllenNLP 0.x: `ELMoCharacterMapper.convert_word_to_char_ids(word)`) and on an
    instance (AllenNLP 2.x: `ELMoCharacterMapper(tokens_to_add).convert_word_to_char_ids(word)`)."""

    def __init__(self, function):
        self.function = function
        self.__doc__ = function.__doc__

    def __get__(self, instance: Any, owner: type) -> Any:
        return lambda word: self.function(instance, word)


class ELMoCharacterMapper:
    """Maps a word to its 50 ELMo character ids (shifted by +1 so that 0 is padding). `tokens_to_add` maps extra
    special tokens to one character id each (before the shift), as in AllenNLP 2.x."""

    max_word_length = 50
    beginning_of_sentence_character = BEGIN_OF_SENTENCE_CHAR - 1
    end_of_sentence_character = END_OF_SENTENCE_CHAR - 1
    beginning_of_word_character = BEGIN_OF_WORD_CHAR - 1
    end_of_word_character = END_OF_WORD_CHAR - 1
    padding_character = PADDING_CHAR - 1
    beginning_of_sentence_characters = [char - 1 for char in word_to_char_ids(BOS_TOKEN, max_word_length)]
    end_of_sentence_characters = [char - 1 for char in word_to_char_ids(EOS_TOKEN, max_word_length)]
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
            return char_row([self.tokens_to_add[word] + 1], ELMoCharacterMapper.max_word_length)
        return word_to_char_ids(word, ELMoCharacterMapper.max_word_length)

    def __eq__(self, other: object) -> bool:
        if isinstance(self, other.__class__):
            return self.__dict__ == other.__dict__
        return NotImplemented


_NOT_A_BATCH = "batch_to_ids takes a list of tokenized sentences (lists of str)."
BATCH_WORDING = TokenListWording(
    batch=_NOT_A_BATCH,
    batch_is_str=_NOT_A_BATCH,
    text_is_str=_NOT_A_BATCH,
    text=_NOT_A_BATCH,
    token="batch_to_ids: sentence {index} holds a token that is not a str.",
)


def batch_to_ids(batch: list[list[str]]) -> torch.Tensor:
    """Tokenized sentences -> character ids (len(batch), longest sentence, 50), long, zero rows after each sentence
    ((len(batch), 0) when no sentence has a word, as in AllenNLP)."""
    batch = check_token_lists(batch, BATCH_WORDING, TypeError, batch_types=(list, tuple))
    if not any(batch):  # AllenNLP's shape when no sentence has a word
        return torch.zeros(len(batch), 0, dtype=torch.long)
    return char_ids_tensor(batch, ELMoCharacterMapper.max_word_length, cached_char_ids)
