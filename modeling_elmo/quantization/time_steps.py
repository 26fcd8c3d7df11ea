"""
A quantized layer's time step (`lstm_engine.TimeStep`) for one direction: its recurrent product, the cell and its
projection, with the element-wise work between the two products in as few ATen passes as its arithmetic allows.

- `"int8"`: the products take unit rows (`kernels.int8_unit_rows_product`); the recurrent product's scaling by the
  hidden rows' magnitudes and its sum with the gates are one `addcmul`, then the gates' activations, the cell update
  and clip, the cell output and its per-row magnitudes (the projection's activations, quantized per row)
  (`int8_products_cell`); the projection's scaling and clip (`int8_projected_hidden`).
- `"int8_weight_only"` and `"bf16"` (float32 products): the gates' sum and everything up to the cell output
  (`float_products_cell`).

The gate products' new-input rows `j` come doubled (`quantized_layer.ElmoQuantizedLstmLayer`), so every activation is
a sigmoid: `tanh(x) = 2 sigmoid(2x) - 1`, so `f c + i tanh(j) = f c + 2 i sigmoid(2j) - i` and `o tanh(c) = 2 o
sigmoid(2c) - o`. ATen splits `tanh` of even a few thousand values among threads, each of which waits for the others
on a busy CPU, while `sigmoid` of a time step's values runs on one.

Compiling these regions into one loop each (`torch.compile`, inductor's C++) was measured and not adopted: no faster
on 2 threads, slower at a few rows, and seconds of compilation per process (docs/speed.md, "The time step's
element-wise work"; `benchmarks/bench_time_step.py`).
"""

import torch

from ..engine.lstm_engine import LinearFn, TimeStep
from ..lstm_cell import LstmState
from .kernels import unit_rows

SMALLEST_MAGNITUDE = torch.finfo(torch.float32).tiny  # an all-zero row's magnitude (`kernels.unit_rows`)


# ---- the regions (pure functions of (rows, width) tensors and floats; `inf`: no clip) ---------------------------


def _cell_of_gates(
    gates: torch.Tensor, cell: torch.Tensor, cell_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`gates` (n, 4 * cell_size), pre-activation with `j` doubled, `cell` (n, cell_size) -> (new cell clipped to
    `cell_clip` (None: not), cell output `o tanh(new cell)`)."""
    input_gate, new_input, forget_gate, output_gate = torch.sigmoid(gates).chunk(4, dim=-1)
    new_cell = torch.addcmul(torch.addcmul(-input_gate, input_gate, new_input, value=2), forget_gate, cell)
    if cell_clip is not None:
        new_cell.clamp_(-cell_clip, cell_clip)
    return new_cell, torch.addcmul(-output_gate, output_gate, torch.sigmoid(new_cell * 2), value=2)


def float_products_cell(
    gates: torch.Tensor, product: torch.Tensor, cell: torch.Tensor, cell_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gates (n, 4 * cell_size) plus the recurrent product (n, 4 * cell_size) -> (new cell, cell output)."""
    return _cell_of_gates(gates + product, cell, cell_clip)


def int8_products_cell(
    gates: torch.Tensor, product: torch.Tensor, magnitudes: torch.Tensor, cell: torch.Tensor, cell_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gates plus the recurrent product of unit rows scaled back by the hidden rows' `magnitudes` (n, 1) ->
    (new cell, the cell output as unit rows, their magnitudes (n, 1)): the projection's input, quantized per row."""
    new_cell, cell_output = _cell_of_gates(torch.addcmul(gates, product, magnitudes), cell, cell_clip)
    output_magnitudes = cell_output.abs().amax(dim=-1, keepdim=True).clamp_min(SMALLEST_MAGNITUDE)
    return new_cell, cell_output / output_magnitudes, output_magnitudes


def int8_projected_hidden(product: torch.Tensor, magnitudes: torch.Tensor, proj_clip: float | None) -> torch.Tensor:
    """The projection's product of unit rows (n, proj_size) scaled back by their `magnitudes` (n, 1), clipped to
    `proj_clip` (None: not)."""
    hidden = product * magnitudes
    return hidden if proj_clip is None else hidden.clamp_(-proj_clip, proj_clip)


def time_step(
    method: str, recurrent: LinearFn, projection: LinearFn, cell_clip: float | None, proj_clip: float | None
) -> TimeStep:
    """
    One direction's time step (shapes as `lstm_engine.TimeStep`, D = 1; the clips: None or 0 for none). For
    `"int8"`, `recurrent` and `projection` are products of unit rows (`kernels.int8_unit_rows_product`); for the
    other methods, float32 products (`kernels.quantized_linear`).
    """
    cell_clip, proj_clip = cell_clip or None, proj_clip or None

    def int8_step(gates: torch.Tensor, hidden: torch.Tensor, cell: torch.Tensor) -> LstmState:
        units, magnitudes = unit_rows(hidden[0])
        new_cell, cell_units, cell_magnitudes = int8_products_cell(
            gates[0], recurrent(units), magnitudes, cell[0], cell_clip
        )
        new_hidden = int8_projected_hidden(projection(cell_units), cell_magnitudes, proj_clip)
        return new_hidden.unsqueeze(0), new_cell.unsqueeze(0)

    def float_step(gates: torch.Tensor, hidden: torch.Tensor, cell: torch.Tensor) -> LstmState:
        new_cell, cell_output = float_products_cell(gates[0], recurrent(hidden[0]), cell[0], cell_clip)
        new_hidden = projection(cell_output)
        if proj_clip is not None:
            new_hidden.clamp_(-proj_clip, proj_clip)
        return new_hidden.unsqueeze(0), new_cell.unsqueeze(0)

    return int8_step if method == "int8" else float_step
