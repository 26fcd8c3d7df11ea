"""
A biLM layer's recurrence on the Triton kernels (`triton_kernels`), both directions in every launch: the input gates
of a chunk of time steps in one launch, then two launches per step (the cell, then the projection), which write the
packed outputs and the final states in place. Nothing in the loop waits for the device: the steps' rows and offsets
come from `batch_sizes`, a list on the host.
"""

from dataclasses import dataclass
from itertools import accumulate

import torch

from .triton_kernels import Mode, launch_lstm_cell, launch_row_matmul

INPUT_GATE_CHUNK_BYTES = 64 << 20  # input gates held at once (a single step's may exceed it): 512 tokens of 'original'


@dataclass(frozen=True)
class KernelWeights:
    """A layer's weights as the kernels read them: weight_ih (2, input_size, 4 * cells), weight_hh (2, proj, 4 *
    cells), weight_proj (2, cells, proj), all float32 or all bfloat16; bias (2, 4 * cells) float32, the forget bias
    added; the clips (`None` or 0: no clip)."""

    weight_ih: torch.Tensor
    weight_hh: torch.Tensor
    weight_proj: torch.Tensor
    bias: torch.Tensor
    cell_clip: float | None
    proj_clip: float | None

    def addresses(self) -> tuple[int, ...]:
        """Where the tensors live (what a captured launch reads)."""
        return tuple(t.data_ptr() for t in (self.weight_ih, self.weight_hh, self.weight_proj, self.bias))


def step_chunks(batch_sizes: list[int], max_rows: int) -> list[tuple[int, int]]:
    """The steps in runs `(first, end)` whose packed rows add up to at most `max_rows` (a single step may exceed
    it): the steps whose input gates are computed and held at once."""
    chunks, first, rows = [], 0, 0
    for step, size in enumerate(batch_sizes):
        if rows and rows + size > max_rows:
            chunks.append((first, step))
            first, rows = step, 0
        rows += size
    if batch_sizes:
        chunks.append((first, len(batch_sizes)))
    return chunks


def run_recurrence(
    weights: KernelWeights,
    batch_sizes: list[int],
    mode: Mode,
    inputs: torch.Tensor,
    hidden: torch.Tensor,
    cell: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    `ElmoLstmLayer.forward` on the kernels: `inputs` (2, num_packed, input_size), the initial `hidden` (2, batch,
    proj) and `cell` (2, batch, cells), sorted rows, `batch_sizes` the live rows per step (non-increasing) ->
    outputs (2, num_packed, proj), final hidden, final cell, the products as `mode` says (`weights` in its dtype).
    """
    cells, proj = weights.weight_proj.shape[1:]
    inputs = inputs.contiguous()
    hidden = hidden.clone(memory_format=torch.contiguous_format)  # final states, updated in place
    cell = cell.clone(memory_format=torch.contiguous_format)
    outputs = inputs.new_empty(2, inputs.shape[1], proj)
    offsets = [0, *accumulate(batch_sizes)]
    chunks = step_chunks(batch_sizes, max(1, INPUT_GATE_CHUNK_BYTES // (2 * 4 * cells * 4)))
    gate_rows = max((offsets[end] - offsets[first] for first, end in chunks), default=0)
    input_gates = inputs.new_empty(2, gate_rows, 4 * cells)
    cell_output = torch.empty_like(cell)  # o * tanh(cell) of the step's rows
    for first, end in chunks:
        start = offsets[first]
        launch_row_matmul(
            "input_gates",
            mode,
            inputs,
            weights.weight_ih,
            input_gates,
            rows=offsets[end] - start,
            a_row=start,
            bias=weights.bias,
        )
        for step in range(first, end):
            rows = batch_sizes[step]
            launch_lstm_cell(
                mode,
                input_gates,
                offsets[step] - start,
                hidden,
                weights.weight_hh,
                cell,
                cell_output,
                rows,
                weights.cell_clip,
            )
            launch_row_matmul(
                "projection",
                mode,
                cell_output,
                weights.weight_proj,
                outputs,
                rows=rows,
                out_row=offsets[step],
                state=hidden,
                clip=weights.proj_clip,
            )
    return outputs, hidden, cell
