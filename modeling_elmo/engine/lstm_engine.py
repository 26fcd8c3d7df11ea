"""
The CPU inference engine of the biLM: what runs a biLM layer on a CPU when no gradient is needed, in place of the
model's reference recurrence, each step by `lstm_cell.lstm_cell` (or the caller's cell step). It serves the CPU
implementations (`cpu_implementation`), which keep one `LstmEngine` per layer.

Public interface:

- `LstmEngine(products, threads)`: `run(weights, inputs, batch_sizes, initial_state)`, a layer's call
  (`lstm_cell.LstmWeights`, the arguments and results of `ElmoImplementation.lstm_layer`; a quantized
  layer passes its own input-to-gate products and time steps, `StepSet`, `modeling_elmo.quantization`).
  `STEP_PRODUCTS`, `check_settings(products, threads)`.
- `tuned_call(compute, attention_mask, model_key)`: one whole inference call (`compute()`) under the thread count
  chosen for it, for callers that own their process (`elmo-embed`).

The default is predictable: the step products are fixed by facts of the call (device, dtype, oneDNN available, one
sequence or several), not by timings: oneDNN with the recurrent and projection weights packed into its layout where
it applies (a one-row projection to fewer outputs on the weight as it is), `bmm` for a single sequence and where
oneDNN does not apply. The packed weights are kept with a fingerprint of the weights' bits (`weight_fingerprint`),
checked on every call, so a weight change renews them on the next call; no call changes the thread count. The same
inputs give the same bits in every process, under any load, at any thread count and from any number of Python
threads at once. Opt-in: `products="views"` (nothing derived or kept), `products="packed"`, `products="auto"` and
`threads="auto"` (choices from timings, `recurrence_tuning`).
"""

import contextlib
import itertools
from collections.abc import Callable, Hashable
from typing import TypeVar

import torch

from ..lstm_cell import LstmState, LstmWeights, lstm_cell
from .cpu_linear import LinearFn, onednn_linear, onednn_linear_applies
from .recurrence_tuning import (
    THREAD_CHOOSER,
    choose_step_products,
    num_threads,
    rows_bucket,
    same_results_at,
    thread_counts,
)
from .weight_fingerprint import WeightFingerprint

STEP_PRODUCTS = ("onednn", "views", "bmm", "packed", "auto")
# the directions a set of inference products computes, and its (input-to-gate, recurrent, projection) products
LinearSet = tuple[slice, tuple[LinearFn, LinearFn, LinearFn]]
# per direction, the (recurrent, projection) products of a set
StepLinears = list[tuple[LinearFn, LinearFn]]
# `time_step(gates, hidden, cell) -> (hidden, cell)`: one time step of a set of directions after its input-to-gate
# product: `gates` (D, n, 4 * cell_size), that product (bias included where the set's product adds it), written in
# place; `hidden` (D, n, proj_size) and `cell` (D, n, cell_size), the state before the step
TimeStep = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], LstmState]
# the directions a set computes, its input-to-gate product (gate bias included) and its time step
StepSet = tuple[slice, LinearFn, TimeStep]
# `run_steps(rows, steps)`: the context a block of time steps of the inference recurrence runs in
StepRunner = Callable[[int, int], contextlib.AbstractContextManager]
Result = TypeVar("Result")


