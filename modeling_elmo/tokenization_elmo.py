"""Tokenizer for ELMo: splits text into words and maps every word to its character ids.

ELMo reads characters, not sub-words: one token is one word, encoded as `max_characters_per_token` character ids
(see `character_ids.py`). `input_ids` are therefore 3-D, `(batch, words, max_characters_per_token)`, and a padded word
is an all-zero row. The sentence boundary words `<S>` / `</S>` are added by the model, not by this tokenizer.
"""

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from transformers.tokenization_python import PythonBackend
from transformers.tokenization_utils_base import BatchEncoding, TruncationStrategy
from transformers.utils import PaddingStrategy, TensorType, is_numpy_array, is_torch_tensor, logging, to_py_obj

from .character_ids import (
    BEGIN_OF_SENTENCE_CHAR,
    BEGIN_OF_WORD_CHAR,
    END_OF_SENTENCE_CHAR,
    END_OF_WORD_CHAR,
    PADDING_CHAR,
    word_to_char_ids,
)
from .word_splitter import split_words

logger = logging.get_logger(__name__)

# ---------------------------------------------------------------------------------------------------------------------
# Character vocabulary (what the generic tokenizer machinery sees: one "token" = one character id).
# ---------------------------------------------------------------------------------------------------------------------

PAD_TOKEN = "<pad>"
BOS_CHAR_TOKEN = "<S>"
EOS_CHAR_TOKEN = "</S>"
BOW_TOKEN = "<bow>"
EOW_TOKEN = "<eow>"
CHAR_PAD_TOKEN = "<char_pad>"


def _build_char_vocab() -> dict[str, int]:
    vocab = {PAD_TOKEN: 0}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = byte + 1
    vocab[BOS_CHAR_TOKEN] = BEGIN_OF_SENTENCE_CHAR
    vocab[EOS_CHAR_TOKEN] = END_OF_SENTENCE_CHAR
    vocab[BOW_TOKEN] = BEGIN_OF_WORD_CHAR
    vocab[EOW_TOKEN] = END_OF_WORD_CHAR
    vocab[CHAR_PAD_TOKEN] = PADDING_CHAR
    return vocab


_CHAR_VOCAB = _build_char_vocab()
_CHAR_ID_TO_TOKEN = {index: token for token, index in _CHAR_VOCAB.items()}


@functools.lru_cache(maxsize=1 << 16)
def _cached_char_ids(word: str, max_characters_per_token: int) -> tuple[int, ...]:
    return tuple(word_to_char_ids(word, max_characters_per_token))


# ---------------------------------------------------------------------------------------------------------------------
# Helpers for 3-D ids.
# ---------------------------------------------------------------------------------------------------------------------


def _is_empty_nested(value: Sequence) -> bool:
    """True for `[]` and for a list of empty lists (a batch of zero-word examples)."""
    return all(isinstance(item, (list, tuple)) and len(item) == 0 for item in value)


def _is_batch_of_examples(ids: Sequence) -> bool:
    """Whether python `input_ids` are a batch `(batch, words, chars)` rather than one example `(words, chars)`.

    `[]` is one example without words. Rows of character ids are never empty, so an empty inner list is an example.
    """
    if len(ids) == 0:
        return False
    first = ids[0]
    if not isinstance(first, (list, tuple)):
        raise ValueError(
            "`input_ids` must be (words, characters) or (batch, words, characters) character ids, got a flat list "
            f"of {type(first).__name__}."
        )
    return len(first) == 0 or isinstance(first[0], (list, tuple))


