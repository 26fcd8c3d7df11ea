"""The biLM's word vocabulary (the softmax classes) in bilm-tf's format, and building one from a corpus.

A vocabulary file holds one token per line, UTF-8; a token's id is its position (a `!!!MAXTERMID` line, which
bilm-tf skips, takes no id). `<S>`, `</S>` and `<UNK>` must be present. Decisions, each tested:
- The three special tokens may stand anywhere, as bilm-tf only requires their presence (the 1B Word Benchmark
  vocabulary starts `</S>`, `<S>`, `<UNK>`); a file where they are not among the first three tokens loads with a
  warning, because the sampled softmax draws its negatives by rank and they are among the most frequent tokens.
- Refused, naming the line: invalid UTF-8, an empty (or whitespace-only) line, a token with whitespace inside (no
  word of a whitespace-tokenized corpus can match it) and a duplicate (naming both lines). Leading and trailing
  whitespace of a line is ignored, as bilm-tf does (`line.strip()`). Lines end at `\\n`, `\\r\\n` or a lone `\\r`
  (bilm-tf's `open(filename)`: Python's universal newlines).
- `build_vocabulary` writes `<S>`, `</S>`, `<UNK>` first, then the corpus words by descending count, ties broken by
  the word (code-point order), so the same corpus always gives the same file.
"""

import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from ..character_ids import BOS_TOKEN, EOS_TOKEN
from ..foundation.errors import ToolInputError
from ..foundation.output_folder import reason_of, write_text_atomically
from .corpus import PathLike, iter_sentences, universal_lines

logger = logging.getLogger(__name__)

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
MAXTERMID = "!!!MAXTERMID"  # a marker line of the lm_1b vocabulary files; bilm-tf skips it


class VocabularyError(ToolInputError, ValueError):
    """A vocabulary that cannot be used: the message names the file (or source) and the line."""


class LmVocabulary:
    """
    The word vocabulary of a biLM's softmax: token <-> id, with the ids of `<S>` (`bos`), `</S>` (`eos`) and `<UNK>`
    (`unk`). Build it with `LmVocabulary.from_file(path)` or from a list of tokens; both check the tokens (see the
    module docstring) and raise `VocabularyError`.

    Args:
        tokens (`Iterable[str]`): The tokens in id order.
        source (`str`): What the tokens came from, for messages.
        line_numbers (`Sequence[int]`, *optional*): The line of each token in `source` (messages say "entry N", the
            1-based position, without them).
    """

    def __init__(self, tokens: Iterable[str], source: str = "vocabulary", line_numbers: Sequence[int] | None = None):
        self.source = source
        self._tokens = tuple(tokens)
        where = (lambda i: f"line {line_numbers[i]}") if line_numbers is not None else (lambda i: f"entry {i + 1}")
        self._ids: dict[str, int] = {}
        for index, token in enumerate(self._tokens):
            if not isinstance(token, str):
                raise VocabularyError(f"{source}: {where(index)} is not a string: {token!r}.")
            if not token.strip():
                raise VocabularyError(f"{source}: {where(index)} is empty; every line must hold one token.")
            if len(token.split()) != 1 or token != token.strip():
                raise VocabularyError(
                    f"{source}: {where(index)} ({token!r}) has whitespace inside; no word of a whitespace-tokenized "
                    "corpus can match it."
                )
            if token == MAXTERMID:
                raise VocabularyError(f"{source}: {where(index)} is {MAXTERMID}, bilm-tf's end marker, not a token.")
            first = self._ids.setdefault(token, index)
            if first != index:
                raise VocabularyError(f"{source}: {token!r} is on {where(first)} and again on {where(index)}.")
        missing = [token for token in SPECIAL_TOKENS if token not in self._ids]
        if missing:
            content = "is empty" if not self._tokens else f"has no {', '.join(missing)}"
            raise VocabularyError(
                f"{source} {content}: a biLM vocabulary must hold the tokens {', '.join(SPECIAL_TOKENS)} (normally "
                "its first three lines)."
            )
        if max(self._ids[token] for token in SPECIAL_TOKENS) > 2:
            logger.warning(
                f"{source}: {', '.join(SPECIAL_TOKENS)} are not the first three tokens; the sampled softmax assumes "
                "the tokens are ordered by descending frequency."
            )

    @classmethod
    def from_file(cls, path: PathLike) -> "LmVocabulary":
        """Read a bilm-tf vocabulary file (see the module docstring)."""
        source = os.fspath(path)
        if os.path.isdir(source):
            raise VocabularyError(f"{source}: is a directory, not a vocabulary file.")
        tokens, line_numbers = [], []
        try:
            with open(source, "rb") as handle:
                for line_number, raw in enumerate(universal_lines(handle), start=1):
                    try:
                        token = raw.decode("utf-8-sig" if line_number == 1 else "utf-8").strip()
                    except UnicodeDecodeError as error:
                        raise VocabularyError(
                            f"{source}: line {line_number} is not valid UTF-8 ({error.reason})."
                        ) from None
                    if token == MAXTERMID:
                        continue
                    tokens.append(token)
                    line_numbers.append(line_number)
        except FileNotFoundError:
            raise VocabularyError(f"{source}: vocabulary file not found.") from None
        except OSError as error:
            raise VocabularyError(
                f"{source}: cannot read the vocabulary file ({reason_of(error, with_file=False)})."
            ) from error
        return cls(tokens, source=source, line_numbers=line_numbers)

    @property
    def tokens(self) -> tuple[str, ...]:
        """All tokens, in id order."""
        return self._tokens

    @property
    def bos(self) -> int:
        """Id of `<S>`."""
        return self._ids[BOS_TOKEN]

    @property
    def eos(self) -> int:
        """Id of `</S>`."""
        return self._ids[EOS_TOKEN]

    @property
    def unk(self) -> int:
        """Id of `<UNK>`, the id of every out-of-vocabulary word."""
        return self._ids[UNK_TOKEN]

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LmVocabulary) and self._tokens == other._tokens

    __hash__ = None

    def __repr__(self) -> str:
        return f"LmVocabulary({len(self)} tokens from {self.source})"

    def token_to_id(self, token: str) -> int:
        """The id of `token`, or `unk`."""
        return self._ids.get(token, self.unk)

    def encode(self, words: Sequence[str]) -> list[int]:
        """The ids of `words` (out-of-vocabulary words -> `unk`). No `<S>`/`</S>` are added."""
        ids, unk = self._ids, self.unk
        return [ids.get(word, unk) for word in words]

    def check_size(self, n_tokens_vocab: int, source: str = "options") -> None:
        """Refuse an `n_tokens_vocab` option (read from `source`) that disagrees with this vocabulary's size."""
        if n_tokens_vocab != len(self):
            raise VocabularyError(
                f"{source}: n_tokens_vocab is {n_tokens_vocab}, but the vocabulary {self.source} has {len(self)} "
                f"tokens; set n_tokens_vocab to {len(self)} (or use the vocabulary the options were written for)."
            )

    def save(self, path: PathLike) -> Path:
        """Write the vocabulary file (one token per line, UTF-8), atomically: a hidden temporary file beside `path`
        is renamed into place once complete, so `path` is never half-written. Returns `path`."""
        path = Path(path)
        write_text_atomically(path, "".join(f"{token}\n" for token in self._tokens), OSError)
        return path


