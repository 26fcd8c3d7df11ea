"""
The Triton kernels of the biLM's recurrence (`triton_recurrence` drives them), for both directions at once; tensors
are contiguous, direction first, float32 unless marked.

- `row_matmul_kernel`: `out[d, out_row + m] = clip(a[d, a_row + m] @ b[d] (+ bias[d]))` for `m < rows`, and the same
  rows into `state[d, m]` when asked. It computes a chunk of input gates (`inputs @ weight_ih + bias`, no clip) and
  each step's projection (`cell_output @ weight_proj`, clipped to `proj_clip`, written to the packed outputs and to
  the hidden state in place). Grid: (column tiles, row tiles, 2 directions).
- `lstm_cell_kernel`: one step of the cell for the step's live rows: the four gate tiles `hidden @ weight_hh` of a
  tile of cells, plus the step's input gates, then the gates, the new cell state (clipped to `cell_clip`, written in
  place) and `o * tanh(cell)` for the projection. Grid: (cell tiles, row tiles, 2 directions).

Products run through `tl.dot` with `input_precision` "ieee" (exact float32, the default) or "tf32"; with bfloat16
weights both operands are bfloat16 and the sums float32. `INTERPRETED` says whether the kernels were decorated under
`TRITON_INTERPRET=1` (Triton reads it then): they then run on CPU tensors, bfloat16 values are widened to float32
before any arithmetic (the interpreter's bfloat16 arithmetic is wrong; its float32-to-bfloat16 rounding truncates),
and `input_precision` is ignored. Loops have compile-time bounds (Triton 3.6's interpreter needs them).

Tiles (`tiles`: `EXACT_TILES` for float32 products, which run on FMA units and need registers for their operands,
`TENSOR_CORE_TILES` for TF32 and bfloat16): a launch over at most 16 rows takes the "narrow" tiles (16 rows: at batch
1 the weights are read once per step, spread over many programs), more rows the "wide" ones; tiles are cut to the
problem's size (`Tiles.fitted`). For 'original' (4,096 cells, projection 512, inputs 512), tiles as rows x columns x
depth / warps, and the shared memory per block that Triton 3.9 compiles them to for sm_80 / sm_90 in KiB (of 163 /
227; at most 192 registers a thread, no spill anywhere: tests/engine/test_triton_compile.py):

| launch | float32 ("ieee") | TF32 | bfloat16 weights | programs per launch |
| --- | --- | --- | --- | --- |
| cell, narrow | 16x32x32/4: 36 / 36 | 16x32x64/4: 72 / 72 | as TF32: 12 / 12 | 2 x 128 |
| cell, wide | 64x32x16/8: 24 / 24 | 64x32x32/8: 48 / 72 | as TF32: 18 / 18 | 2 x 128 x rows/64 |
| projection, narrow | 16x16x128/4: 32 / 32 | the same: 32 / 32 | the same: 20 / 20 | 2 x 32 |
| projection, wide | 64x32x32/4: 24 / 24 | 64x64x32/4: 32 / 48 | as TF32: 20 / 20 | 2 x 16 (8) x rows/64 |
| input gates, narrow | 16x64x64/8: 40 / 40 | the same: 40 / 40 | the same: 16 / 16 | 2 x 256 |
| input gates, wide | 64x128x32/8: 48 / 48 | the same: 48 / 72 | the same: 32 / 32 | 2 x 128 x rows/64 |

All use 3 pipeline stages; (8): TF32 and bfloat16. The tests' tiny shapes (64 cells, projection 16) need 5-20 KiB.

Memory traffic of one step of one layer: each row tile of the cell launch reads all of `weight_hh` (2 x 512 x 16,384,
64 MiB in float32) and each row tile of the projection all of `weight_proj` (2 x 4,096 x 512, 16 MiB); the live
rows' hidden states, input gates, cell states and cell outputs are read or written once. So a step at batch 1 moves
~80 MiB (40 MiB with bfloat16 weights): the bandwidth bound. A batch of 256 reads the weights four times (64-row
tiles) for 256 rows of products. The input gates of a chunk of steps (`triton_recurrence.INPUT_GATE_CHUNK_BYTES`) are
one launch, which reads `weight_ih` (64 MiB) once per 64 rows.
"""

import collections
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

PRECISIONS = ("ieee", "tf32")
NARROW_ROWS = 16  # steps with at most this many live rows take the narrow tiles

launches: collections.Counter[str] = collections.Counter()  # "input_gates", "cell", "projection" -> launches made


@triton.jit
def _operand(values, weight_ptr, UPCAST: tl.constexpr):
    """`values` as the left operand of a product with the weights at `weight_ptr`: rounded to bfloat16 for
    bfloat16 weights, and float32 again when interpreted (the loaded weights then get `.to(values.dtype)`)."""
    if weight_ptr.dtype.element_ty == tl.bfloat16:
        values = values.to(tl.bfloat16)
    if UPCAST:
        values = values.to(tl.float32)
    return values


