"""
One biLM layer as every implementation computes it, on tensors only: its weights and settings (`LstmWeights`) and one
step of its LSTM cell with projection (`lstm_cell`, bilm-tf's `LSTMCell(num_proj=..., cell_clip=..., proj_clip=...)`).
Imports only torch (shipped as remote code beside modeling_elmo.py).
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

LstmState = tuple[torch.Tensor, torch.Tensor]  # hidden (D, rows, proj_size), cell (D, rows, cell_size)
# (D, n, cell_size) -> (D, n, proj_size): a step's projection product
Projection = Callable[[torch.Tensor], torch.Tensor]
# `lstm_cell`'s signature: (gates, cell, project, cell_clip, proj_clip) -> (hidden, cell)
LstmCell = Callable[[torch.Tensor, torch.Tensor, Projection, float | None, float | None], LstmState]


def gate_bias(bias: torch.Tensor, forget_bias: float) -> torch.Tensor:
    """The bias the gates get, (2, 4 * cell_size): `bias` with `forget_bias` added to the forget gate (gate order
    `(i, j, f, o)`)."""
    if not forget_bias:
        return bias
    forget_gate = torch.zeros(4, 1, dtype=bias.dtype, device=bias.device)
    forget_gate[2] = forget_bias
    return bias + forget_gate.expand(4, bias.shape[-1] // 4).flatten()


def lstm_cell(
    gates: torch.Tensor,
    cell: torch.Tensor,
    project: Projection,
    cell_clip: float | None,
    proj_clip: float | None,
) -> LstmState:
    """
    One step of the LSTM cell with projection for `D` directions: `gates` (D, n, 4 * cell_size), the pre-activation
    gates `[x; h] W + b` in the order `(i, j, f, o)`, and `cell` (D, n, cell_size) -> new (hidden (D, n, proj_size),
    cell). `project` maps (D, n, cell_size) to (D, n, proj_size); the clips (`None` or 0: none) bound the new cell and
    hidden state.
    """
    input_gate, new_input, forget_gate, output_gate = gates.chunk(4, dim=-1)
    cell = torch.sigmoid(forget_gate) * cell + torch.sigmoid(input_gate) * torch.tanh(new_input)
    if cell_clip:
        cell = cell.clamp(-cell_clip, cell_clip)
    hidden = project(torch.sigmoid(output_gate) * torch.tanh(cell))
    if proj_clip:
        hidden = hidden.clamp(-proj_clip, proj_clip)
    return hidden, cell


class LayerKey:
    """The identity of one biLM layer for what implementations keep for it between calls (weakly: see
    `elmo_implementations.PerLayer`); a copy of the layer gets its own."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, eq=False)
class LstmWeights:
    """
    One biLM layer as an implementation sees it. Tensors, index 0 the forward direction: `weight_ih` (2, input_size,
    4 * cell_size), `weight_hh` (2, proj_size, 4 * cell_size), `bias` (2, 4 * cell_size) without the forget bias,
    `weight_proj` (2, cell_size, proj_size). Settings: `forget_bias` (added to the forget gate at run time), the clips
    (`None` or 0: none), `training` (the layer's mode). `key`: the layer's `LayerKey`.
    """

    weight_ih: torch.Tensor
    weight_hh: torch.Tensor
    bias: torch.Tensor
    weight_proj: torch.Tensor
    forget_bias: float
    cell_clip: float | None
    proj_clip: float | None
    training: bool
    key: LayerKey

    def gate_bias(self) -> torch.Tensor:
        """(2, 4 * cell_size): `bias` with the forget bias added (`gate_bias`)."""
        return gate_bias(self.bias, self.forget_bias)

    def cell(self, gates: torch.Tensor, cell: torch.Tensor, project: Projection | None = None) -> LstmState:
        """`lstm_cell` with this layer's clips; `project` by default `weight_proj` of both directions (D = 2)."""
        if project is None:
            project = self.project
        return lstm_cell(gates, cell, project, self.cell_clip, self.proj_clip)

    def project(self, cell_output: torch.Tensor) -> torch.Tensor:
        """The projection of both directions: (2, n, cell_size) -> (2, n, proj_size)."""
        return torch.bmm(cell_output, self.weight_proj)
