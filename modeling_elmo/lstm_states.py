"""
The biLM's LSTM states carried from one call to the next, by batch row (`ElmoLstmStates`): what the original
TensorFlow biLM and AllenNLP's ELMo keep between batches, and what pretraining's streams continue from. It serves
`modeling_elmo.py` (`states=` of `ElmoModel` and its heads, `config.stateful`, `ElmoForPreTraining`'s streams).
"""

from collections.abc import Sequence

import torch

LstmState = tuple[torch.Tensor, torch.Tensor]  # hidden (2, rows, projection_dim), cell (2, rows, lstm_cell_size)


class ElmoLstmStates:
    r"""
    The LSTM states of a biLM by batch row: for every layer, hidden `(2, num_rows, projection_dim)` and cell
    `(2, num_rows, lstm_cell_size)`, index 0 of the first dimension the forward direction and 1 the backward one; row
    `i` belongs to batch row `i`. A new object holds no rows: every row starts from zero.

    Passed as `states=` to [`ElmoModel`] or [`ElmoForPreTraining`], a call starts from these states and stores its
    final states back here, with the row rules of the original biLM and of AllenNLP (`_EncoderBase`), for a batch of
    `B` rows:

    - row `i` starts from stored row `i`; rows beyond the stored ones start from zero (`initial`);
    - afterwards, row `i < B` holds the final state of batch row `i`, except that a row with no tokens keeps its stored
      state; stored rows beyond the batch are kept unchanged for later calls (`update`).

    Stored states are detached: no gradient flows from one call into an earlier one (truncated backpropagation through
    time). `reset()` forgets every row, `reset(rows)` zeroes some. `layers` holds the tensors (`None` when there are no
    rows): `ElmoLstmStates(config, states.layers)` rebuilds an object from them (e.g. saved with `torch.save`).

        states = ElmoLstmStates(model.config)
        for batch in batches:
            output = model(**batch, states=states)  # output.states is states, updated
    """

    def __init__(self, config, layers: Sequence[LstmState] | None = None):
        """`config`: the biLM's [`ElmoConfig`]; `layers`: per layer (hidden, cell) as above, or `None` (no rows)."""
        self.num_layers = config.num_hidden_layers
        self.projection_dim = config.projection_dim
        self.cell_size = config.lstm_cell_size
        self.layers: list[LstmState] | None = None
        if layers is not None:
            self.layers = [tuple(layer) for layer in layers]
            self._check_layers()

    def _check_layers(self) -> None:
        """Refuse `layers` that are not `num_layers` (hidden, cell) pairs of the shapes above with the same rows."""
        if len(self.layers) != self.num_layers or any(len(layer) != 2 for layer in self.layers):
            raise ValueError(f"states must hold {self.num_layers} (hidden, cell) pairs, one per biLM layer.")
        for index, (hidden, cell) in enumerate(self.layers):
            if not all(isinstance(tensor, torch.Tensor) and tensor.is_floating_point() for tensor in (hidden, cell)):
                raise TypeError(f"states of layer {index} must be floating-point torch.Tensors.")
        num_rows = self.num_rows
        for index, (hidden, cell) in enumerate(self.layers):
            expected = ((2, num_rows, self.projection_dim), (2, num_rows, self.cell_size))
            if (tuple(hidden.shape), tuple(cell.shape)) != expected:
                raise ValueError(
                    f"states of layer {index} must have shapes {expected} (hidden, cell), got "
                    f"{(tuple(hidden.shape), tuple(cell.shape))}."
                )

    def __repr__(self) -> str:
        return f"ElmoLstmStates(num_layers={self.num_layers}, num_rows={self.num_rows})"

    @property
    def num_rows(self) -> int:
        """How many batch rows have a stored state (0: none)."""
        return 0 if self.layers is None else self.layers[0][0].shape[1]

    def reset(self, rows: torch.Tensor | Sequence[int] | None = None) -> None:
        """
        Forget the stored states: all of them (`rows=None`), or zero those of `rows`, row indices or a boolean mask by
        row (AllenNLP's `reset_states(mask)`: True rows are reset; rows beyond the stored ones are zero already).
        """
        if rows is None:
            self.layers = None
            return
        rows = torch.as_tensor(rows)
        if rows.dim() == 0:  # one row index
            rows = rows.reshape(1)
        if rows.dtype == torch.bool:
            rows = rows.flatten().nonzero().squeeze(1)
        if rows.dtype.is_floating_point or rows.dtype.is_complex or rows.dim() != 1 or (rows < 0).any():
            raise ValueError("rows must be non-negative row indices or a boolean mask by row.")
        if self.layers is None:
            return
        rows = rows[rows < self.num_rows].to(self.layers[0][0].device)
        self.layers = [
            (hidden.index_fill(1, rows, 0.0), cell.index_fill(1, rows, 0.0)) for hidden, cell in self.layers
        ]

    def initial(self, batch_size: int, like: torch.Tensor, order: torch.Tensor | None = None) -> list[LstmState]:
        """
        The states a batch of `batch_size` rows starts from, per layer (hidden, cell) of `like`'s dtype and device:
        row `i` the stored row `i`, zero beyond the stored rows; position `j` holds batch row `order[j]` when `order`
        (batch_size,) is given (the biLM's rows sorted by length).
        """
        states = [self._rows(index, batch_size, like) for index in range(self.num_layers)]
        if order is None or self.layers is None:
            return states
        return [(hidden[:, order], cell[:, order]) for hidden, cell in states]

    def _rows(self, index: int, batch_size: int, like: torch.Tensor) -> LstmState:
        """Layer `index`'s stored states of rows `0..batch_size-1` (zero beyond the stored rows), as `like`."""
        hidden = like.new_zeros(2, batch_size, self.projection_dim)
        cell = like.new_zeros(2, batch_size, self.cell_size)
        if self.layers is not None:
            rows = min(batch_size, self.num_rows)
            stored_hidden, stored_cell = self.layers[index]
            hidden[:, :rows] = stored_hidden[:, :rows].to(like)
            cell[:, :rows] = stored_cell[:, :rows].to(like)
        return hidden, cell

    def update(
        self,
        final_states: Sequence[LstmState],
        order: torch.Tensor | None = None,
        lengths: torch.Tensor | None = None,
    ) -> None:
        """
        Store the final states of a call, detached: `final_states` per layer (hidden, cell) of the call's `B` rows, in
        the order `order` (as in `initial`) when given. Rows whose `lengths` (B,) (tokens per batch row) is 0 keep
        their stored state; stored rows beyond `B` are kept.
        """
        previous = self.layers
        stored = []
        for index, (hidden, cell) in enumerate(final_states):
            hidden, cell = hidden.detach(), cell.detach()
            if order is not None:
                hidden = torch.empty_like(hidden).index_copy_(1, order, hidden)
                cell = torch.empty_like(cell).index_copy_(1, order, cell)
            if lengths is not None:
                hidden, cell = self._keep_rows_without_tokens(index, hidden, cell, lengths)
            batch_size = hidden.shape[1]
            if previous is not None and previous[index][0].shape[1] > batch_size:
                previous_hidden, previous_cell = previous[index]
                hidden = torch.cat([hidden, previous_hidden[:, batch_size:].to(hidden)], dim=1)
                cell = torch.cat([cell, previous_cell[:, batch_size:].to(cell)], dim=1)
            stored.append((hidden, cell))
        self.layers = stored

    def _keep_rows_without_tokens(
        self, index: int, hidden: torch.Tensor, cell: torch.Tensor, lengths: torch.Tensor
    ) -> LstmState:
        """`hidden`, `cell` (batch rows in order) with the rows whose `lengths` is 0 set back to layer `index`'s
        stored state (zero beyond the stored rows)."""
        empty = (lengths.to(hidden.device) == 0).view(1, -1, 1)
        if not bool(empty.any()):
            return hidden, cell
        kept_hidden, kept_cell = self._rows(index, hidden.shape[1], hidden)
        return torch.where(empty, kept_hidden, hidden), torch.where(empty, kept_cell.to(cell), cell)


def check_states(states: ElmoLstmStates, config) -> None:
    """Refuse `states` that are not an `ElmoLstmStates` with the shapes of the biLM of `config`."""
    shapes = (config.num_hidden_layers, config.projection_dim, config.lstm_cell_size)
    if not (
        isinstance(states, ElmoLstmStates) and (states.num_layers, states.projection_dim, states.cell_size) == shapes
    ):
        raise TypeError(
            "states must be an ElmoLstmStates made for this model's biLM, e.g. ElmoLstmStates(model.config)."
        )
