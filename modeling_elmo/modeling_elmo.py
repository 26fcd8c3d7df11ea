"""PyTorch ELMo model: character CNN, bidirectional LSTM language model with projection, scalar mixes."""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput
from transformers.utils.generic import can_return_tuple

from .character_ids import BOS_TOKEN, EOS_TOKEN, word_to_char_ids
from .configuration_elmo import ElmoConfig

LstmState = tuple[torch.Tensor, torch.Tensor]


@dataclass
class ElmoModelOutput(ModelOutput):
    r"""
    Outputs of [`ElmoModel`].

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, num_words, 2 * projection_dim)`):
            Top biLM layer, `[forward; backward]`, zero at padded positions.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*, returned when `output_hidden_states=True`):
            `num_hidden_layers + 1` tensors of shape `(batch_size, num_words, 2 * projection_dim)`: the character-CNN
            token embedding duplicated (`[x; x]`), then `[forward; backward]` of every LSTM layer.
        elmo_representations (`tuple(torch.FloatTensor)`, *optional*, returned when `num_output_representations > 0`):
            `num_output_representations` learned scalar mixes of all layers, each `(batch_size, num_words,
            2 * projection_dim)`.
    """

    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    elmo_representations: tuple[torch.FloatTensor, ...] | None = None


class ElmoHighway(nn.Module):
    """One highway layer as in the original: `g * relu(x W_t + b_t) + (1 - g) * x`, `g = sigmoid(x W_c + b_c)`."""

    def __init__(self, size: int):
        super().__init__()
        self.carry = nn.Linear(size, size)
        self.transform = nn.Linear(size, size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """`hidden`: (num_words, size) -> (num_words, size)."""
        gate = torch.sigmoid(self.carry(hidden))
        return gate * torch.relu(self.transform(hidden)) + (1 - gate) * hidden


class ElmoCharacterEncoder(nn.Module):
    """Context-independent word embeddings from characters: char embedding, CNN + max-pool, highways, projection."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.char_embeddings = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, num_filters, kernel_size=width)
            for width, num_filters in config.char_filters
        )
        self.activation = torch.relu if config.char_activation == "relu" else torch.tanh
        self.highways = nn.ModuleList(ElmoHighway(config.num_char_filters) for _ in range(config.num_highway_layers))
        self.projection = nn.Linear(config.num_char_filters, config.projection_dim)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """`char_ids`: (num_words, max_characters_per_token) -> (num_words, projection_dim)."""
        chars = self.char_embeddings(char_ids).transpose(1, 2)  # (num_words, char_dim, max_chars)
        pooled = [conv(chars).max(dim=-1).values for conv in self.convolutions]
        hidden = self.activation(torch.cat(pooled, dim=-1))
        for highway in self.highways:
            hidden = highway(hidden)
        return self.projection(hidden)


class ElmoLstmLayer(nn.Module):
    r"""
    One biLM layer: a forward and a backward LSTM cell with projection (TensorFlow `LSTMCell(num_proj=...)`), stored
    stacked so that both directions run in the same batched matrix products. Index 0 of every parameter is the
    forward direction, index 1 the backward one. Gate order is TensorFlow's `(i, j, f, o)`; `bias` already includes
    TensorFlow's `forget_bias = 1.0`.

    Both implementations work on *packed* sequences (time-major, rows sorted by decreasing length, as in
    `torch.nn.utils.rnn.PackedSequence`): step `t` owns rows `offsets[t] : offsets[t] + batch_sizes[t]`, so padding
    is never computed.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        input_size, cell_size, proj_size = config.projection_dim, config.lstm_cell_size, config.projection_dim
        self.weight_ih = nn.Parameter(torch.empty(2, input_size, 4 * cell_size))
        self.weight_hh = nn.Parameter(torch.empty(2, proj_size, 4 * cell_size))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell_size))
        self.weight_proj = nn.Parameter(torch.empty(2, cell_size, proj_size))
        self.cell_clip = config.cell_clip
        self.proj_clip = config.proj_clip

    def _cell(self, gates: torch.Tensor, cell: torch.Tensor) -> LstmState:
        """`gates` (2, n, 4 * cell_size), `cell` (2, n, cell_size) -> new (hidden (2, n, proj), cell)."""
        input_gate, new_input, forget_gate, output_gate = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(forget_gate) * cell + torch.sigmoid(input_gate) * torch.tanh(new_input)
        if self.cell_clip:
            cell = cell.clamp(-self.cell_clip, self.cell_clip)
        hidden = torch.bmm(torch.sigmoid(output_gate) * torch.tanh(cell), self.weight_proj)
        if self.proj_clip:
            hidden = hidden.clamp(-self.proj_clip, self.proj_clip)
        return hidden, cell

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        """
        Fast path: the input-to-gate products of all time steps in one GEMM, both directions per step in one `bmm`.

        Args:
            inputs: (2, num_packed, input_size) packed inputs of both directions (backward already reversed).
            batch_sizes: active rows per time step (non-increasing).
            initial_state: hidden (2, batch, proj_size) and cell (2, batch, cell_size), sorted rows.

        Returns:
            outputs (2, num_packed, proj_size) and the final state (sorted rows), each row's state after its last
            step.
        """
        input_gates = torch.baddbmm(self.bias.unsqueeze(1), inputs, self.weight_ih)
        return self._recur(input_gates, None, batch_sizes, initial_state)

    def forward_reference(
        self, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        """Straightforward path for checks: per step and per direction, `[x_t; h] @ W + b` as in TensorFlow."""
        weight = torch.cat([self.weight_ih, self.weight_hh], dim=1)
        return self._recur(None, (inputs, weight), batch_sizes, initial_state)

    def _recur(
        self,
        input_gates: torch.Tensor | None,
        reference: tuple[torch.Tensor, torch.Tensor] | None,
        batch_sizes: list[int],
        initial_state: LstmState,
    ) -> tuple[torch.Tensor, LstmState]:
        hidden, cell = initial_state
        outputs, final_hidden, final_cell = [], [], []
        offset = 0
        for size in batch_sizes:
            if size < hidden.shape[1]:  # rows `size:` ended at the previous step: their state is final
                final_hidden.append(hidden[:, size:])
                final_cell.append(cell[:, size:])
                hidden, cell = hidden[:, :size], cell[:, :size]
            if reference is None:
                gates = torch.baddbmm(input_gates[:, offset : offset + size], hidden, self.weight_hh)
            else:
                inputs, weight = reference
                gates = torch.stack(
                    [
                        torch.cat([inputs[d, offset : offset + size], hidden[d]], dim=-1) @ weight[d] + self.bias[d]
                        for d in range(2)
                    ]
                )
            hidden, cell = self._cell(gates, cell)
            outputs.append(hidden)
            offset += size
        final_hidden.append(hidden)
        final_cell.append(cell)
        final_state = (torch.cat(final_hidden[::-1], dim=1), torch.cat(final_cell[::-1], dim=1))
        return torch.cat(outputs, dim=1), final_state


@dataclass
class _PackedBatch:
    """Index maps between padded word positions and the packed biLM sequences (`<S> words </S>` per row)."""

    batch_sizes: list[int]
    sort_order: torch.Tensor  # (batch,) original row of each sorted row
    source: torch.Tensor  # (2, num_packed) index into [word embeddings; <S>; </S>] for each direction
    word_to_packed: torch.Tensor  # (2, num_words) packed position of every real word, per direction
    word_positions: torch.Tensor  # (num_words,) flat index into (batch * max_words) of every real word


def _pack_sentences(attention_mask: torch.Tensor) -> _PackedBatch:
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
    return _PackedBatch(
        batch_sizes=active.sum(dim=1).tolist(),
        sort_order=sort_order,
        source=source,
        word_to_packed=word_to_packed,
        word_positions=mask.flatten().nonzero().squeeze(1),
    )


class ElmoBiLm(nn.Module):
    """The stack of biLM layers over packed `<S> words </S>` sequences, with optional skip connections."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.layers = nn.ModuleList(ElmoLstmLayer(config) for _ in range(config.num_hidden_layers))
        self.use_skip_connections = config.use_skip_connections
        self.use_reference_implementation = False

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], initial_states: list[LstmState]
    ) -> tuple[list[torch.Tensor], list[LstmState]]:
        """
        Args:
            inputs: (2, num_packed, projection_dim) token embeddings, forward and reversed order.
            batch_sizes: active rows per time step.
            initial_states: per layer, hidden (2, batch, proj) and cell (2, batch, cell_size), sorted rows.

        Returns:
            per layer the packed outputs (2, num_packed, projection_dim), and per layer the final state.
        """
        outputs, final_states = [], []
        for index, layer in enumerate(self.layers):
            run = layer.forward_reference if self.use_reference_implementation else layer
            layer_output, final_state = run(inputs, batch_sizes, initial_states[index])
            if self.use_skip_connections and index > 0:
                layer_output = layer_output + inputs
            outputs.append(layer_output)
            final_states.append(final_state)
            inputs = layer_output
        return outputs, final_states


class ElmoScalarMix(nn.Module):
    """`gamma * sum_k softmax(s)_k * h_k`, optionally layer-normalising each `h_k` over unpadded positions."""

    def __init__(self, num_layers: int, layer_norm: bool = False):
        super().__init__()
        self.scalar_parameters = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(1))
        self.layer_norm = layer_norm

    @staticmethod
    def _masked_layer_norm(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Normalise `hidden` (batch, words, dim) with one mean/variance over all unpadded elements."""
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        count = (mask.sum() * hidden.shape[-1]).clamp(min=1)
        mean = (hidden * mask).sum() / count
        variance = (((hidden - mean) * mask) ** 2).sum() / count
        return (hidden - mean) / torch.sqrt(variance + 1e-12)

    def forward(self, layers: tuple[torch.Tensor, ...], mask: torch.Tensor) -> torch.Tensor:
        """`layers`: num_layers tensors (batch, words, dim); `mask` (batch, words) -> (batch, words, dim)."""
        weights = torch.softmax(self.scalar_parameters, dim=0)
        if self.layer_norm:
            layers = tuple(self._masked_layer_norm(layer, mask) for layer in layers)
        mixed = sum(weight * layer for weight, layer in zip(weights, layers, strict=True))
        return self.gamma * mixed * mask.unsqueeze(-1).to(mixed.dtype)


class ElmoPreTrainedModel(PreTrainedModel):
    config: ElmoConfig
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    _no_split_modules = ["ElmoLstmLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, ElmoHighway):
            init.constant_(module.carry.bias, -2.0)  # start close to the identity, as the original does
        elif isinstance(module, ElmoLstmLayer):
            for weight in (module.weight_ih, module.weight_hh, module.weight_proj):
                bound = weight.shape[1] ** -0.5
                init.uniform_(weight, -bound, bound)
            forget_bias = torch.zeros_like(module.bias).unflatten(-1, (4, -1))
            forget_bias[:, 2] = 1.0  # TensorFlow's forget_bias, folded into the bias (gate order i, j, f, o)
            init.copy_(module.bias, forget_bias.flatten(-2))
        elif isinstance(module, ElmoScalarMix):
            init.zeros_(module.scalar_parameters)
            init.ones_(module.gamma)


class ElmoModel(ElmoPreTrainedModel):
    r"""
    The ELMo biLM. Takes character ids `(batch_size, num_words, max_characters_per_token)` from [`ElmoTokenizer`]
    and returns every layer's contextual word vectors, without the sentence boundary tokens that it adds inside.

    Stateless by default: every call starts from zero LSTM states, so a sentence's vectors do not depend on the rest
    of the batch. With `config.stateful=True` the final LSTM states of each batch row are carried into the same row
    of the next call, like the original TensorFlow biLM; `reset_states()` clears them. When the batch size changes
    in stateful mode, row `i` still continues from the stored row `i`; rows beyond the stored ones start from zero,
    and stored rows beyond the current batch are kept untouched for later calls.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilm = ElmoBiLm(config)
        self.scalar_mixes = nn.ModuleList(
            ElmoScalarMix(config.num_hidden_layers + 1, config.scalar_mix_layer_norm)
            for _ in range(config.num_output_representations)
        )
        self._lstm_states: list[LstmState] | None = None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.char_encoder.char_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.char_encoder.char_embeddings = value

    def reset_states(self) -> None:
        """Forget the LSTM states carried between calls in stateful mode."""
        self._lstm_states = None

    def boundary_char_ids(self, device: torch.device) -> torch.Tensor:
        """Character ids of `<S>` and `</S>`: (2, max_characters_per_token)."""
        size = self.config.max_characters_per_token
        return torch.tensor([word_to_char_ids(BOS_TOKEN, size), word_to_char_ids(EOS_TOKEN, size)], device=device)

    def _initial_states(self, batch_size: int, sort_order: torch.Tensor, like: torch.Tensor) -> list[LstmState]:
        """Per layer, zero states or the carried ones (stateful mode), in sorted row order."""
        cell_size, proj_size = self.config.lstm_cell_size, self.config.projection_dim
        states = []
        for index in range(self.config.num_hidden_layers):
            hidden = like.new_zeros(2, batch_size, proj_size)
            cell = like.new_zeros(2, batch_size, cell_size)
            if self.config.stateful and self._lstm_states is not None:
                stored_hidden, stored_cell = self._lstm_states[index]
                rows = min(batch_size, stored_hidden.shape[1])
                hidden[:, :rows] = stored_hidden[:, :rows].to(like)
                cell[:, :rows] = stored_cell[:, :rows].to(like)
            states.append((hidden[:, sort_order], cell[:, sort_order]))
        return states

    def _store_states(self, final_states: list[LstmState], sort_order: torch.Tensor) -> None:
        """Keep the final states (sorted rows) for the next call, detached, in original row order."""
        batch_size = sort_order.numel()
        stored = []
        for index, (hidden, cell) in enumerate(final_states):
            unsorted_hidden = torch.empty_like(hidden).index_copy_(1, sort_order, hidden.detach())
            unsorted_cell = torch.empty_like(cell).index_copy_(1, sort_order, cell.detach())
            if self._lstm_states is not None and self._lstm_states[index][0].shape[1] > batch_size:
                previous_hidden, previous_cell = self._lstm_states[index]
                unsorted_hidden = torch.cat([unsorted_hidden, previous_hidden[:, batch_size:]], dim=1)
                unsorted_cell = torch.cat([unsorted_cell, previous_cell[:, batch_size:]], dim=1)
            stored.append((unsorted_hidden, unsorted_cell))
        self._lstm_states = stored

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> ElmoModelOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_words, max_characters_per_token)`):
                Character ids of every word from [`ElmoTokenizer`]; a padded word is a row of zeros.
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*):
                1 for words, 0 for padding. Derived from `input_ids` when absent.
            output_hidden_states (`bool`, *optional*):
                Return all `num_hidden_layers + 1` layers as `hidden_states`.
        """
        if input_ids.dim() != 3 or input_ids.shape[-1] != self.config.max_characters_per_token:
            raise ValueError(
                "input_ids must have shape (batch_size, num_words, "
                f"{self.config.max_characters_per_token}), got {tuple(input_ids.shape)}."
            )
        if input_ids.shape[0] == 0:
            raise ValueError("Empty batch: input_ids has batch size 0.")
        if attention_mask is None:
            attention_mask = (input_ids != 0).any(dim=-1)
        if attention_mask.shape != input_ids.shape[:2]:
            raise ValueError(
                f"attention_mask must have shape {tuple(input_ids.shape[:2])}, got {tuple(attention_mask.shape)}."
            )
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        batch_size, max_words = attention_mask.shape
        packing = _pack_sentences(attention_mask)

        words = input_ids.flatten(0, 1)[packing.word_positions]  # (num_words, max_chars)
        vocabulary = torch.cat([words, self.boundary_char_ids(input_ids.device)])
        token_embeddings = self.char_encoder(vocabulary)  # (num_words + 2, projection_dim)
        packed_inputs = token_embeddings[packing.source]  # (2, num_packed, projection_dim)

        initial_states = self._initial_states(batch_size, packing.sort_order, token_embeddings)
        packed_outputs, final_states = self.bilm(packed_inputs, packing.batch_sizes, initial_states)
        if self.config.stateful:
            self._store_states(final_states, packing.sort_order)

        word_embeddings = token_embeddings[: words.shape[0]]
        layer_values = [torch.cat([word_embeddings, word_embeddings], dim=-1)]
        for packed in packed_outputs:
            layer_values.append(
                torch.cat([packed[0, packing.word_to_packed[0]], packed[1, packing.word_to_packed[1]]], dim=-1)
            )
        width = 2 * self.config.projection_dim
        layers = tuple(
            values.new_zeros(batch_size * max_words, width)
            .index_copy(0, packing.word_positions, values)
            .view(batch_size, max_words, width)
            for values in layer_values
        )
        representations = tuple(mix(layers, attention_mask) for mix in self.scalar_mixes)
        return ElmoModelOutput(
            last_hidden_state=layers[-1],
            hidden_states=layers if output_hidden_states else None,
            elmo_representations=representations or None,
        )


__all__ = ["ElmoModel", "ElmoPreTrainedModel", "ElmoModelOutput"]
