"""Tokenizer for ELMo: splits text into words and maps every word to its character ids.

ELMo reads characters, not sub-words: one token is one word, encoded as `max_characters_per_token` character ids
(see `character_ids.py`). `input_ids` are therefore 3-D, `(batch, words, max_characters_per_token)`, and a padded word
is an all-zero row. The sentence boundary words `<S>` / `</S>` are added by the model, not by this tokenizer.
"""

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate, groupby
from typing import TYPE_CHECKING, Any

import numpy as np
from transformers.tokenization_utils_base import BatchEncoding, TruncationStrategy
from transformers.utils import PaddingStrategy, TensorType, is_numpy_array, is_torch_tensor, logging, to_py_obj

from .character_ids import (
    BOW_TOKEN,
    BYTE_TOKENS,
    CHAR_PAD_TOKEN,
    CHAR_VOCAB,
    EOW_TOKEN,
    PAD_TOKEN,
    CharacterLexicon,
    word_to_char_ids,
)
from .transformers_compat import PythonBackend
from .word_splitter import Word, split_words

if TYPE_CHECKING:
    import torch

logger = logging.get_logger(__name__)

_TOKEN_BYTES = {**BYTE_TOKENS, PAD_TOKEN: b"", CHAR_PAD_TOKEN: b""}  # what each token decodes to (others: itself)


@functools.lru_cache(maxsize=1 << 16)
def cached_char_ids(word: str, max_characters_per_token: int = 50) -> tuple[int, ...]:
    """`character_ids.word_to_char_ids`, cached: the ids the tokenizer gives a word without a lexicon."""
    return tuple(word_to_char_ids(word, max_characters_per_token))


