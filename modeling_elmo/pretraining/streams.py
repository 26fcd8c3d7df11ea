"""Truncated-backpropagation-through-time batches over continuous streams of sentences, as bilm-tf's `_get_batch`.

Each of the `batch_size` rows of a batch is a stream of consecutive sentences cut into windows of `unroll_steps`
positions: row `i` of batch `k + 1` continues row `i` of batch `k`, so the model carries its LSTM states from one batch
to the next. A sentence `w1 .. wn` is `<S> w1 .. wn </S>`: it fills `n + 1` positions of its row, inputs `<S> w1 .. wn`
with targets `w1 .. wn </S>` (forward) and inputs `</S> wn .. w1` with targets `wn .. w1 <S>` (backward), continuing
into the row's next window when it does not fit. Rows take the next sentence of the (shared) sentence stream when their
current one runs out, filling row 0's window, then row 1's, ... as bilm-tf does. The last, incomplete batch is not
produced (as bilm-tf).

Deliberate differences from bilm-tf: both directions of a row hold the same sentences at the same positions (bilm-tf
reads the backward stream from a second, independently shuffled copy of the corpus); sentences are read streaming in
file order (bilm-tf loads a whole shard and shuffles its sentences: shuffle the corpus beforehand, as the 1B Word
Benchmark is); the shards of each pass are read in an order shuffled with `random.Random(seed + pass)`, so a stream is
reproducible and a resumed run re-reads the same stream.
"""

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ..character_ids import BOS_TOKEN, EOS_TOKEN, word_to_char_ids
from ..configuration_elmo import MAX_CHARACTERS_PER_TOKEN
from ..formats.corpus import PathLike, iter_sentences, rank_files
from ..formats.vocab import LmVocabulary

DEFAULT_CHAR_CACHE_SIZE = 1 << 17  # words whose character ids are kept (`max_characters_per_token` ids each)


class _CharIdCache:
    """Character ids of words, `(max_characters_per_token,)` int16 rows of a fixed table: bounded memory (the table
    is reused from the start once full), one dictionary lookup per known word."""

    def __init__(self, max_characters_per_token: int, capacity: int):
        self.max_characters_per_token = max_characters_per_token
        self.table = np.zeros((capacity, max_characters_per_token), dtype=np.int16)
        self.slots: dict[str, int] = {}

    def char_ids(self, words: list[str]) -> np.ndarray:
        """`(len(words), max_characters_per_token)` int16 character ids, a new array."""
        slots, table = self.slots, self.table
        if len(words) > len(table):  # a sentence longer than the cache: in pieces
            pieces = range(0, len(words), len(table))
            return np.concatenate([self.char_ids(words[start : start + len(table)]) for start in pieces])
        if len(slots) + len(words) > len(table):
            slots.clear()
        indices = []
        for word in words:
            slot = slots.get(word)
            if slot is None:
                slot = slots[word] = len(slots)
                table[slot] = word_to_char_ids(word, self.max_characters_per_token)
            indices.append(slot)
        return table[indices]


