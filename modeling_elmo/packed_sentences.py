"""
The packing of a batch of sentences for the biLM: each row becomes the sequence `<S> words </S>`, and the rows are
laid out as in `torch.nn.utils.rnn.PackedSequence` (time-major, sorted by decreasing length), once in the forward
direction and once reversed, so that the recurrence never computes padding. `pack_sentences` builds the index maps
from a batch's word mask; `PackedBatch` moves layers between the packed and the padded layout. It serves
`modeling_elmo.py` (`ElmoModel`, `ElmoBiLm`, `ElmoForPreTraining`).
"""

from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    """Index maps between padded word positions and the packed biLM sequences (`<S> words </S>` per row)."""

    padded_shape: tuple[int, int]  # (batch, max_words) of the padded layers
    batch_sizes: list[int]
    sort_order: torch.Tensor  # (batch,) original row of each sorted row
    source: torch.Tensor  # (2, num_packed) index into [word embeddings; <S>; </S>] for each direction
    word_to_packed: torch.Tensor  # (2, num_words) packed position of every real word, per direction
    word_positions: torch.Tensor  # (num_words,) flat index into (batch * max_words) of every real word
    token_positions: torch.Tensor  # (2, num_packed) flat index into (batch * (max_words + 2)) of every packed token

    def pad(self, words: torch.Tensor) -> torch.Tensor:
        """`words` (num_words, width), in `word_positions` order -> (batch, max_words, width), zero at padding."""
        batch_size, max_words = self.padded_shape
        width = words.shape[-1]
        padded = words.new_zeros(batch_size * max_words, width).index_copy(0, self.word_positions, words)
        return padded.view(batch_size, max_words, width)

    @property
    def packed_words(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Index of the words' packed rows: `packed[packed_words]` is (2, num_words, dim) in `word_positions` order."""
        return torch.arange(2, device=self.word_to_packed.device).unsqueeze(1), self.word_to_packed

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """
        `packed` (2, num_packed, dim) -> its word rows as a padded layer `[forward; backward]`: (batch, max_words,
        2 * dim).
        """
        return self.pad(packed[self.packed_words].transpose(0, 1).flatten(1))

    def unpack_sequences(self, packed: torch.Tensor) -> torch.Tensor:
        """
        `packed` (2, num_packed, dim) -> every row's whole sequence `<S> words </S>` from position 0, `[forward;
        backward]`: (batch, max_words + 2, 2 * dim), zero after each row's `</S>`.
        """
        batch_size, max_words = self.padded_shape
        directions = torch.arange(2, device=packed.device).unsqueeze(1)
        padded = packed.new_zeros(2, batch_size * (max_words + 2), packed.shape[-1])
        padded = padded.index_put((directions, self.token_positions), packed)
        return padded.view(2, batch_size, max_words + 2, -1).permute(1, 2, 0, 3).flatten(2)

    def pack_sequences(self, layer: torch.Tensor) -> torch.Tensor:
        """The inverse of `unpack_sequences`: `layer` (batch, max_words + 2, 2 * dim) -> (2, num_packed, dim)."""
        tokens = layer.flatten(0, 1).unflatten(-1, (2, -1))  # (batch * (max_words + 2), 2, dim)
        return torch.stack([tokens[self.token_positions[direction], direction] for direction in range(2)])

    def repack(self, layer: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
        """
        `packed` (2, num_packed, dim) with its word rows read back from `layer` (batch, max_words, 2 * dim), the
        `unpack` of `packed`: the same values, but whatever is computed from the result depends on `layer` in the
        autograd graph. The `<S>`/`</S>` rows, which no layer returns, stay those of `packed`.
        """
        words = layer.flatten(0, 1)[self.word_positions].unflatten(-1, (2, -1)).transpose(0, 1)  # (2, words, dim)
        return packed.index_put(self.packed_words, words)


def pack_sentences(attention_mask: torch.Tensor) -> PackedBatch:
    """Build the packing of a batch from its word mask (batch, max_words); any padding side is accepted."""
    batch_size, max_words = attention_mask.shape
    mask = attention_mask.bool()
    num_words = mask.sum(dim=1)
    seq_lengths = num_words + 2
    sorted_lengths, sort_order = seq_lengths.sort(descending=True, stable=True)

    steps = torch.arange(int(sorted_lengths[0]), device=mask.device).unsqueeze(1)
    active = steps < sorted_lengths.unsqueeze(0)  # (time, batch): rows active at each step, a prefix
    time_index = steps.expand_as(active)[active]
    row = sort_order[torch.arange(batch_size, device=mask.device).expand_as(active)[active]]
    lengths = seq_lengths[row]
    positions = torch.stack([time_index, lengths - 1 - time_index])  # sequence position, forward and backward

    first_word = torch.cumsum(num_words, dim=0) - num_words  # index of each row's first word
    total_words = int(num_words.sum())
    source = torch.where(
        positions == 0,
        total_words,
        torch.where(positions == lengths - 1, total_words + 1, first_word[row] + positions - 1),
    )
    is_word = (positions > 0) & (positions < lengths - 1)
    word_to_packed = torch.empty(2, total_words, dtype=torch.long, device=mask.device)
    packed_index = torch.arange(time_index.numel(), device=mask.device)
    for direction in range(2):
        word_to_packed[direction, source[direction, is_word[direction]]] = packed_index[is_word[direction]]
    return PackedBatch(
        padded_shape=(batch_size, max_words),
        batch_sizes=active.sum(dim=1).tolist(),
        sort_order=sort_order,
        source=source,
        word_to_packed=word_to_packed,
        word_positions=mask.flatten().nonzero().squeeze(1),
        token_positions=row * (max_words + 2) + positions,
    )