@triton.jit
def _program_tile(rows, columns, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's tile: (direction, row (BLOCK_M,), column (BLOCK_N,), row < rows, column < columns)."""
    row = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    column = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    return tl.program_id(2).to(tl.int64), row, column, row < rows, column < columns


@triton.jit
def _left_operand(tile_ptr, start, depth_size, row_live, weight_ptr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    """Depths `start + k` (k < BLOCK_K, masked to `< depth_size` and live rows) of the rows at `tile_ptr`, as the left
    operand of a product with the weights at `weight_ptr` (`_operand`) -> (values (BLOCK_M, BLOCK_K), depth,
    depth_live)."""
    depth = start + tl.arange(0, BLOCK_K)
    depth_live = depth < depth_size
    values = tl.load(tile_ptr + depth[None, :], mask=row_live[:, None] & depth_live[None, :], other=0.0)
    return _operand(values, weight_ptr, UPCAST), depth, depth_live


@triton.jit
def _cell_update(input_gate, new_input, forget_gate, output_gate, cell, cell_clip, CLIP_CELL: tl.constexpr):
    """`ElmoLstmLayer.cell` on pre-activation gate tiles -> (new cell, o * tanh(new cell)). sigmoid and tanh from
    `exp` (tanh within 2e-7; `tl` has no tanh that the interpreter runs)."""
    input_gate = 1.0 / (1.0 + tl.exp(-input_gate))
    forget_gate = 1.0 / (1.0 + tl.exp(-forget_gate))
    output_gate = 1.0 / (1.0 + tl.exp(-output_gate))
    cell = forget_gate * cell + input_gate * (1.0 - 2.0 / (tl.exp(2.0 * new_input) + 1.0))
    if CLIP_CELL:
        cell = tl.minimum(tl.maximum(cell, -cell_clip), cell_clip)
    return cell, output_gate * (1.0 - 2.0 / (tl.exp(2.0 * cell) + 1.0))


@triton.jit(do_not_specialize=["rows", "a_row", "out_row"])
def row_matmul_kernel(
    a_ptr,
    b_ptr,
    bias_ptr,
    out_ptr,
    state_ptr,
    rows,
    a_row,
    out_row,
    a_rows,
    out_rows,
    state_rows,
    clip,
    K: tl.constexpr,
    N: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    CLIP: tl.constexpr,
    WRITE_STATE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """a (2, a_rows, K), b (2, K, N), bias (2, N), out (2, out_rows, N), state (2, state_rows, N): see the module."""
    direction, row, column, row_live, column_live = _program_tile(rows, N, BLOCK_M, BLOCK_N)
    a_tile = a_ptr + direction * a_rows * K + (a_row + row)[:, None] * K
    b_tile = b_ptr + direction * K * N + column[None, :]
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in tl.range(0, K, BLOCK_K):
        a, depth, depth_live = _left_operand(a_tile, start, K, row_live, b_ptr, BLOCK_K, UPCAST)
        b = tl.load(b_tile + depth[:, None] * N, mask=depth_live[:, None] & column_live[None, :], other=0.0)
        total = tl.dot(a, b.to(a.dtype), total, input_precision=PRECISION)
    if HAS_BIAS:
        total += tl.load(bias_ptr + direction * N + column, mask=column_live, other=0.0)[None, :]
    if CLIP:
        total = tl.minimum(tl.maximum(total, -clip), clip)
    tile_live = row_live[:, None] & column_live[None, :]
    tl.store(out_ptr + direction * out_rows * N + (out_row + row)[:, None] * N + column[None, :], total, tile_live)
    if WRITE_STATE:
        tl.store(state_ptr + direction * state_rows * N + row[:, None] * N + column[None, :], total, tile_live)


@triton.jit(do_not_specialize=["rows", "gate_row"])
def lstm_cell_kernel(
    input_gates_ptr,
    hidden_ptr,
    weight_hh_ptr,
    cell_ptr,
    cell_output_ptr,
    rows,
    gate_row,
    gate_rows,
    batch,
    cell_clip,
    PROJ: tl.constexpr,
    CELLS: tl.constexpr,
    CLIP_CELL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """
    input_gates (2, gate_rows, 4 * CELLS) with the bias (rows `gate_row + m`), hidden (2, batch, PROJ), weight_hh
    (2, PROJ, 4 * CELLS), cell (2, batch, CELLS) updated in place, cell_output (2, batch, CELLS) written; rows
    `m < rows`. Gate order (i, j, f, o), as `ElmoLstmLayer.cell`.
    """
    direction, row, column, row_live, column_live = _program_tile(rows, CELLS, BLOCK_M, BLOCK_N)
    hidden_tile = hidden_ptr + direction * batch * PROJ + row[:, None] * PROJ
    weight_tile = weight_hh_ptr + direction * PROJ * 4 * CELLS + column[None, :]
    input_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    new_input = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    forget_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    output_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in tl.range(0, PROJ, BLOCK_K):
        hidden, depth, depth_live = _left_operand(hidden_tile, start, PROJ, row_live, weight_hh_ptr, BLOCK_K, UPCAST)
        weights = weight_tile + depth[:, None] * (4 * CELLS)
        live = depth_live[:, None] & column_live[None, :]
        operand = hidden.dtype
        input_gate = tl.dot(hidden, tl.load(weights, live, 0.0).to(operand), input_gate, input_precision=PRECISION)
        new_input = tl.dot(
            hidden, tl.load(weights + CELLS, live, 0.0).to(operand), new_input, input_precision=PRECISION
        )
        forget_gate = tl.dot(
            hidden, tl.load(weights + 2 * CELLS, live, 0.0).to(operand), forget_gate, input_precision=PRECISION
        )
        output_gate = tl.dot(
            hidden, tl.load(weights + 3 * CELLS, live, 0.0).to(operand), output_gate, input_precision=PRECISION
        )
    tile_live = row_live[:, None] & column_live[None, :]
    gates = input_gates_ptr + direction * gate_rows * 4 * CELLS + (gate_row + row)[:, None] * (4 * CELLS)
    gates += column[None, :]
    input_gate += tl.load(gates, tile_live, 0.0)
    new_input += tl.load(gates + CELLS, tile_live, 0.0)
    forget_gate += tl.load(gates + 2 * CELLS, tile_live, 0.0)
    output_gate += tl.load(gates + 3 * CELLS, tile_live, 0.0)
    state = direction * batch * CELLS + row[:, None] * CELLS + column[None, :]
    cell, cell_output = _cell_update(
        input_gate,
        new_input,
        forget_gate,
        output_gate,
        tl.load(cell_ptr + state, tile_live, 0.0),
        cell_clip,
        CLIP_CELL,
    )
    tl.store(cell_ptr + state, cell, tile_live)
    tl.store(cell_output_ptr + state, cell_output, tile_live)


INTERPRETED = type(lstm_cell_kernel).__name__ == "InterpretedFunction"


@dataclass(frozen=True)
class Tiles:
    """A launch configuration: tile rows, columns and depth (`BLOCK_M/N/K`), warps and pipeline stages."""

    rows: int
    columns: int
    depth: int
    num_warps: int
    num_stages: int

    def fitted(self, columns: int, depth: int) -> "Tiles":
        """These tiles, no wider or deeper than the problem needs (powers of two, at least 16)."""
        return Tiles(
            self.rows,
            min(self.columns, max(16, triton.next_power_of_2(columns))),
            min(self.depth, max(16, triton.next_power_of_2(depth))),
            self.num_warps,
            self.num_stages,
        )


# kernel -> "narrow" / "wide" -> tiles; exact float32 products run on FMA units and need registers for their
# operands (shallower tiles), TF32 and bfloat16 ones on tensor cores. No configuration spills a register on sm_80 or
# sm_90 (tests/engine/test_triton_compile.py).
EXACT_TILES = {
    "cell": {"narrow": Tiles(16, 32, 32, 4, 3), "wide": Tiles(64, 32, 16, 8, 3)},
    "projection": {"narrow": Tiles(16, 16, 128, 4, 3), "wide": Tiles(64, 32, 32, 4, 3)},
    "input_gates": {"narrow": Tiles(16, 64, 64, 8, 3), "wide": Tiles(64, 128, 32, 8, 3)},
}
TENSOR_CORE_TILES = {
    "cell": {"narrow": Tiles(16, 32, 64, 4, 3), "wide": Tiles(64, 32, 32, 8, 3)},
    "projection": {"narrow": Tiles(16, 16, 128, 4, 3), "wide": Tiles(64, 64, 32, 4, 3)},
    "input_gates": EXACT_TILES["input_gates"],
}


@dataclass(frozen=True)
class Mode:
    """What the products compute with: `tl.dot`'s `input_precision` and the weights' dtype."""

    precision: str = "ieee"
    weight_dtype: torch.dtype = torch.float32

    @property
    def tensor_cores(self) -> bool:
        return self.precision == "tf32" or self.weight_dtype == torch.bfloat16


def tiles(kernel: str, mode: Mode, rows: int, columns: int, depth: int) -> Tiles:
    """The tiles of `kernel` ("cell", "projection", "input_gates") for a launch over `rows` rows."""
    table = TENSOR_CORE_TILES if mode.tensor_cores else EXACT_TILES
    return table[kernel]["narrow" if rows <= NARROW_ROWS else "wide"].fitted(columns, depth)


def cell_constants(tiles: Tiles, mode: Mode, cells: int, proj: int, clip: bool) -> dict[str, object]:
    """The compile-time arguments of `lstm_cell_kernel`."""
    return {"PROJ": proj, "CELLS": cells, "CLIP_CELL": clip, **_tile_constants(tiles, mode)}


def matmul_constants(
    tiles: Tiles, mode: Mode, depth: int, columns: int, bias: bool, clip: bool, state: bool
) -> dict[str, object]:
    """The compile-time arguments of `row_matmul_kernel`."""
    return {
        "K": depth,
        "N": columns,
        "HAS_BIAS": bias,
        "CLIP": clip,
        "WRITE_STATE": state,
        **_tile_constants(tiles, mode),
    }


def _tile_constants(tiles: Tiles, mode: Mode) -> dict[str, object]:
    return {
        "BLOCK_M": tiles.rows,
        "BLOCK_N": tiles.columns,
        "BLOCK_K": tiles.depth,
        "PRECISION": mode.precision,
        "UPCAST": INTERPRETED,
    }


def launch_options(tiles: Tiles) -> dict[str, object]:
    """Warps, stages, and FMA contraction stated (Triton 3.9 warns when it is left to its default, which 3.10
    changes)."""
    return {"num_warps": tiles.num_warps, "num_stages": tiles.num_stages, "enable_fp_fusion": True}


def shipped_launches(cells: int, proj: int, input_size: int) -> list[tuple[str, Mode, Tiles, dict[str, object]]]:
    """Every (kernel, mode, tiles, compile-time arguments) that a layer of these sizes with both clips launches."""
    found = []
    for mode in (Mode(), Mode("tf32"), Mode(weight_dtype=torch.bfloat16)):
        for rows in (1, NARROW_ROWS + 1):
            cell = tiles("cell", mode, rows, cells, proj)
            projection = tiles("projection", mode, rows, proj, cells)
            gates = tiles("input_gates", mode, rows, 4 * cells, input_size)
            found += [
                ("lstm_cell_kernel", mode, cell, cell_constants(cell, mode, cells, proj, True)),
                (
                    "row_matmul_kernel",
                    mode,
                    projection,
                    matmul_constants(projection, mode, cells, proj, False, True, True),
                ),
                (
                    "row_matmul_kernel",
                    mode,
                    gates,
                    matmul_constants(gates, mode, input_size, 4 * cells, True, False, False),
                ),
            ]
    return found


def launch_row_matmul(
    kernel: str,
    mode: Mode,
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    rows: int,
    a_row: int = 0,
    out_row: int = 0,
    bias: torch.Tensor | None = None,
    state: torch.Tensor | None = None,
    clip: float | None = None,
) -> None:
    """`row_matmul_kernel` as `kernel` ("projection", "input_gates") over `rows` rows: a (2, *, K) from row
    `a_row`, b (2, K, N), out (2, *, N) from row `out_row`, optional bias (2, N), state (2, *, N) from row 0, clip."""
    depth, columns = b.shape[1:]
    chosen = tiles(kernel, mode, rows, columns, depth)
    grid = (triton.cdiv(columns, chosen.columns), triton.cdiv(rows, chosen.rows), 2)
    row_matmul_kernel[grid](
        a,
        b,
        b if bias is None else bias,
        out,
        out if state is None else state,
        rows,
        a_row,
        out_row,
        a.shape[1],
        out.shape[1],
        0 if state is None else state.shape[1],
        float(clip or 0.0),
        **matmul_constants(chosen, mode, depth, columns, bias is not None, bool(clip), state is not None),
        **launch_options(chosen),
    )
    launches[kernel] += 1


def launch_lstm_cell(
    mode: Mode,
    input_gates: torch.Tensor,
    gate_row: int,
    hidden: torch.Tensor,
    weight_hh: torch.Tensor,
    cell: torch.Tensor,
    cell_output: torch.Tensor,
    rows: int,
    cell_clip: float | None,
) -> None:
    """`lstm_cell_kernel` for the first `rows` rows of the states (shapes as the kernel's docstring)."""
    proj, cells = hidden.shape[2], cell.shape[2]
    chosen = tiles("cell", mode, rows, cells, proj)
    grid = (triton.cdiv(cells, chosen.columns), triton.cdiv(rows, chosen.rows), 2)
    lstm_cell_kernel[grid](
        input_gates,
        hidden,
        weight_hh,
        cell,
        cell_output,
        rows,
        gate_row,
        input_gates.shape[1],
        cell.shape[1],
        float(cell_clip or 0.0),
        **cell_constants(chosen, mode, cells, proj, bool(cell_clip)),
        **launch_options(chosen),
    )
    launches["cell"] += 1