class LmStreamDataset(IterableDataset):
    """
    The training batches of a biLM: an endless (or `num_passes`-long) stream of batches, each a dict of `torch.long`
    tensors
    - `input_ids` `(batch_size, unroll_steps, max_characters_per_token)`: character ids of the forward inputs
      (`modeling_elmo.character_ids.word_to_char_ids`, always the real word's characters, OOV or not),
    - `labels` `(batch_size, unroll_steps)`: vocabulary ids of the forward targets (OOV -> `<UNK>`),
    - `backward_input_ids`, `backward_labels`: the same for the backward stream, same sentences at the same positions.
    See the module docstring for the stream semantics. Read it in the main process only (DataLoader `num_workers=0`):
    the stream's state lives in the one iterator.

    Args:
        files (`Sequence[PathLike]`): The corpus shards (see `corpus.resolve_corpus_files`).
        vocab (`LmVocabulary`): The softmax vocabulary.
        batch_size (`int`), unroll_steps (`int`): Rows per batch and positions per window.
        max_characters_per_token (`int`): Character ids per word.
        rank (`int`), world_size (`int`): This process's share of the corpus (see `corpus.iter_sentences`).
        seed (`int`): Pass `p` reads the share's shards in the order `random.Random(seed + p)` shuffles them to.
        num_passes (`int`, *optional*): Stop after the last complete batch of this many passes over the corpus;
            `None` streams forever.
        char_cache_size (`int`): Words whose character ids are cached.
    """

    def __init__(
        self,
        files: Sequence[PathLike],
        vocab: LmVocabulary,
        batch_size: int,
        unroll_steps: int,
        max_characters_per_token: int,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        num_passes: int | None = None,
        char_cache_size: int = DEFAULT_CHAR_CACHE_SIZE,
    ):
        for name, value in (("batch_size", batch_size), ("unroll_steps", unroll_steps)):
            if not (type(value) is int and value >= 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (type(max_characters_per_token) is int and 3 <= max_characters_per_token <= MAX_CHARACTERS_PER_TOKEN):
            raise ValueError(
                f"max_characters_per_token must be an integer from 3 to {MAX_CHARACTERS_PER_TOKEN}, "
                f"got {max_characters_per_token!r}"
            )
        if num_passes is not None and not (type(num_passes) is int and num_passes >= 1):
            raise ValueError(f"num_passes must be a positive integer or None, got {num_passes!r}")
        if type(seed) is not int:
            raise ValueError(f"seed must be an integer, got {seed!r}")
        if not isinstance(vocab, LmVocabulary):
            raise TypeError(f"vocab must be an LmVocabulary, got {type(vocab).__name__}")
        rank_files(files, rank, world_size)  # checks rank, world_size and that there are files
        self.files = list(files)
        self.vocab = vocab
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self.max_characters_per_token = max_characters_per_token
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.num_passes = num_passes
        self.char_cache_size = max(char_cache_size, 1)

    def sentences(self) -> Iterator[list[str]]:
        """The sentence stream of this rank: pass after pass over its share of the corpus."""
        current_pass = 0
        while self.num_passes is None or current_pass < self.num_passes:
            yield from iter_sentences(self.files, self.rank, self.world_size, shuffle_seed=self.seed + current_pass)
            current_pass += 1

    def _encoded(self, cache: _CharIdCache) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Each sentence as `(ids, char_ids)` of `<S> w1 .. wn </S>`: `(n + 2,)` int64 vocabulary ids and
        `(n + 2, max_characters_per_token)` int16 character ids."""
        vocab = self.vocab
        bos, eos = vocab.bos, vocab.eos
        for words in self.sentences():
            ids = np.array([bos, *vocab.encode(words), eos], dtype=np.int64)
            yield ids, cache.char_ids([BOS_TOKEN, *words, EOS_TOKEN])

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        if get_worker_info() is not None:
            raise RuntimeError(
                "LmStreamDataset must be read in the main process (DataLoader num_workers=0): each row's stream "
                "continues from batch to batch, and a worker process would hold a separate copy of that state."
            )
        rows, steps, chars = self.batch_size, self.unroll_steps, self.max_characters_per_token
        cache = _CharIdCache(chars, self.char_cache_size)
        sentences = self._encoded(cache)
        # each row's current sentence: ids, char ids, both reversed (the backward stream) and the next position
        current: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None] = [None] * rows
        while True:
            input_ids = np.empty((rows, steps, chars), dtype=np.int64)
            labels = np.empty((rows, steps), dtype=np.int64)
            backward_input_ids = np.empty((rows, steps, chars), dtype=np.int64)
            backward_labels = np.empty((rows, steps), dtype=np.int64)
            for row in range(rows):
                filled = 0
                while filled < steps:
                    if current[row] is None:
                        sentence = next(sentences, None)
                        if sentence is None:
                            return  # the corpus is exhausted: drop the incomplete batch, as bilm-tf
                        ids, char_ids = sentence
                        current[row] = (ids, char_ids, ids[::-1], char_ids[::-1], 0)
                    ids, char_ids, reversed_ids, reversed_char_ids, start = current[row]
                    positions = len(ids) - 1  # inputs <S> w1 .. wn; targets one position later
                    count = min(positions - start, steps - filled)
                    stop, end = start + count, filled + count
                    input_ids[row, filled:end] = char_ids[start:stop]
                    labels[row, filled:end] = ids[start + 1 : stop + 1]
                    backward_input_ids[row, filled:end] = reversed_char_ids[start:stop]
                    backward_labels[row, filled:end] = reversed_ids[start + 1 : stop + 1]
                    current[row] = (ids, char_ids, reversed_ids, reversed_char_ids, stop) if stop < positions else None
                    filled = end
            yield {
                "input_ids": torch.from_numpy(input_ids),
                "labels": torch.from_numpy(labels),
                "backward_input_ids": torch.from_numpy(backward_input_ids),
                "backward_labels": torch.from_numpy(backward_labels),
            }
