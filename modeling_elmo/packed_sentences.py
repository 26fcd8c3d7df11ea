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


def _batch_sizes(sorted_lengths: list[int]) -> list[int]:
    """Rows active at each time step of sequences of `sorted_lengths` (non-increasing): `batch_sizes[t]` counts the
    lengths above `t`."""
    sizes = [0] * sorted_lengths[0]
    for length in sorted_lengths:
        sizes[length - 1] += 1  # a row of length L is active at steps 0..L-1
    for step in range(len(sizes) - 2, -1, -1):
        sizes[step] += sizes[step + 1]
    return sizes


def pack_sentences(attention_mask: torch.Tensor) -> PackedBatch:
    """
    Build the packing of a batch from its word mask (batch, max_words); any padding side is accepted. The index maps
    are computed on the mask's device from sizes known in advance: one value is read from it, the sorted lengths
    (what `batch_sizes` is made of), and no call waits on data-dependent sizes (no `nonzero`, no boolean indexing).
    """
    batch_size, max_words = attention_mask.shape
    device = attention_mask.device
    mask = attention_mask.bool()
    num_words = mask.sum(dim=1)
    seq_lengths = num_words + 2
    sorted_lengths, sort_order = seq_lengths.sort(descending=True, stable=True)
    batch_sizes = _batch_sizes(sorted_lengths.tolist())  # the one read from the device
    num_packed, total_words = sum(batch_sizes), sum(batch_sizes) - 2 * batch_size
    steps = torch.arange(len(batch_sizes), device=device)
    step_sizes = (steps.unsqueeze(1) < sorted_lengths).sum(dim=1)  # `batch_sizes` on the device, (time,)
    offsets = torch.cumsum(step_sizes, dim=0) - step_sizes  # (time,) first packed row of each step

    # packed row p holds step `time_index` of sorted row `p - offsets[time_index]` (a step's rows: a prefix)
    packed_index = torch.arange(num_packed, device=device)
    time_index = torch.searchsorted(offsets, packed_index, right=True) - 1
    row = sort_order[packed_index - offsets[time_index]]
    lengths = seq_lengths[row]
    positions = torch.stack([time_index, lengths - 1 - time_index])  # sequence position, forward and backward

    first_word = torch.cumsum(num_words, dim=0) - num_words  # index of each row's first word
    source = torch.where(
        positions == 0,
        total_words,
        torch.where(positions == lengths - 1, total_words + 1, first_word[row] + positions - 1),
    )
    # the words in row-major order (what `nonzero` would give, without reading its size): a stable sort puts them first
    word_positions = torch.argsort((~mask).flatten().to(torch.uint8), stable=True)[:total_words]
    word_row = word_positions // max_words
    word_rank = mask.cumsum(dim=1).flatten()[word_positions]  # 1-based sequence position of each word in its row
    sorted_row = sort_order.argsort()  # the rank of each batch row among the sorted rows
    # a word at sequence position p of a row of length L: forward step p, backward step L - 1 - p
    word_steps = torch.stack([word_rank, num_words[word_row] + 1 - word_rank])
    word_to_packed = offsets[word_steps] + sorted_row[word_row]
    return PackedBatch(
        padded_shape=(batch_size, max_words),
        batch_sizes=batch_sizes,
        sort_order=sort_order,
        source=source,
        word_to_packed=word_to_packed,
        word_positions=word_positions,
        token_positions=row * (max_words + 2) + positions,
    )