class ElmoBatchEncoding(BatchEncoding):
    """`BatchEncoding` for ELMo's 3-D `input_ids` `(batch, words, characters)`.

    Adds `word_ids()` / `sequence_ids()` (one token is one word, so token `i` of an example is word `i`, padding is
    `None`) and keeps the character axis when a tensor has no words at all (shape `(batch, 0, characters)`).
    """

    def __init__(
        self,
        data: dict[str, Any] | None = None,
        encoding: Any = None,
        tensor_type: str | TensorType | None = None,
        prepend_batch_axis: bool = False,
        n_sequences: int | None = None,
        *,
        max_characters_per_token: int = 50,
    ):
        self._max_characters_per_token = max_characters_per_token
        super().__init__(
            data,
            encoding=encoding,
            tensor_type=tensor_type,
            prepend_batch_axis=prepend_batch_axis,
            n_sequences=1 if n_sequences is None else n_sequences,
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "max_characters_per_token": self._max_characters_per_token}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._max_characters_per_token = state.get("max_characters_per_token", 50)
        self._n_sequences = 1

    def convert_to_tensors(
        self, tensor_type: str | TensorType | None = None, prepend_batch_axis: bool = False
    ) -> "ElmoBatchEncoding":
        if tensor_type is None:
            return self
        # Tensors built from empty nested lists lose their trailing axes: remember the intended shape.
        shapes = {}
        for key, width in (("input_ids", self._max_characters_per_token), ("offset_mapping", 2)):
            value = self.data.get(key)
            if isinstance(value, (list, tuple)) and _is_empty_nested(value):
                shape = (len(value), 0, width) if value else (0, width)
                shapes[key] = (1, *shape) if prepend_batch_axis else shape
        super().convert_to_tensors(tensor_type=tensor_type, prepend_batch_axis=prepend_batch_axis)
        for key, shape in shapes.items():
            self.data[key] = self.data[key].reshape(shape)
        return self

    def _words_present(self, batch_index: int) -> list[bool]:
        """Which positions of example `batch_index` hold a word (only that example is converted to Python)."""
        key = "attention_mask" if self.data.get("attention_mask") is not None else "input_ids"
        if key not in self.data:
            raise ValueError("word_ids() needs `input_ids` or `attention_mask` in the encoding.")
        value = self.data[key]
        if hasattr(value, "ndim"):  # tensor or array
            batched = value.ndim == (2 if key == "attention_mask" else 3)
        elif key == "attention_mask":
            batched = len(value) > 0 and isinstance(value[0], (list, tuple))
        else:
            batched = _is_batch_of_examples(value)
        if not batched and batch_index != 0:
            raise IndexError(f"batch_index {batch_index} is out of range: this encoding holds a single example.")
        example = to_py_obj(value[batch_index] if batched else value)
        return [bool(item) if key == "attention_mask" else any(item) for item in example]

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        """Word index of every position of example `batch_index`: `[0, 1, ..., n - 1]` plus `None` for padding."""
        out: list[int | None] = []
        count = 0
        for present in self._words_present(batch_index):
            out.append(count if present else None)
            count += present
        return out

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        """`0` for every word of example `batch_index`, `None` for padding (there are no sequence pairs)."""
        return [0 if present else None for present in self._words_present(batch_index)]