def count_words(files: Sequence[PathLike], progress: bool = True) -> Counter:
    """How often each word occurs in `files` (all of them, streaming, with a progress bar over the bytes read). The
    strings `<S>`, `</S>` and `<UNK>` are never counted: they are the vocabulary's own tokens; nor is `!!!MAXTERMID`,
    which a vocabulary file cannot hold (bilm-tf skips that line)."""
    counts: Counter = Counter()
    total_bytes = sum(os.path.getsize(path) for path in files if os.path.isfile(path))
    with tqdm(total=total_bytes, unit="B", unit_scale=True, desc="Counting words", disable=not progress) as bar:
        for words in iter_sentences(files, progress=bar):
            counts.update(words)
    for token in (*SPECIAL_TOKENS, MAXTERMID):
        counts.pop(token, None)
    return counts


def _check_limits(min_count: int | None, max_size: int | None) -> None:
    if min_count is not None and not (type(min_count) is int and min_count >= 1):
        raise VocabularyError(f"min_count must be a positive integer, got {min_count!r}")
    if max_size is not None and not (type(max_size) is int and max_size >= len(SPECIAL_TOKENS)):
        raise VocabularyError(
            f"max_size must be an integer >= {len(SPECIAL_TOKENS)} (it counts {', '.join(SPECIAL_TOKENS)}), "
            f"got {max_size!r}"
        )


def vocabulary_from_counts(counts: Counter, min_count: int | None = None, max_size: int | None = None) -> list[str]:
    """
    The tokens of a vocabulary: `<S>`, `</S>`, `<UNK>`, then the counted words by descending count, ties broken by
    the word. `min_count` keeps only words seen at least that often; `max_size` caps the whole vocabulary (the three
    special tokens included) at that many tokens.
    """
    _check_limits(min_count, max_size)
    items = [(word, count) for word, count in counts.items() if word not in SPECIAL_TOKENS]
    if min_count is not None:
        items = [(word, count) for word, count in items if count >= min_count]
    items.sort(key=lambda item: (-item[1], item[0]))
    words = [word for word, _ in items]
    if max_size is not None:
        words = words[: max_size - len(SPECIAL_TOKENS)]
    return [*SPECIAL_TOKENS, *words]


def build_vocabulary(
    files: Sequence[PathLike], min_count: int | None = None, max_size: int | None = None, progress: bool = True
) -> list[str]:
    """Count the words of `files` (streaming) and return the vocabulary's tokens (see `vocabulary_from_counts`)."""
    _check_limits(min_count, max_size)
    return vocabulary_from_counts(count_words(files, progress=progress), min_count=min_count, max_size=max_size)
