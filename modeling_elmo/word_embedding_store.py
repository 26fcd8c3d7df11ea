"""Context-independent word embeddings kept between batches, keyed by a word's character ids.

It serves the inference of `ElmoCharacterEncoder.embed_words`, which looks words up here before running the character
CNN on the others (`stored_or_computed`). `WordEmbeddingStore` holds a fixed precomputed token-embedding table
(`capacity=None`, never evicts); `WordEmbeddingCache` is a bounded LRU store of character-CNN outputs that empties
itself whenever the weights they were computed with change. A cache is changed by every call that reads it, so a
call holds it for its whole look-up, computation and update (`WordEmbeddingCache.in_use`): calls from several Python
threads take turns, and each gets what it would get one after the other (a computed row depends in its last bits on
the words computed alongside it, so a call that filled the cache halfway through another's would change the other's
results).
"""

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

import torch

from .weight_snapshot import WeightSnapshot


def word_keys(char_ids: torch.Tensor) -> list[bytes]:
    """One hashable key per word: the bytes of its character ids. `char_ids`: (num_words, max_characters_per_token)."""
    rows = char_ids.detach().to(device="cpu", dtype=torch.int64).contiguous().numpy()
    return [row.tobytes() for row in rows]


class WordEmbeddingStore:
    """Rows of token embeddings (each `(dim,)`) by word key; least recently used rows go first beyond `capacity`."""

    def __init__(self, capacity: int | None = None):
        if capacity is not None and (not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1):
            raise ValueError(f"capacity must be a positive number of words or None, got {capacity}.")
        self.capacity = capacity
        self._slots: OrderedDict[bytes, int] = OrderedDict()  # key -> row of `_values`, oldest use first
        self._values: torch.Tensor | None = None  # (rows, dim)

    def __len__(self) -> int:
        return len(self._slots)

    def clear(self) -> None:
        self._slots.clear()
        self._values = None

    def lookup(self, keys: list[bytes]) -> tuple[list[int], torch.Tensor | None]:
        """Positions in `keys` that are stored, and their embeddings (num_found, dim) (None when none is)."""
        found, slots = [], []
        for position, key in enumerate(keys):
            slot = self._slots.get(key)
            if slot is not None:
                found.append(position)
                slots.append(slot)
                if self.capacity is not None:
                    self._slots.move_to_end(key)
        if not found:
            return found, None
        return found, self._values[torch.tensor(slots, device=self._values.device)]

    def add(self, keys: list[bytes], embeddings: torch.Tensor) -> None:
        """Store `embeddings` (len(keys), dim) under distinct `keys`; a cache keeps only its last `capacity` rows."""
        embeddings = embeddings.detach()
        if self.capacity is not None:
            keys, embeddings = keys[-self.capacity :], embeddings[-self.capacity :]
        if self._values is None:
            self._values = embeddings.new_empty(self.capacity or 0, embeddings.shape[-1])
        slots = []
        for key in keys:
            slot = self._slots.pop(key, None)
            if slot is None:
                slot = self._free_slot()
            self._slots[key] = slot
            slots.append(slot)
        if len(self._slots) > self._values.shape[0]:  # a table grows
            extra = self._values.new_empty(len(self._slots) - self._values.shape[0], self._values.shape[1])
            self._values = torch.cat([self._values, extra])
        self._values.index_copy_(0, torch.tensor(slots, device=self._values.device), embeddings.to(self._values))

    def _free_slot(self) -> int:
        """The row for a new key: the next unused one, or the least recently used one's when the cache is full."""
        if self.capacity is not None and len(self._slots) >= self.capacity:
            return self._slots.popitem(last=False)[1]
        return len(self._slots)


class WordEmbeddingCache(WordEmbeddingStore):
    """
    A bounded LRU `WordEmbeddingStore` of rows computed from some weights, emptied (by `forget_if_changed`) whenever
    those weights no longer hold the values the rows were computed with, however they were changed (fused optimizer
    steps, writes through `.data`, `load_state_dict`, `.to()`): the weights are compared with a copy of them
    (`weight_snapshot`).
    """

    def __init__(self, capacity: int):
        super().__init__(capacity)
        self._weights: WeightSnapshot | None = None  # the weights the stored rows were computed with
        self._lock = threading.Lock()  # held by the call using the cache (`in_use`)

    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}  # a lock does not copy

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    @contextlib.contextmanager
    def in_use(self, weights: list[torch.Tensor]) -> Iterator["WordEmbeddingCache"]:
        """Hold the cache for one call (other Python threads wait), emptied first if `weights` changed
        (`forget_if_changed`)."""
        with self._lock:
            self.forget_if_changed(weights)
            yield self

    def forget_if_changed(self, weights: list[torch.Tensor]) -> None:
        """Empty the cache unless `weights` hold the values of those its rows were computed with (reads them all)."""
        if self._weights is None or not self._weights.matches(weights):
            self.clear()
            self._weights = WeightSnapshot(weights)


def stored_or_computed(
    char_ids: torch.Tensor,
    compute: Callable[[torch.Tensor], torch.Tensor],
    like: torch.Tensor,
    table: WordEmbeddingStore | None,
    cache: WordEmbeddingCache | None,
) -> torch.Tensor:
    """
    The embeddings of the distinct words `char_ids` (num_words, width): rows found in `table`, then in `cache`, and
    `compute(char_ids[missing])` (missing_words, dim) for the others, which `cache` then keeps. Returns (num_words,
    dim) of the dtype and device of `like` (dim,), a row like the results.
    """
    stores = [store for store in (table, cache) if store is not None]
    if not stores:
        return compute(char_ids)
    keys = word_keys(char_ids)
    found_rows: list[tuple[torch.Tensor, torch.Tensor]] = []  # (positions in `char_ids`, their rows)
    missing = list(range(char_ids.shape[0]))
    for store in stores:
        found, rows = store.lookup([keys[index] for index in missing])
        if rows is not None:
            found_rows.append((torch.tensor([missing[index] for index in found], device=like.device), rows))
            found_set = set(found)
            missing = [index for position, index in enumerate(missing) if position not in found_set]
    if missing:
        positions = torch.tensor(missing, device=char_ids.device)
        computed = compute(char_ids[positions])
        found_rows.append((positions, computed))
        if cache is not None:
            cache.add([keys[index] for index in missing], computed)
    embeddings = like.new_empty(char_ids.shape[0], like.shape[-1])
    for positions, rows in found_rows:
        embeddings[positions] = rows.to(embeddings)
    return embeddings