def char_ids_tensor(
    sentences: Sequence[Sequence[str]], max_characters_per_token: int, word_char_ids: Callable[[str], Sequence[int]]
) -> "torch.Tensor":
    """
    Tokenized sentences -> character ids (len(sentences), longest sentence, `max_characters_per_token`), int64, zero
    rows after each sentence's words (the tokenizer's padded `input_ids`, without its checks, offsets and masks).
    `word_char_ids` gives one word's row (`cached_char_ids` for the original vocabulary).
    """
    import torch

    longest = max((len(sentence) for sentence in sentences), default=0)
    ids = torch.zeros(len(sentences), longest, max_characters_per_token, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        if sentence:
            ids[row, : len(sentence)] = torch.tensor([word_char_ids(word) for word in sentence])
    return ids


def _is_rows(ids: Any) -> bool:
    """Whether python `ids` are rows (`(words, chars)` or a batch of them), not a flat list of ids."""
    return isinstance(ids, (list, tuple)) and len(ids) > 0 and isinstance(ids[0], (list, tuple))


def _is_batch_of_examples(ids: Any) -> bool:
    """Whether python `ids` are a batch `(batch, words, chars)`; a word's row is never empty, so `[[]]` is a batch."""
    return _is_rows(ids) and (len(ids[0]) == 0 or isinstance(ids[0][0], (list, tuple)))


class ElmoBatchEncoding(BatchEncoding):
    """`BatchEncoding` for 3-D `input_ids` `(batch, words, characters)`.

    Adds `word_ids()` / `sequence_ids()` (every position is one word, padding is `None`; in text pairs,
    `token_type_ids` tell the texts apart and each text's words are numbered from 0) and keeps the character axis of
    a tensor without words (shape `(batch, 0, characters)`). `n_sequences` is 2 for text pairs.
    """

    def __init__(self, *args: Any, max_characters_per_token: int = 50, n_sequences: int = 1, **kwargs: Any):
        self._max_characters_per_token = max_characters_per_token
        super().__init__(*args, n_sequences=n_sequences, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        return {**state, "max_characters_per_token": self._max_characters_per_token, "n_sequences": self.n_sequences}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._max_characters_per_token = state.get("max_characters_per_token", 50)
        self._n_sequences = state.get("n_sequences", 1)

    def convert_to_tensors(
        self, tensor_type: str | TensorType | None = None, prepend_batch_axis: bool = False
    ) -> "ElmoBatchEncoding":
        if tensor_type is None:
            return self
        # Tensors built from empty nested lists lose their trailing axes: remember the intended shapes.
        shapes = {}
        for key, width in (("input_ids", self._max_characters_per_token), ("offset_mapping", 2)):
            value = self.data.get(key)
            if isinstance(value, (list, tuple)) and not any(map(len, value)):
                shape = (len(value), 0, width) if value else (0, width)
                shapes[key] = (1, *shape) if prepend_batch_axis else shape
        dense_input_ids = self._dense_input_ids(tensor_type, prepend_batch_axis)
        if dense_input_ids is not None:
            del self.data["input_ids"]  # converted here; the others (2-D and smaller) by `BatchEncoding`
        try:
            super().convert_to_tensors(tensor_type=tensor_type, prepend_batch_axis=prepend_batch_axis)
        finally:
            if dense_input_ids is not None:
                self.data["input_ids"] = dense_input_ids
        for key, shape in shapes.items():  # ids of an empty list convert to floats (Transformers 4.x): make them int64
            value = self.data[key].reshape(shape)
            self.data[key] = value.astype(np.int64) if isinstance(value, np.ndarray) else value.long()
        return self

    def _dense_input_ids(self, tensor_type: str | TensorType, prepend_batch_axis: bool) -> Any:
        """
        `input_ids` given as nested lists of integers of one shape (padded), as an int64 PyTorch tensor or NumPy
        array of `tensor_type`; `None` for anything else (ragged lists, other values or tensor types), which
        `BatchEncoding.convert_to_tensors` converts or rejects. A padded batch holds `batch * words * characters`
        ids, which NumPy reads in one call where the generic conversion flattens them in Python first (see
        benchmarks/RESULTS.md, "Tokenizer: dense input_ids").
        """
        value = self.data.get("input_ids")
        if not (isinstance(value, list) and value and isinstance(value[0], (list, tuple))):
            return None
        tensor_type = TensorType(tensor_type)
        if tensor_type not in (TensorType.PYTORCH, TensorType.NUMPY):
            return None
        try:
            array = np.array([value] if prepend_batch_axis else value)
        except (ValueError, TypeError):  # ragged: `BatchEncoding` raises its error about padding
            return None
        if array.dtype.kind not in "iu" or array.ndim != 3:  # (batch, words, characters) of integers
            return None
        array = array.astype(np.int64, copy=False)
        if tensor_type == TensorType.NUMPY:
            return array
        import torch

        return torch.from_numpy(array)

    def _example(self, key: str, batch_index: int) -> list:
        """Example `batch_index` of `key` as Python lists (only that example is converted)."""
        value = self.data[key]
        if hasattr(value, "ndim"):  # tensor or array
            batched = value.ndim == (3 if key == "input_ids" else 2)
        else:
            batched = _is_batch_of_examples(value) if key == "input_ids" else _is_rows(value)
        if not batched and batch_index != 0:
            raise IndexError(f"batch_index {batch_index} is out of range: this encoding holds a single example.")
        return to_py_obj(value[batch_index] if batched else value)

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        """Which text every position of example `batch_index` belongs to: `0`, in text pairs `1` for the second
        text's words (read from `token_type_ids`), `None` for padding."""
        key = "attention_mask" if "attention_mask" in self.data else "input_ids"
        if key not in self.data:
            raise ValueError("word_ids() and sequence_ids() need `input_ids` or `attention_mask` in the encoding.")
        present = [any(item) if key == "input_ids" else bool(item) for item in self._example(key, batch_index)]
        if "token_type_ids" in self.data:
            types = self._example("token_type_ids", batch_index)
            return [int(kind) if word else None for word, kind in zip(present, types, strict=True)]
        return [0 if word else None for word in present]

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        """Word index of every position of example `batch_index` within its text: `[0, 1, ..., n - 1]` (for text
        pairs, then `[0, 1, ..., m - 1]` for the second text), `None` for padding."""
        sequences = self.sequence_ids(batch_index)
        words_before = {sequence: 0 for sequence in set(sequences)}
        word_ids = []
        for sequence in sequences:
            if sequence is None:
                word_ids.append(None)
                continue
            word_ids.append(words_before[sequence])
            words_before[sequence] += 1
        return word_ids


class ElmoTokenizer(PythonBackend):
    r"""
    Tokenizer for ELMo. Splits raw text into words (rules: `word_splitter.py`) or takes pre-split words (any string,
    used as is), and maps every word to `max_characters_per_token` character ids (`character_ids.py`). No sentence
    boundary words are added: the model adds `<S>` / `</S>` itself.

    `input_ids` are `(batch, words, max_characters_per_token)`, `attention_mask` `(batch, words)`; a single example
    gives `(words, max_characters_per_token)` lists, or a batch axis of 1 with `return_tensors`. A padded word is an
    all-zero row; `max_length`, padding and truncation count **words**; an empty sentence has zero words. Offsets
    index the raw string (`" ".join(words)` for pre-split input), `(0, 0)` for padding; the special-tokens mask is 1
    for padding only; `length` counts words. Overflowing tokens are not supported.

    Text pairs, BERT-style: `tokenizer(texts, text_pairs)` gives one row per pair, the first text's words then the
    second's (no separator: the model splits the row), and `token_type_ids` 0 for the first text's words and 1 for the
    second's (0 for padding); [`ElmoForSequenceClassification`] runs the two texts as separate sentences. Offsets
    index each word's own text, `word_ids()` count each text's words from 0, `sequence_ids()` say which text a word
    is in. Truncation to `max_length` words in total: `"longest_first"` (`True`) drops words from the longer text,
    one at a time, `"only_first"` / `"only_second"` from that text only (an error if that is not enough).

    Added tokens (`add_tokens`, `add_special_tokens`; e.g. entity markers `[E1]`) are kept whole as words in raw text
    (`single_word` is honoured; `split_special_tokens=True` splits them) and are saved with the tokenizer. Like every
    word they are spelled in character ids and need no embedding row: `len(tokenizer)` stays the size of the
    character vocabulary (`get_vocab()`, see `character_ids.CHAR_VOCAB`). Decoding turns rows back into words.

    A model with a character lexicon (`ElmoConfig.char_input="lexicon"`, e.g. ELMoForManyLangs) has a tokenizer
    with `char_lexicon` (and `word_lexicon` for a word embedding): characters are mapped through it instead of UTF-8
    bytes, and a row ends with the word's id (`character_ids.CharacterLexicon`). Splitting, offsets, padding and
    `word_ids()` are the same.

    Args:
        max_characters_per_token (`int`, defaults to 50):
            Character ids per word, begin/end-of-word markers included; longer words are cut (at byte level, or at
            character level with a lexicon).
        char_lexicon (`list[str]`, *optional*):
            The character lexicon, tokens in id order (id `i + 1` in `input_ids`); `None`: UTF-8 bytes.
        word_lexicon (`list[str]`, *optional*):
            The word lexicon of a model with a word embedding (needs `char_lexicon`).
    """

    vocab_files_names: dict[str, str] = {}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        max_characters_per_token: int = 50,
        pad_token: str = PAD_TOKEN,
        char_lexicon: list[str] | None = None,
        word_lexicon: list[str] | None = None,
        **kwargs: Any,
    ):
        if type(max_characters_per_token) is not int:
            raise TypeError(f"`max_characters_per_token` must be an int, got {max_characters_per_token!r}.")
        if max_characters_per_token < 3:
            raise ValueError(
                f"`max_characters_per_token` must be >= 3 (<bow>, a byte, <eow>), got {max_characters_per_token}."
            )
        if str(pad_token) != PAD_TOKEN:
            raise ValueError(
                f"ElmoTokenizer pads with all-zero words: `pad_token` must be {PAD_TOKEN!r}, got {pad_token!r}."
            )
        self.max_characters_per_token = max_characters_per_token
        if word_lexicon is not None and char_lexicon is None:
            raise ValueError(
                "`word_lexicon` needs a `char_lexicon` (a word embedding comes with a character lexicon)."
            )
        self.lexicon = (
            None if char_lexicon is None else CharacterLexicon(char_lexicon, word_lexicon, max_characters_per_token)
        )
        self._vocab = CHAR_VOCAB if self.lexicon is None else self.lexicon.vocab()
        self._ids_to_tokens = {index: token for token, index in self._vocab.items()}
        if self.lexicon is not None:  # saved in tokenizer_config.json; a byte tokenizer's file stays as it was
            kwargs.update(char_lexicon=char_lexicon, word_lexicon=word_lexicon)
        kwargs.update(pad_token=pad_token, max_characters_per_token=max_characters_per_token)
        super().__init__(token_type_ids_pattern="bert_style", **kwargs)

    # ---- vocabulary (character level) -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def input_ids_width(self) -> int:
        """Ids per word: the character ids, then the word id with a word lexicon."""
        has_words = self.lexicon is not None and self.lexicon.word_ids is not None
        return self.max_characters_per_token + int(has_words)

    def __len__(self) -> int:
        """The character vocabulary: added tokens are words spelled in characters, with no embedding row."""
        return self.vocab_size

    @property
    def vocab(self) -> dict[str, int]:
        """The character vocabulary, as `get_vocab()` (tools such as MTEB read `tokenizer.vocab`)."""
        return self.get_vocab()

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """No vocabulary file: the character vocabulary is fixed (`character_ids.py`), a lexicon is saved in
        `tokenizer_config.json`."""
        return ()

    def get_vocab(self) -> dict[str, int]:
        return {**self._vocab, **self.added_tokens_encoder}

    def _convert_token_to_id(self, token: str) -> int:
        if token not in self._vocab:
            raise ValueError(
                f"{token!r} is not a character token of the ELMo vocabulary (e.g. '<0x41>', '<bow>'); map words with "
                "`word_to_char_ids()` or by calling the tokenizer."
            )
        return self._vocab[token]

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int] | list:
        """A character token of the vocabulary ('<0x41>', '<bow>', ...) gives its id; any other string is a word (the
        tokens of `tokenize()`, as tools such as flair convert them) and gives its row of `input_ids`."""
        if isinstance(tokens, str):
            return self._vocab[tokens] if tokens in self._vocab else self.word_to_char_ids(tokens)
        return [self.convert_tokens_to_ids(token) for token in tokens]

    def _convert_id_to_token(self, index: int) -> str:
        if index not in self._ids_to_tokens:
            raise ValueError(f"{index} is not a character id of the ELMo vocabulary (0..{len(self._vocab) - 1}).")
        return self._ids_to_tokens[index]

    # ---- words ------------------------------------------------------------------------------------------------------

    def split_words(self, text: str, split_special_tokens: bool = False) -> list[Word]:
        """Split raw `text` into `(word, start, end)`, `text[start:end] == word`; added tokens are kept whole (not
        `<pad>`: padding is an all-zero row, not a word)."""
        if not isinstance(text, str):
            raise TypeError(f"split_words() expects a str, got {type(text).__name__}.")
        added = {token.content: token for token in self._added_tokens_decoder.values() if token.content != PAD_TOKEN}
        if split_special_tokens or not any(content in text for content in added):
            return split_words(text)
        words: list[Word] = []
        start = end = 0  # text[start:end] is the text since the last added token
        for piece in self.tokens_trie.split(text):
            token, piece_end = added.get(piece), end + len(piece)
            inside_a_word = text[end - 1 : end].isalnum() or text[piece_end : piece_end + 1].isalnum()
            if token is not None and not (token.single_word and inside_a_word):
                words += [*split_words(text, start, end), (piece, end, piece_end)]
                start = piece_end
            end = piece_end
        return words + split_words(text, start)

    def word_to_char_ids(self, word: str) -> list[int]:
        """The `max_characters_per_token` character ids of one word (same as the original vocabulary, +1), or its
        `input_ids_width` ids with a lexicon (`CharacterLexicon.row`)."""
        if not isinstance(word, str):
            raise TypeError(f"word_to_char_ids() expects a str, got {type(word).__name__}.")
        if self.lexicon is not None:
            return self.lexicon.row(word)
        return list(cached_char_ids(word, self.max_characters_per_token))

    def tokenize(self, text: str, **kwargs: Any) -> list[str]:
        """Split raw `text` into words (ELMo's tokens are words); with `is_split_into_words=True`, `text` is pre-split
        words joined by spaces (as flair passes them) and splits at the spaces only."""
        if kwargs.get("is_split_into_words"):
            return text.split(" ") if text else []
        split_special_tokens = kwargs.get("split_special_tokens", self.split_special_tokens)
        return [word for word, _, _ in self.split_words(text, split_special_tokens)]

    def get_special_tokens_mask(
        self, token_ids_0: list, token_ids_1: list | None = None, already_has_special_tokens: bool = False
    ) -> list[int]:
        """0 for every word; with `already_has_special_tokens=True`, 1 for padding words (all-zero rows)."""
        if already_has_special_tokens and _is_rows(token_ids_0):
            return [int(not any(row)) for row in token_ids_0]
        return super().get_special_tokens_mask(token_ids_0, token_ids_1, already_has_special_tokens)

    # ---- encoding and padding ---------------------------------------------------------------------------------------

    def _validate(
        self,
        text: Any,
        text_pair: Any,
        is_split_into_words: bool,
        truncation_strategy: TruncationStrategy,
        max_length: Any,
        return_overflowing_tokens: bool,
        return_token_type_ids: bool | None,
    ) -> bool:
        """Check the input of `__call__`, naming what ELMo's words cannot take; return whether `text` is a batch."""
        if return_overflowing_tokens:
            raise ValueError("ElmoTokenizer does not support `return_overflowing_tokens` (a token is a word).")
        if text_pair is None and truncation_strategy == TruncationStrategy.ONLY_SECOND:
            raise ValueError("truncation='only_second' needs text pairs (`text_pair`).")
        if text_pair is not None and return_token_type_ids is False:
            raise ValueError(
                "Text pairs need `token_type_ids` (they tell the two texts apart): do not pass "
                "return_token_type_ids=False with `text_pair`."
            )
        if max_length is not None and (type(max_length) is not int or max_length < 0):
            raise ValueError(f"`max_length` must be a number of words >= 0, got {max_length!r}.")
        is_batched = self._validate_texts("text", text, is_split_into_words)
        if text_pair is not None:
            if self._validate_texts("text_pair", text_pair, is_split_into_words) != is_batched:
                kind = "a batch" if is_batched else "one example"
                raise ValueError(f"`text_pair` must be {kind}, as `text` is.")
            if is_batched and len(text_pair) != len(text):
                raise ValueError(f"`text` has {len(text)} examples but `text_pair` has {len(text_pair)}.")
        return is_batched

    @staticmethod
    def _validate_texts(name: str, text: Any, is_split_into_words: bool) -> bool:
        """Check one of `text` / `text_pair` (named `name`); return whether it is a batch."""
        if isinstance(text, str):
            return False
        if not isinstance(text, (list, tuple)):
            raise TypeError(
                f"`{name}` must be a str, a list of str or a list of lists of str, got {type(text).__name__}."
            )
        if is_split_into_words:
            where = "" if name == "text" else f" of `{name}`"
            for index, words in enumerate(text if _is_rows(text) else [text]):
                if not isinstance(words, (list, tuple)):
                    raise TypeError(
                        f"is_split_into_words=True: example {index}{where} must be a list of str, got "
                        f"{type(words).__name__}."
                    )
                for position, word in enumerate(words):
                    if not isinstance(word, str):
                        raise TypeError(
                            f"is_split_into_words=True: word {position} of example {index}{where} must be a str, "
                            f"got {type(word).__name__} ({word!r})."
                        )
            return _is_rows(text)
        if not text:
            raise ValueError(
                f"`{name}` is an empty batch ([]); an empty sentence is '' (or [] with is_split_into_words)."
            )
        for index, example in enumerate(text):
            if isinstance(example, (list, tuple)):
                raise ValueError(f"`{name}[{index}]` is a list: pass is_split_into_words=True for pre-split words.")
            if not isinstance(example, str):
                raise TypeError(f"`{name}[{index}]` must be a str, got {type(example).__name__}.")
        return True

    def _words(self, example: Any, is_split_into_words: bool, split_special_tokens: bool) -> list[Word]:
        """The words of one validated example with their offsets (into `" ".join(words)` for pre-split input)."""
        if not is_split_into_words:
            return self.split_words(example, split_special_tokens)
        starts = accumulate((len(word) + 1 for word in example), initial=0)
        return [(word, start, start + len(word)) for word, start in zip(example, starts, strict=False)]

    def _drop_words(self, words: list[Word], count: int) -> list[Word]:
        """`words` without `count` of them, taken from the end given by `truncation_side`."""
        if count <= 0:
            return words
        return words[count:] if self.truncation_side == "left" else words[:-count]

    def _truncate_pair(
        self, index: int, first: list[Word], second: list[Word], max_length: int, strategy: TruncationStrategy
    ) -> tuple[list[Word], list[Word]]:
        """Bring pair `index` to at most `max_length` words in total, as `strategy` says (see the class docstring)."""
        excess = len(first) + len(second) - max_length
        if excess <= 0:
            return first, second
        if strategy == TruncationStrategy.LONGEST_FIRST:
            kept_first, kept_second = len(first), len(second)
            for _ in range(excess):  # one word at a time from the longer text (the second one on ties)
                if kept_first > kept_second:
                    kept_first -= 1
                else:
                    kept_second -= 1
            return self._drop_words(first, len(first) - kept_first), self._drop_words(
                second, len(second) - kept_second
            )
        name, words = ("first", first) if strategy == TruncationStrategy.ONLY_FIRST else ("second", second)
        if len(words) < excess:
            raise ValueError(
                f"truncation='only_{name}' cannot bring pair {index} to max_length={max_length} words: its {name} "
                f"text has {len(words)} words and {excess} would have to go; use truncation='longest_first'."
            )
        truncated = self._drop_words(words, excess)
        return (truncated, second) if name == "first" else (first, truncated)

    def _encode_plus(
        self,
        text: Any,
        text_pair: Any = None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: str | TensorType | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool = False,
        **kwargs: Any,
    ) -> ElmoBatchEncoding:
        """Encode one example or a batch, of single texts or text pairs (called by `__call__` and `encode`);
        `add_special_tokens` has no effect."""
        truncation_strategy = TruncationStrategy(truncation_strategy)
        is_batched = self._validate(
            text,
            text_pair,
            is_split_into_words,
            truncation_strategy,
            max_length,
            return_overflowing_tokens,
            return_token_type_ids,
        )
        if kwargs:
            logger.warning(f"Keyword arguments {kwargs} not recognized by ElmoTokenizer and ignored.")
        firsts = [
            self._words(example, is_split_into_words, split_special_tokens)
            for example in (text if is_batched else [text])
        ]
        seconds = [[] for _ in firsts]
        if text_pair is not None:
            pairs = text_pair if is_batched else [text_pair]
            seconds = [self._words(example, is_split_into_words, split_special_tokens) for example in pairs]
        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None:
            truncated = sum(
                len(first) + len(second) > max_length for first, second in zip(firsts, seconds, strict=True)
            )
            if text_pair is None:
                firsts = [self._drop_words(first, len(first) - max_length) for first in firsts]
            else:
                pairs = [
                    self._truncate_pair(index, first, second, max_length, truncation_strategy)
                    for index, (first, second) in enumerate(zip(firsts, seconds, strict=True))
                ]
                firsts, seconds = [first for first, _ in pairs], [second for _, second in pairs]
            if truncated and verbose and not self.deprecation_warnings.get("elmo-words-truncated", False):
                logger.warning(
                    f"ElmoTokenizer: truncation dropped words from {truncated} example(s) longer than max_length="
                    f"{max_length} words (truncation_side={self.truncation_side!r}). This warning is shown once."
                )
                self.deprecation_warnings["elmo-words-truncated"] = True
        examples = [first + second for first, second in zip(firsts, seconds, strict=True)]
        for example in examples:
            self._eventual_warn_about_too_long_sequence(example, max_length, verbose)

        batch: dict[str, list] = {"input_ids": [[self.word_to_char_ids(w) for w, _, _ in ex] for ex in examples]}
        if return_token_type_ids or (return_token_type_ids is None and text_pair is not None):
            batch["token_type_ids"] = [
                [0] * len(first) + [1] * len(second) for first, second in zip(firsts, seconds, strict=True)
            ]
        if return_special_tokens_mask:
            batch["special_tokens_mask"] = [[0] * len(example) for example in examples]
        if return_offsets_mapping:  # each word's offsets index its own text
            batch["offset_mapping"] = [[(start, end) for _, start, end in example] for example in examples]
        if return_length:
            batch["length"] = [len(example) for example in examples]
        if not is_batched and return_tensors is None:  # a single example has a batch axis in tensors only
            batch = {key: value[0] for key, value in batch.items()}
        options = padding_strategy, max_length, pad_to_multiple_of, padding_side, return_attention_mask, return_tensors
        return self.pad(batch, *options, verbose=verbose)

    def pad(
        self,
        encoded_inputs: Mapping | Sequence[Mapping],
        padding: bool | str | PaddingStrategy = True,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
        return_tensors: str | TensorType | None = None,
        verbose: bool = True,
    ) -> ElmoBatchEncoding:
        """Pad one example (`input_ids` `(words, chars)`; no batch axis is added) or a batch (a dict of lists, or a
        list of dicts as data collators send) to the same number of words, with all-zero rows. Takes lists, numpy
        arrays or torch tensors (which give tensors of the same kind by default); other keys (`labels`) pass as is."""
        if isinstance(encoded_inputs, (list, tuple)):
            if not encoded_inputs:
                raise ValueError("pad() got an empty list of examples.")
            for index, feature in enumerate(encoded_inputs):
                if not isinstance(feature, Mapping):
                    raise TypeError(f"pad(): example {index} must be a dict, got {type(feature).__name__}.")
                if missing := [key for key in encoded_inputs[0] if key not in feature]:
                    raise ValueError(f"pad(): example {index} lacks the key(s) {missing} that example 0 has.")
            data = {key: [feature[key] for feature in encoded_inputs] for key in encoded_inputs[0]}
        elif isinstance(encoded_inputs, Mapping):
            data = dict(encoded_inputs)
        else:
            raise TypeError(f"pad() expects a dict or a list of dicts, got {type(encoded_inputs).__name__}.")
        if "input_ids" not in data:
            raise ValueError(f"pad() needs `input_ids`, got the keys {list(data)}.")
        probe = data["input_ids"]
        while isinstance(probe, (list, tuple)) and probe:
            probe = probe[0]
        if is_torch_tensor(probe) or is_numpy_array(probe):
            return_tensors = return_tensors or ("pt" if is_torch_tensor(probe) else "np")
            data = {key: to_py_obj(value) for key, value in data.items()}
        single = isinstance(encoded_inputs, Mapping) and not _is_batch_of_examples(data["input_ids"])
        if single:
            data = {key: [value] for key, value in data.items()}
        for key, value in data.items():
            if not isinstance(value, (list, tuple)) or len(value) != len(data["input_ids"]):
                raise ValueError(f"`{key}` must hold one entry per example ({len(data['input_ids'])}).")
        if not all(isinstance(ids, (list, tuple)) and (not ids or _is_rows(ids)) for ids in data["input_ids"]):
            raise ValueError("`input_ids` must be (words, characters) or (batch, words, characters) character ids.")
        if padding_side not in (None, "left", "right"):
            raise ValueError(f"`padding_side` must be 'left' or 'right', got {padding_side!r}.")
        options = padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask
        is_pair = any(1 in types for types in data.get("token_type_ids", ()))  # a second text's words are marked
        padded = super().pad(data, *options, verbose=verbose)  # calls `_pad` per example
        data = {key: value[0] for key, value in padded.items()} if single else padded.data
        return ElmoBatchEncoding(
            data,
            tensor_type=return_tensors,
            max_characters_per_token=self.input_ids_width,
            n_sequences=2 if is_pair else 1,
        )

    def _pad(
        self,
        encoded_inputs: dict[str, Any],
        max_length: int | None = None,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
    ) -> dict[str, Any]:
        """Pad one example `(words, chars)`: the base class pads the per-word keys (mask 0, special-tokens mask 1);
        words get all-zero rows and offsets `(0, 0)`."""
        if return_attention_mask is False:
            encoded_inputs.pop("attention_mask", None)
        rows, offsets = list(encoded_inputs["input_ids"]), encoded_inputs.get("offset_mapping")
        out = super()._pad(
            encoded_inputs, max_length, padding_strategy, pad_to_multiple_of, padding_side, return_attention_mask
        )
        missing, right = len(out["input_ids"]) - len(rows), (padding_side or self.padding_side) == "right"
        pad_rows = [[0] * (len(rows[0]) if rows else self.input_ids_width) for _ in range(missing)]
        out["input_ids"] = rows + pad_rows if right else pad_rows + rows
        if offsets is not None:
            pad_offsets = [(0, 0)] * missing
            out["offset_mapping"] = list(offsets) + pad_offsets if right else pad_offsets + list(offsets)
        return out

    # ---- decoding ---------------------------------------------------------------------------------------------------

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> str | list[str]:
        """An id or a flat list of ids gives character tokens; rows of character ids `(words, chars)` give words
        (a padding word is `"<pad>"`; `skip_special_tokens=True` drops padding and special tokens)."""
        ids = to_py_obj(ids)
        if not _is_rows(ids):
            return super().convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens)
        skip = set(self.all_special_tokens) if skip_special_tokens else set()
        to_tokens = super().convert_ids_to_tokens  # (a comprehension cannot call zero-argument `super()`)
        width = self.max_characters_per_token  # a word id after it (word lexicon) is not a character
        words = [self.convert_tokens_to_string(to_tokens(row[:width])) if any(row) else self.pad_token for row in ids]
        return [word for word in words if word not in skip]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Join character tokens into text: `<bow>` / `<eow>` end words, bytes are decoded as UTF-8 (errors replaced),
        padding is dropped, other tokens are kept as text; words are joined by spaces."""
        groups = groupby(map(str, tokens), key=lambda token: token in (BOW_TOKEN, EOW_TOKEN))
        words = (
            b"".join(_TOKEN_BYTES.get(token, token.encode("utf-8", "surrogatepass")) for token in group)
            for is_marker, group in groups
            if not is_marker
        )
        return " ".join(text for text in (word.decode("utf-8", "replace") for word in words) if text)

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str | list[str]:
        """Decode `(words, chars)` ids to the words joined by spaces (a batch `(batch, words, chars)` gives a list).

        A flat list of character ids (e.g. one word) is decoded as characters.
        """
        token_ids = to_py_obj(token_ids)
        if _is_batch_of_examples(token_ids):
            return [self.decode(example, skip_special_tokens, **kwargs) for example in token_ids]
        if _is_rows(token_ids):
            return " ".join(self.convert_ids_to_tokens(token_ids, skip_special_tokens=skip_special_tokens))
        return super().decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)


__all__ = ["ElmoBatchEncoding", "ElmoTokenizer"]
