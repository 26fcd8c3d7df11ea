"""Context-independent word embeddings kept between batches, keyed by a word's character ids.

One class serves two uses: a bounded LRU cache of char-CNN outputs (`capacity` set) and a fixed precomputed
token-embedding table (`capacity=None`, never evicts). Only inference uses them (see
`ElmoCharacterEncoder.embed_words`).
"""

from collections import OrderedDict

import torch


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