class ElmoTokenizer(PythonBackend):
    r"""
    Tokenizer for ELMo. Splits raw text into words (or takes pre-split words) and maps every word to
    `max_characters_per_token` character ids, exactly like the original bilm-tf vocabulary shifted by +1 (0 is
    padding): `[<bow>] + [byte + 1 for byte in utf8(word)][:max_characters_per_token - 2] + [<eow>]`, padded with the
    character-padding id. No sentence boundary tokens are added: the model adds `<S>` / `</S>` itself.

    Outputs: `input_ids` of shape `(batch, words, max_characters_per_token)` and `attention_mask` `(batch, words)`
    (1 = word, 0 = padding); a single example gives `(words, max_characters_per_token)` lists, or a leading batch axis
    of 1 with `return_tensors`. A padded word is an all-zero row. `max_length`, padding and truncation count
    **words**. An empty sentence (`""`, whitespace only, or `[]` with `is_split_into_words=True`) is not an error: it
    gives zero words (all padding in a padded batch).

    Word splitting of raw text (`split_words`), close to the Moses tokenizer used for the 1B Word Benchmark that
    ELMo was trained on; no lowercasing and no character normalisation, so every word is a slice of the input:

    - whitespace, control characters and zero-width spaces separate words and never appear in one;
    - runs of letters/digits form words; internal periods and hyphens stay inside ("3.5", "e.g", "well-known",
      "www.example.com"), commas only between digits ("1,000");
    - a final period stays attached to abbreviations with an internal period ("U.S.", "e.g.", "Ph.D."), to a single
      capital letter ("J.") and to common titles ("Mr.", "Dr.", "Prof.", "St.", "vs.", ...); otherwise it is split off;
    - English clitics are split like Moses: an apostrophe (`'` or `’`) between a letter/digit and a letter starts a
      new word ("don't" -> "don", "'t"; "John's" -> "John", "'s"; "1990's" -> "1990", "'s"); other apostrophes are
      separate words;
    - "..." and "--" runs are one word each; every other punctuation mark or symbol is a word of its own, with its
      combining marks, emoji modifiers / ZWJ sequences and flags kept whole; combining marks stay with their letter.

    Pre-split words (`is_split_into_words=True`) are used as they are (any string, even empty or with spaces); the
    literal words `<S>` and `</S>` map to the sentence boundary characters as in the original vocabulary.

    `return_offsets_mapping=True` gives per word `(start, end)` character offsets into the raw string (so
    `text[start:end] == word`); for pre-split input the offsets index `" ".join(words)`; padded words get `(0, 0)`.
    `return_special_tokens_mask` is 0 for every word and 1 for padding. `return_length` gives the number of (unpadded)
    words. Sequence pairs and overflowing tokens are not supported.

    The character vocabulary behind `get_vocab()` / `convert_tokens_to_ids()` (used by the generic machinery, e.g.
    `pad_token_id`) has 262 entries: `<pad>` = 0, bytes `<0x00>`..`<0xFF>` = 1..256, `<S>` = 257, `</S>` = 258,
    `<bow>` = 259, `<eow>` = 260, `<char_pad>` = 261. `tokenize()` returns words; `decode()` and
    `convert_ids_to_tokens()` map rows of character ids back to words (invalid UTF-8 is replaced by U+FFFD).

    Args:
        max_characters_per_token (`int`, defaults to 50):
            Character ids per word, begin/end-of-word markers included; longer words are cut (at byte level).
    """

    vocab_files_names: dict[str, str] = {}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, max_characters_per_token: int = 50, pad_token: str = PAD_TOKEN, **kwargs: Any):
        if isinstance(max_characters_per_token, bool) or not isinstance(max_characters_per_token, int):
            raise TypeError(
                f"`max_characters_per_token` must be an int, got {type(max_characters_per_token).__name__}."
            )
        if max_characters_per_token < 3:
            raise ValueError(
                f"`max_characters_per_token` must be >= 3 (begin-of-word, one character, end-of-word), got "
                f"{max_characters_per_token}."
            )
        if str(pad_token) != PAD_TOKEN:
            raise ValueError(
                f"ElmoTokenizer pads with all-zero words; `pad_token` must be {PAD_TOKEN!r}, got {str(pad_token)!r}."
            )
        # Set before super().__init__(), which already calls get_vocab().
        self.max_characters_per_token = max_characters_per_token
        super().__init__(pad_token=pad_token, max_characters_per_token=max_characters_per_token, **kwargs)

    # ---- vocabulary (character level) -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(_CHAR_VOCAB)

    def get_vocab(self) -> dict[str, int]:
        vocab = dict(_CHAR_VOCAB)
        vocab.update(getattr(self, "_added_tokens_encoder", {}))
        return vocab

    def _convert_token_to_id(self, token: str) -> int:
        if token in _CHAR_VOCAB:
            return _CHAR_VOCAB[token]
        raise ValueError(
            f"{token!r} is not a character token of the ELMo vocabulary (e.g. '<0x41>', '<bow>'); map words with "
            "`word_to_char_ids()` or by calling the tokenizer."
        )

    def _convert_id_to_token(self, index: int) -> str:
        if index in _CHAR_ID_TO_TOKEN:
            return _CHAR_ID_TO_TOKEN[index]
        raise ValueError(f"{index} is not a character id of the ELMo vocabulary (0..{len(_CHAR_VOCAB) - 1}).")

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        # The vocabulary is fixed (bytes + markers): nothing to save besides tokenizer_config.json.
        return ()

    # ---- words ------------------------------------------------------------------------------------------------------

    def split_words(self, text: str) -> list[tuple[str, int, int]]:
        """Split raw `text` into `(word, start, end)` tuples, `text[start:end] == word` (rules: class docstring)."""
        if not isinstance(text, str):
            raise TypeError(f"split_words() expects a str, got {type(text).__name__}.")
        return split_words(text)

    def word_to_char_ids(self, word: str) -> list[int]:
        """The `max_characters_per_token` character ids of one word (same as the original vocabulary, +1)."""
        if not isinstance(word, str):
            raise TypeError(f"word_to_char_ids() expects a str, got {type(word).__name__}.")
        return list(_cached_char_ids(word, self.max_characters_per_token))

    def tokenize(self, text: str, **kwargs: Any) -> list[str]:
        """Split raw `text` into words (ELMo's tokens are words)."""
        return [word for word, _, _ in self.split_words(text)]

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        return self.tokenize(text)

    # ---- no special tokens ------------------------------------------------------------------------------------------

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 0

    def build_inputs_with_special_tokens(self, token_ids_0: list, token_ids_1: list | None = None) -> list:
        return list(token_ids_0) + (list(token_ids_1) if token_ids_1 is not None else [])

    def create_token_type_ids_from_sequences(self, token_ids_0: list, token_ids_1: list | None = None) -> list[int]:
        return [0] * (len(token_ids_0) + (len(token_ids_1) if token_ids_1 is not None else 0))

    def get_special_tokens_mask(
        self, token_ids_0: list, token_ids_1: list | None = None, already_has_special_tokens: bool = False
    ) -> list[int]:
        """0 for every word; with `already_has_special_tokens=True`, 1 for padding words (all-zero rows)."""
        ids = list(token_ids_0) + (list(token_ids_1) if token_ids_1 is not None else [])
        if not already_has_special_tokens:
            return [0] * len(ids)
        return [int(not any(row)) if isinstance(row, (list, tuple)) else int(row == 0) for row in ids]

    # ---- encoding ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _pre_split_example(words: Sequence, example_index: int) -> list[tuple[str, int, int]]:
        out, position = [], 0
        for word_index, word in enumerate(words):
            if not isinstance(word, str):
                raise TypeError(
                    f"is_split_into_words=True: word {word_index} of example {example_index} must be a str, got "
                    f"{type(word).__name__} ({word!r})."
                )
            out.append((word, position, position + len(word)))
            position += len(word) + 1
        return out

    def _parse_examples(self, text: Any, is_split_into_words: bool) -> tuple[list[list[tuple[str, int, int]]], bool]:
        """Normalise `text` to a list of examples of `(word, start, end)`; also returns whether it was a batch."""
        if isinstance(text, str):
            return [self.split_words(text)], False
        if not isinstance(text, (list, tuple)):
            raise TypeError(
                "`text` must be a str, a list of str (a batch, or one pre-split example with is_split_into_words=True)"
                f" or a list of lists of str (pre-split batch), got {type(text).__name__}."
            )
        if is_split_into_words:
            if len(text) == 0:
                return [[]], False  # one sentence without words
            if not isinstance(text[0], (list, tuple)):
                return [self._pre_split_example(text, 0)], False
            examples = []
            for index, example in enumerate(text):
                if not isinstance(example, (list, tuple)):
                    raise TypeError(
                        f"is_split_into_words=True with a batch: example {index} must be a list of str, got "
                        f"{type(example).__name__}."
                    )
                examples.append(self._pre_split_example(example, index))
            return examples, True
        if len(text) == 0:
            raise ValueError(
                "`text` is an empty batch ([]): pass at least one example. An empty sentence is '' (or [] with "
                "is_split_into_words=True)."
            )
        for index, example in enumerate(text):
            if isinstance(example, (list, tuple)):
                raise ValueError(
                    f"`text[{index}]` is a list: to encode pre-split words pass is_split_into_words=True "
                    "(raw strings are split into words by the tokenizer)."
                )
            if not isinstance(example, str):
                raise TypeError(f"`text[{index}]` must be a str, got {type(example).__name__}.")
        return [self.split_words(example) for example in text], True

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
        """Encode one example or a batch (called by `__call__` and `encode`); `add_special_tokens` has no effect."""
        if text_pair is not None:
            raise ValueError("ElmoTokenizer does not support sequence pairs (`text_pair`).")
        if return_overflowing_tokens:
            raise ValueError(
                "ElmoTokenizer does not support `return_overflowing_tokens` (one token is one word); use truncation."
            )
        if kwargs:
            logger.warning(f"Keyword arguments {kwargs} not recognized by ElmoTokenizer and ignored.")
        padding_strategy = PaddingStrategy(padding_strategy)
        truncation_strategy = TruncationStrategy(truncation_strategy)
        if truncation_strategy == TruncationStrategy.ONLY_SECOND:
            raise ValueError("truncation='only_second' needs a sequence pair, which ElmoTokenizer does not support.")
        if max_length is not None and (
            not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 0
        ):
            raise ValueError(f"`max_length` must be a number of words >= 0, got {max_length!r}.")

        examples, is_batched = self._parse_examples(text, is_split_into_words)

        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None:
            truncated = 0
            for index, example in enumerate(examples):
                if len(example) > max_length:
                    truncated += 1
                    keep_last = self.truncation_side == "left"
                    examples[index] = example[len(example) - max_length :] if keep_last else example[:max_length]
            if truncated and verbose and not self.deprecation_warnings.get("elmo-words-truncated", False):
                logger.warning(
                    f"ElmoTokenizer: truncation dropped words from {truncated} example(s) longer than max_length="
                    f"{max_length} words (truncation_side={self.truncation_side!r}). This warning is shown once."
                )
                self.deprecation_warnings["elmo-words-truncated"] = True
        else:
            for example in examples:
                self._eventual_warn_about_too_long_sequence(example, max_length, verbose)

        batch: dict[str, list] = {"input_ids": [[self.word_to_char_ids(w) for w, _, _ in ex] for ex in examples]}
        if return_token_type_ids:
            batch["token_type_ids"] = [[0] * len(ex) for ex in examples]
        if return_attention_mask is None or return_attention_mask:
            batch["attention_mask"] = [[1] * len(ex) for ex in examples]
        if return_special_tokens_mask:
            batch["special_tokens_mask"] = [[0] * len(ex) for ex in examples]
        if return_offsets_mapping:
            batch["offset_mapping"] = [[(start, end) for _, start, end in ex] for ex in examples]
        if return_length:
            batch["length"] = [len(ex) for ex in examples]

        return self._padded_encoding(
            batch,
            is_batched,
            return_tensors,
            prepend_batch_axis=not is_batched and return_tensors is not None,
            padding_strategy=padding_strategy,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
        )

    # ---- padding ----------------------------------------------------------------------------------------------------

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
        """Pad one example (`input_ids` `(words, chars)`) or a batch (a dict of lists, or a list of dicts as sent by
        data collators) to the same number of words. Padding words are all-zero rows with attention mask 0.

        Accepts lists, numpy arrays or torch tensors (tensor inputs give tensors of the same kind unless
        `return_tensors` says otherwise). Keys other than `input_ids`, `attention_mask`, `token_type_ids`,
        `special_tokens_mask` and `offset_mapping` (e.g. `labels`) are passed through unpadded. As in Transformers, a
        single example keeps its own shape (no batch axis is added).
        """
        if isinstance(encoded_inputs, (list, tuple)):
            if len(encoded_inputs) == 0:
                raise ValueError("pad() got an empty list of examples.")
            for index, feature in enumerate(encoded_inputs):
                if not isinstance(feature, Mapping):
                    raise TypeError(f"pad(): example {index} must be a dict, got {type(feature).__name__}.")
            keys = list(encoded_inputs[0].keys())
            for index, feature in enumerate(encoded_inputs):
                missing = [key for key in keys if key not in feature]
                if missing:
                    raise ValueError(f"pad(): example {index} lacks the key(s) {missing} that example 0 has.")
            data = {key: [feature[key] for feature in encoded_inputs] for key in keys}
            is_batched: bool | None = True
        elif isinstance(encoded_inputs, Mapping):
            data = dict(encoded_inputs)
            is_batched = None
        else:
            raise TypeError(f"pad() expects a dict or a list of dicts, got {type(encoded_inputs).__name__}.")
        if "input_ids" not in data:
            raise ValueError(f"pad() needs `input_ids`, got the keys {list(data)}.")

        if return_tensors is None:
            probe = data["input_ids"]
            while isinstance(probe, (list, tuple)) and probe:
                probe = probe[0]
            if is_torch_tensor(probe):
                return_tensors = "pt"
            elif is_numpy_array(probe):
                return_tensors = "np"
        data = {key: to_py_obj(value) for key, value in data.items()}
        if is_batched is None:
            is_batched = _is_batch_of_examples(data["input_ids"])

        padding_strategy, _, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, max_length=max_length, verbose=verbose
        )
        if not is_batched:
            data = {key: [value] for key, value in data.items()}
        return self._padded_encoding(
            data,
            is_batched,
            return_tensors,
            prepend_batch_axis=False,
            padding_strategy=padding_strategy,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
        )

    def _padded_encoding(
        self,
        batch: dict[str, list],
        is_batched: bool,
        return_tensors: str | TensorType | None,
        prepend_batch_axis: bool,
        **padding: Any,
    ) -> "ElmoBatchEncoding":
        """Pad `batch` (lists of examples) with `_pad_batch(**padding)`, unwrap a single example, wrap the result."""
        batch = self._pad_batch(batch, **padding)
        if not is_batched:
            batch = {key: value[0] for key, value in batch.items()}
        return ElmoBatchEncoding(
            batch,
            tensor_type=return_tensors,
            prepend_batch_axis=prepend_batch_axis,
            max_characters_per_token=self.max_characters_per_token,
        )

    def _pad_batch(
        self,
        batch: dict[str, list],
        padding_strategy: PaddingStrategy,
        max_length: int | None,
        pad_to_multiple_of: int | None,
        padding_side: str | None,
        return_attention_mask: bool | None,
    ) -> dict[str, list]:
        """Pad every example of a dict of per-example lists with `_pad`."""
        batch_size = len(batch["input_ids"])
        for key, value in batch.items():
            if not isinstance(value, (list, tuple)) or len(value) != batch_size:
                raise ValueError(
                    f"`{key}` must hold one entry per example ({batch_size}), got "
                    f"{len(value) if isinstance(value, (list, tuple)) else type(value).__name__}."
                )
        for index, ids in enumerate(batch["input_ids"]):
            if not isinstance(ids, (list, tuple)) or (len(ids) and not isinstance(ids[0], (list, tuple))):
                raise ValueError(
                    f"`input_ids` of example {index} must be a list of words, each a list of character ids "
                    "(shape (words, characters))."
                )
        if padding_strategy == PaddingStrategy.LONGEST:
            max_length = max((len(ids) for ids in batch["input_ids"]), default=0)
            padding_strategy = PaddingStrategy.MAX_LENGTH
        out: dict[str, list] = {}
        for index in range(batch_size):
            example = self._pad(
                {key: value[index] for key, value in batch.items()},
                max_length=max_length,
                padding_strategy=padding_strategy,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side,
                return_attention_mask=return_attention_mask,
            )
            for key, value in example.items():
                out.setdefault(key, []).append(value)
        return out

    def _pad(
        self,
        encoded_inputs: dict[str, Any],
        max_length: int | None = None,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_attention_mask: bool | None = None,
    ) -> dict[str, Any]:
        """Pad one example `(words, chars)`: all-zero words, mask 0, special-tokens mask 1, offsets `(0, 0)`."""
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        out = dict(encoded_inputs)
        ids = out["input_ids"]
        num_words = len(ids)
        if return_attention_mask and "attention_mask" not in out:
            out["attention_mask"] = [1] * num_words
        elif not return_attention_mask:
            out.pop("attention_mask", None)

        if padding_strategy == PaddingStrategy.LONGEST:
            max_length = num_words
        if max_length is not None and pad_to_multiple_of is not None and max_length % pad_to_multiple_of != 0:
            max_length = (max_length // pad_to_multiple_of + 1) * pad_to_multiple_of
        if padding_strategy == PaddingStrategy.DO_NOT_PAD or max_length is None or max_length <= num_words:
            return out

        side = padding_side if padding_side is not None else self.padding_side
        if side not in ("left", "right"):
            raise ValueError(f"`padding_side` must be 'left' or 'right', got {side!r}.")
        difference = max_length - num_words
        width = len(ids[0]) if num_words else self.max_characters_per_token
        fillers = {
            "input_ids": [[0] * width for _ in range(difference)],
            "attention_mask": [0] * difference,
            "token_type_ids": [self.pad_token_type_id] * difference,
            "special_tokens_mask": [1] * difference,
            "offset_mapping": [(0, 0)] * difference,
        }
        for key, filler in fillers.items():
            if key in out:
                out[key] = list(out[key]) + filler if side == "right" else filler + list(out[key])
        return out

    # ---- decoding ---------------------------------------------------------------------------------------------------

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> str | list[str]:
        """An id or a flat list of ids gives character tokens; rows of character ids `(words, chars)` give words
        (padding words are `"<pad>"`, or dropped with `skip_special_tokens=True`)."""
        ids = to_py_obj(ids)
        if isinstance(ids, (list, tuple)) and ids and isinstance(ids[0], (list, tuple)):
            words = []
            for row in ids:
                if not any(row):
                    if not skip_special_tokens:
                        words.append(self.pad_token)
                    continue
                words.append(self.convert_tokens_to_string(super().convert_ids_to_tokens(list(row))))
            return words
        return super().convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Join character tokens into text: bytes are decoded as UTF-8 (errors replaced), words joined by spaces."""
        words: list[str] = []
        pieces: list[str] = []
        data = bytearray()

        def flush_bytes() -> None:
            if data:
                pieces.append(data.decode("utf-8", errors="replace"))
                data.clear()

        for token in tokens:
            token = str(token)
            index = _CHAR_VOCAB.get(token)
            if token in (BOW_TOKEN, EOW_TOKEN):
                flush_bytes()
                if pieces:
                    words.append("".join(pieces))
                    pieces.clear()
            elif token in (PAD_TOKEN, CHAR_PAD_TOKEN):
                continue
            elif index is not None and 1 <= index <= 256:
                data.append(index - 1)
            else:
                flush_bytes()
                pieces.append(token)
        flush_bytes()
        if pieces:
            words.append("".join(pieces))
        return " ".join(words)

    def _decode(
        self,
        token_ids: Any,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
        **kwargs: Any,
    ) -> str:
        token_ids = to_py_obj(token_ids)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if token_ids and isinstance(token_ids[0], (list, tuple)):  # (words, chars)
            return " ".join(self.convert_ids_to_tokens(token_ids, skip_special_tokens=skip_special_tokens))
        return self.convert_tokens_to_string(
            self.convert_ids_to_tokens(list(token_ids), skip_special_tokens=skip_special_tokens)
        )

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str | list[str]:
        """Decode `(words, chars)` ids to the words joined by spaces (a batch `(batch, words, chars)` gives a list).

        A flat list of character ids (e.g. one word) is decoded as characters. Padding words show as `<pad>` unless
        `skip_special_tokens=True`.
        """
        token_ids = to_py_obj(token_ids)
        if isinstance(token_ids, (list, tuple)) and token_ids and isinstance(token_ids[0], (list, tuple)):
            if _is_batch_of_examples(token_ids):
                return [
                    self._decode(example, skip_special_tokens=skip_special_tokens, **kwargs) for example in token_ids
                ]
        return self._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)


__all__ = ["ElmoBatchEncoding", "ElmoTokenizer"]