class LstmEngine:
    """
    The inference recurrence of one biLM layer and what it keeps between calls.

    Settings (checked by `check_settings`): `products` (one of `STEP_PRODUCTS`) and `threads` (None: as set; "auto"
    or a count).
    """

    INPUT_GATE_BLOCK_ROWS = 256  # packed rows per direction whose input-to-gate products are computed at once
    PACKED_WEIGHT_ROWS = 64  # oneDNN lays the per-step weights out for products of about this many rows (any work)

    def __init__(self, products: str = "onednn", threads: int | str | None = None, pack_inputs: bool = False) -> None:
        self.products = products
        self.threads = threads
        # with packed weights ("onednn", "packed"), the input-to-gate weights packed too: for a caller that runs many
        # small input-to-gate products on the same weights (`inference.step_scheduler`), at their memory again
        self.pack_inputs = pack_inputs
        # (fingerprint of the weights packed, the step products and the packed input-to-gate products derived)
        self._derived: tuple[WeightFingerprint, StepLinears, list[LinearFn] | None] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_derived": None}  # packed oneDNN weights cannot be pickled

    def run(
        self,
        layer: LstmWeights,
        inputs: torch.Tensor,
        batch_sizes: list[int],
        initial_state: LstmState,
        step_sets: list[StepSet] | None = None,
    ) -> tuple[torch.Tensor, LstmState]:
        """The call of the layer `layer` (arguments and results of `ElmoImplementation.lstm_layer`) without gradients:
        the in-place recurrence. `step_sets`: the caller's own input-to-gate products (gate bias included) and time
        steps, per set of directions (a quantized layer's); by default the engine's (`_linear_sets`), each step
        `lstm_cell.lstm_cell` after the recurrent product and the bias (`_time_step`)."""
        outputs = inputs.new_empty(2, inputs.shape[1], initial_state[0].shape[-1])
        hidden, cell = initial_state[0], initial_state[1].clone()  # `cell` is updated in place
        offsets = list(itertools.accumulate(batch_sizes, initial=0))
        if step_sets is None:
            products, linear_sets = self._linear_sets(layer, inputs, batch_sizes[0])
            run_steps = self._step_runner(layer, products, linear_sets)
            step_sets = self._step_sets(layer, linear_sets)
        else:
            run_steps = self._step_runner(layer, "given", [])
        for directions, input_to_gates, time_step in step_sets:
            self._recur_in_place(
                input_to_gates, time_step, inputs[directions], offsets, hidden[directions], cell[directions],
                outputs[directions], run_steps,
            )  # fmt: skip
        active = torch.tensor(batch_sizes).unsqueeze(1) > torch.arange(batch_sizes[0])  # (time, batch)
        last_step = active.sum(dim=0) - 1
        last_index = torch.tensor(offsets[:-1])[last_step] + torch.arange(batch_sizes[0])
        return outputs, (outputs[:, last_index.to(outputs.device)], cell)

    def step_sets(self, layer: LstmWeights, inputs: torch.Tensor, rows: int) -> list[StepSet]:
        """
        The engine's step sets for time steps of `rows` rows of inputs like `inputs` (dtype, device): what `run`
        computes a layer with, for a caller that schedules the steps itself (`inference.step_scheduler`). The sets of
        every row count agree on what their input-to-gate products leave out (the gate bias, which every time step
        adds), so gates computed by one set's product run through another set's time step.
        """
        return self._step_sets(layer, self._linear_sets(layer, inputs, rows)[1])

    def _step_sets(self, layer: LstmWeights, linear_sets: list[LinearSet]) -> list[StepSet]:
        """Each of `linear_sets` as a step set: its input-to-gate product and the engine's time step (`_time_step`)."""
        bias = layer.gate_bias().unsqueeze(1)
        return [
            (directions, input_to_gates, self._time_step(layer, recurrent, projection, bias[directions]))
            for directions, (input_to_gates, recurrent, projection) in linear_sets
        ]

    @staticmethod
    def _time_step(layer: LstmWeights, recurrent: LinearFn, projection: LinearFn, bias: torch.Tensor) -> TimeStep:
        """The engine's time step: the recurrent product, then the bias (D, 1, 4 * cell_size) (last, as in the
        reference), added to the gates in place; then `lstm_cell` with the layer's clips."""

        def time_step(gates: torch.Tensor, hidden: torch.Tensor, cell: torch.Tensor) -> LstmState:
            gates.add_(recurrent(hidden)).add_(bias)
            return lstm_cell(gates, cell, projection, layer.cell_clip, layer.proj_clip)

        return time_step

    def _recur_in_place(
        self,
        input_to_gates: LinearFn,
        time_step: TimeStep,
        inputs: torch.Tensor,
        offsets: list[int],
        hidden: torch.Tensor,
        cell: torch.Tensor,
        outputs: torch.Tensor,
        run_steps: StepRunner,
    ) -> None:
        """
        The inference recurrence for `D` directions (1 or 2) at once: `inputs` (D, num_packed, input_size), initial
        `hidden` (D, batch, proj_size), `cell` (D, batch, cell_size) updated in place, `outputs` (D, num_packed,
        proj_size) written. The input-to-gate products are computed a block of time steps at a time
        (`INPUT_GATE_BLOCK_ROWS`), so memory stays bounded on long inputs; the steps of each block run in
        `run_steps(rows, steps)` (threads, see `_step_runner`), each one `time_step`.
        """
        num_steps = len(offsets) - 1
        step = 0
        while step < num_steps:
            end = step + 1  # steps [step, end) share one input-to-gate product
            while end < num_steps and offsets[end + 1] - offsets[step] <= self.INPUT_GATE_BLOCK_ROWS:
                end += 1
            gates_block = input_to_gates(inputs[:, offsets[step] : offsets[end]])  # (D, rows, 4 * cell_size)
            with run_steps(offsets[step + 1] - offsets[step], end - step):
                for time in range(step, end):
                    size = offsets[time + 1] - offsets[time]
                    gates = gates_block[:, offsets[time] - offsets[step] : offsets[time + 1] - offsets[step]]
                    new_hidden, new_cell = time_step(gates, hidden[:, :size], cell[:, :size])
                    hidden = outputs[:, offsets[time] : offsets[time + 1]]
                    hidden.copy_(new_hidden)
                    cell[:, :size] = new_cell
            step = end

    def _shape_key(self, layer: LstmWeights) -> tuple:
        """What the run-time choices of `recurrence_tuning` depend on besides the rows: shapes and dtype."""
        return tuple(layer.weight_hh.shape), tuple(layer.weight_proj.shape), layer.weight_hh.dtype

    def _linear_sets(self, layer: LstmWeights, inputs: torch.Tensor, rows: int) -> tuple[str, list[LinearSet]]:
        """
        The input-to-gate, recurrent and projection products for a batch of `rows` sequences, named, with the
        directions each set computes. Where oneDNN applies (`onednn_linear_applies`), `products` decides:
        "onednn", one direction at a time with the recurrent and projection weights packed into oneDNN's layout
        (`_derived_linears`), a one-row projection to fewer outputs on the weight as it is (`onednn_linear`), except
        for a single sequence, whose products only stream the weights: "bmm" reads them faster there; "views", the
        same on the weights' own transposed views (nothing derived, nothing kept); "packed", every product on packed
        weights, a single sequence's included; "bmm"; or "auto": "packed" or "bmm", whichever ran a few steps faster
        at this many rows, measured once (`choose_step_products`; `bmm` unless packed is clearly faster). Where oneDNN
        does not apply: "bmm", both directions in one product on the weights as they are.

        The input-to-gate products read `weight_ih` at call time, so they never hold on to a replaced tensor.
        """
        onednn = onednn_linear_applies(layer.weight_hh, inputs)
        bmm_sets = [(slice(0, 2), self._bmm_linears(layer))]
        if not onednn or self.products == "bmm" or (self.products in ("onednn", "views") and rows == 1):
            return "bmm", bmm_sets
        if self.products == "views":
            return "views", self._direction_sets(layer, self._step_linears(layer, onednn_linear), onednn=True)
        if self.products == "onednn":
            return "onednn", self._derived_linears(layer)
        if self.products == "auto":
            bucket = rows_bucket(rows)

            def candidates() -> dict[str, Callable[[], object]]:
                packed_sets = self._direction_sets(layer, self._derived_step_linears(layer), True)  # not kept
                return {
                    "bmm": self._steps_probe(layer, bmm_sets, bucket),
                    "packed": self._steps_probe(layer, packed_sets, bucket),
                }

            if choose_step_products((self._shape_key(layer), bucket), candidates) == "bmm":
                return "bmm", bmm_sets
        return "packed", self._derived_linears(layer)

    @staticmethod
    def _bmm_linears(layer: LstmWeights) -> tuple[LinearFn, LinearFn, LinearFn]:
        """The products of both directions at once, each one `torch.bmm` on the weights as they are."""
        return (
            lambda rows: torch.bmm(rows, layer.weight_ih),
            lambda hidden: torch.bmm(hidden, layer.weight_hh),
            lambda cell_output: torch.bmm(cell_output, layer.weight_proj),
        )

    @staticmethod
    def _step_linears(layer: LstmWeights, step_linear: Callable[[torch.Tensor], LinearFn]) -> StepLinears:
        """Per direction, the recurrent and projection products `step_linear(weight)` of that direction's weights."""
        return [(step_linear(layer.weight_hh[d]), step_linear(layer.weight_proj[d])) for d in range(2)]

    @staticmethod
    def _direction_sets(
        layer: LstmWeights, step_linears: StepLinears, onednn: bool, input_linears: list[LinearFn] | None = None
    ) -> list[LinearSet]:
        """One set per direction: its `step_linears`, the input-to-gate product `input_linears[direction]` (packed
        weights) or through oneDNN (`onednn`) or `torch.matmul` on this call's `weight_ih` (never kept: the sets hold
        on to no layer)."""

        def input_linear(direction: int) -> LinearFn:
            if input_linears is not None:
                return input_linears[direction]
            if onednn:
                return lambda rows: onednn_linear(layer.weight_ih[direction])(rows)
            return lambda rows: torch.matmul(rows, layer.weight_ih[direction])

        return [
            (slice(direction, direction + 1), (input_linear(direction), *step_linears[direction]))
            for direction in range(2)
        ]

    def _derived_linears(self, layer: LstmWeights) -> list[LinearSet]:
        """The per-direction sets of `_linear_sets` with packed step weights ("onednn", "packed"), and with
        `pack_inputs` packed input-to-gate weights, kept while the weights keep the fingerprint (`WeightFingerprint`)
        of the bits they were derived from."""
        derived_from = [layer.weight_hh, layer.weight_proj] + ([layer.weight_ih] if self.pack_inputs else [])
        cached = self._derived  # one read: another thread may replace it
        if cached is None or not cached[0].matches(derived_from):
            self._derived = cached = None  # free the old derived weights before deriving new ones
            inputs = None
            if self.pack_inputs:
                inputs = [onednn_linear(layer.weight_ih[d], self.INPUT_GATE_BLOCK_ROWS, False) for d in range(2)]
            cached = (WeightFingerprint(derived_from), self._derived_step_linears(layer), inputs)
            self._derived = cached
        return self._direction_sets(layer, cached[1], True, cached[2])

    def _derived_step_linears(self, layer: LstmWeights) -> StepLinears:
        """The step products of `_derived_linears`, derived from the current weights (not kept)."""

        def step_linear(weight: torch.Tensor) -> LinearFn:
            return onednn_linear(weight, self.PACKED_WEIGHT_ROWS, one_row_sums=self.products == "onednn")

        return self._step_linears(layer, step_linear)

    def _steps_probe(
        self, layer: LstmWeights, linear_sets: list[LinearSet], rows: int, steps: int = 4
    ) -> Callable[[], object]:
        """A callable running the inference recurrence (`_recur_in_place`) of every set for `steps` time steps of
        `rows` rows on fixed pseudo-random inputs, the input-to-gate products left out: what `choose_step_products`
        times."""
        generator = torch.Generator().manual_seed(0)
        input_size, proj_size, cell_size = (
            layer.weight_ih.shape[1],
            layer.weight_proj.shape[-1],
            layer.weight_proj.shape[-2],
        )
        inputs = torch.randn(2, rows * steps, input_size, generator=generator).to(layer.weight_ih)
        offsets = list(range(0, rows * (steps + 1), rows))
        bias = layer.gate_bias().detach().unsqueeze(1)
        gates = torch.randn(2, rows * steps, 4 * cell_size, generator=generator).to(layer.weight_ih)

        def gates_of_block(block: torch.Tensor) -> torch.Tensor:
            """The input-to-gate products are left out: a real block has far more steps to share them."""
            return gates[: block.shape[0], : block.shape[1]].clone()

        def run() -> None:
            for directions, (_, recurrent, projection) in linear_sets:
                count = directions.stop - directions.start
                hidden, cell = inputs.new_zeros(count, rows, proj_size), inputs.new_zeros(count, rows, cell_size)
                outputs = inputs.new_empty(count, rows * steps, proj_size)
                self._recur_in_place(
                    gates_of_block, self._time_step(layer, recurrent, projection, bias[directions]),
                    inputs[directions], offsets, hidden, cell, outputs, lambda rows, steps: contextlib.nullcontext(),
                )  # fmt: skip

        return run

    def _step_probe(
        self, layer: LstmWeights, linear_sets: list[LinearSet], rows: int
    ) -> Callable[[], list[torch.Tensor]]:
        """A callable running one time step's recurrent and projection products of every set at `rows` rows, on
        fixed pseudo-random inputs; returns the products."""
        generator = torch.Generator().manual_seed(0)

        def probe_input(directions: slice, width: int) -> torch.Tensor:
            values = torch.randn(directions.stop - directions.start, rows, width, generator=generator)
            return values.to(layer.weight_hh)

        cell_size, proj_size = layer.weight_proj.shape[-2:]
        probes = [
            (linears[1], probe_input(directions, proj_size), linears[2], probe_input(directions, cell_size))
            for directions, linears in linear_sets
        ]
        return lambda: [out for recur, hidden, project, cell in probes for out in (recur(hidden), project(cell))]

    def _step_runner(self, layer: LstmWeights, products: str, linear_sets: list[LinearSet]) -> StepRunner:
        """
        `run_steps(rows, steps)`: the context a block of `steps` time steps of `rows` rows runs in. With `threads`
        None, the threads as set; with a count, that many threads; with "auto", the count `THREAD_CHOOSER` picks
        for blocks of this kind, where the products give the same bits at every count it tries (`same_results_at`,
        probed once per rows bucket), and otherwise (or for a caller's own step sets, `linear_sets` empty) the
        threads as set.
        """
        if self.threads is None:
            return lambda rows, steps: contextlib.nullcontext()
        if self.threads != "auto":
            count = self.threads
            return lambda rows, steps: num_threads(count)
        counts = thread_counts(torch.get_num_threads())
        if len(counts) == 1 or not linear_sets:  # a caller's own step sets: no products to probe, threads as set
            return lambda rows, steps: contextlib.nullcontext()
        key = (self._shape_key(layer), products, linear_sets[0][0].stop - linear_sets[0][0].start)

        def run_steps(rows: int, steps: int) -> contextlib.AbstractContextManager:
            bucket = rows_bucket(rows)

            def probes() -> list[Callable[[], list[torch.Tensor]]]:
                return [
                    self._step_probe(layer, linear_sets[:1], size) for size in sorted({1, bucket // 2 + 1, bucket})
                ]

            if not same_results_at((*key, bucket, counts), counts, probes):
                return contextlib.nullcontext()
            return THREAD_CHOOSER.run((*key, bucket), steps)

        return run_steps


def tuned_call(compute: Callable[[], Result], attention_mask: torch.Tensor, model_key: Hashable) -> Result:
    """
    `compute()`, one inference call of a model on a batch with word mask `attention_mask` (batch, words), under the
    thread count `THREAD_CHOOSER` picks for calls of this model and size: on a CPU that other processes keep busy,
    where threads waiting for each other at every parallel operation can make a call several times slower, the call
    drops to fewer threads (with a `threads="auto"` implementation, the blocks of time steps choose again inside).
    `model_key` tells the calls of one model apart from another's (what it computes with: its tensors' shapes and
    dtypes, its choice of implementation). For callers that own their process (`elmo-embed`): only where the call
    gives the same bits at every count (`same_results_at`, checked on the first call of its kind by running it at each
    count); otherwise, for calls with gradients or off the CPU, `compute()` as it is. Calls that carry LSTM states
    must not come here (a repeated call would advance them).
    """
    counts = thread_counts(torch.get_num_threads())
    if (
        torch.is_grad_enabled()
        or attention_mask.device.type != "cpu"
        or torch.compiler.is_compiling()
        or len(counts) == 1
    ):
        return compute()
    rows, words = attention_mask.shape[0], int(attention_mask.sum()) + 2 * attention_mask.shape[0]
    key = ("call", model_key, rows_bucket(rows))
    if not same_results_at((*key, counts), counts, lambda: [lambda: _output_tensors(compute())]):
        return compute()
    with THREAD_CHOOSER.run((*key, rows_bucket(attention_mask.shape[1])), words):
        return compute()


def _output_tensors(output: object) -> list[torch.Tensor]:
    """The tensors of a model's output (a `ModelOutput` or a tuple), tuples of layers flattened."""
    values = output.to_tuple() if hasattr(output, "to_tuple") else output
    flat = [item for value in values for item in (value if isinstance(value, tuple) else (value,))]
    return [item for item in flat if isinstance(item, torch.Tensor)]


def check_settings(products: str, threads: int | str | None) -> None:
    """
    Refuse settings of an `LstmEngine` that it cannot run.

    Args:
        products: `"onednn"` (the default): where oneDNN applies (float32 on x86 CPUs, no CPU autocast, not inside
            `torch.compile`), each direction's recurrent and projection products through oneDNN with the weights
            packed into its layout (a one-row projection to fewer outputs through PyTorch's column sums, which do
            not depend on the thread count), packed on first use and kept with a fingerprint of the weights' bits
            that every call checks (`WeightFingerprint`: a weight change renews them); a single sequence, and calls
            where oneDNN does not apply, take `"bmm"`. `"views"`: the same on the weights' own transposed views,
            nothing derived or kept. `"bmm"`: both directions in one `torch.bmm` on the weights as they are.
            `"packed"` (needs oneDNN): every product on packed weights, a single sequence's and one-row products
            included. `"auto"`: `"packed"` or `"bmm"`, whichever ran a few time steps faster on this machine at the
            batch's row count, measured once per process (`bmm` unless packed is clearly faster), so the choice and
            the bits can differ between processes.
        threads: None (the default: the calls run under `torch.get_num_threads()` and never change it), a thread
            count for the time steps (set process-wide while they run), or `"auto"`: each block of time steps runs
            under the count, out of `torch.get_num_threads()`, half of it (from 4) and 1, with the lowest measured
            time per step; another count is tried now and then, so the choice follows the load of other processes
            (`recurrence_tuning.ThreadCountChooser`). A count is only chosen for work that gives the same bits at
            every count (checked once, `same_results_at`; on x86 CPUs in float32 every product runs through oneDNN,
            which splits work among threads that way): outputs do not depend on the choice.
    """
    if products not in STEP_PRODUCTS:
        raise ValueError(f"products must be one of {', '.join(map(repr, STEP_PRODUCTS))}, got {products!r}.")
    if products == "packed" and not onednn_linear_applies(torch.zeros(1), torch.zeros(1)):
        raise ValueError("products='packed' needs PyTorch's oneDNN on an x86 CPU, which this machine lacks.")
    if threads not in (None, "auto") and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be 'auto' or a positive int, got {threads!r} (None: leave them as set).")
