"""
The reference implementations of ELMo's parts, on tensors: "eager" (the character CNN's products as PyTorch computes
them, a biLM layer's recurrence with the input-to-gate products a chunk of steps at a time: differentiable, on any
device) and "reference" (the straightforward paths, for checks: TensorFlow's per-step formulation). They are the math
that other implementations, registered in `elmo_implementations`, may replace (docs/design-notes.md,
"Implementations"). Imports only torch and the remote code beside it.
"""

import contextlib
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import nn

from .convolution_precision import fp32_convolutions
from .elmo_call import ElmoCall
from .lstm_cell import LstmState, LstmWeights

# packed rows per direction whose input-to-gate products "eager" computes at once (`input_gate_chunks`): 1024 rows of
# 'original' are 128 MiB of gates, where all steps at once would be 128 KiB per packed token
INPUT_GATE_CHUNK_ROWS = 1024


def input_gate_chunks(batch_sizes: list[int], max_rows: int) -> list[list[int]]:
    """
    Consecutive time steps grouped into chunks whose input-to-gate products are computed at once: each chunk the
    `batch_sizes` of its steps. A chunk grows until its next step would take it past `max_rows` rows (a step of more
    rows is a chunk of its own); as `batch_sizes` never increase, every chunk but the last then has more than
    `max_rows / 2` rows, and a last chunk of fewer than `max_rows / 4` rows joins the one before (at most
    `5 * max_rows / 4` rows): a product of only a few rows can take another kernel, whose bits differ. An input of at
    most `max_rows` rows is one chunk, one product.
    """
    chunks: list[list[int]] = [[]]
    rows = 0
    for size in batch_sizes:
        if chunks[-1] and rows + size > max_rows:
            chunks.append([])
            rows = 0
        chunks[-1].append(size)
        rows += size
    if len(chunks) > 1 and 4 * rows < max_rows:
        chunks[-2].extend(chunks.pop())
    return chunks


def input_gate_steps(weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int]) -> Iterator[torch.Tensor]:
    """
    The input-to-gate products `inputs @ weight_ih` of each time step in turn, (2, batch_sizes[t], 4 * cell_size),
    computed a chunk of steps at a time (`input_gate_chunks` of `INPUT_GATE_CHUNK_ROWS`): a chunk is made only when its
    first step is reached, so memory stays bounded whatever the number of steps. `inputs`: (2, num_packed,
    input_size).
    """
    chunks = input_gate_chunks(batch_sizes, INPUT_GATE_CHUNK_ROWS)
    # one split of the inputs (not a slice per chunk, whose backward would zero-fill all the inputs each time)
    chunk_inputs = inputs.split([sum(sizes) for sizes in chunks], dim=1)
    for sizes, values in zip(chunks, chunk_inputs, strict=True):
        yield from torch.bmm(values, weights.weight_ih).split(sizes, dim=1)


def recurrence(
    weights: LstmWeights,
    step_values: Iterable[torch.Tensor],
    compute_gates: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batch_sizes: list[int],
    initial_state: LstmState,
) -> tuple[torch.Tensor, LstmState]:
    """
    The reference recurrence (differentiable): the values of each time step (2, n, D), in turn, are passed with the
    hidden state (2, n, proj_size) to `compute_gates`, which returns the pre-activation gates (2, n, 4 * cell_size)
    for the layer's cell (`LstmWeights.cell`). Arguments other than these and results as in
    `ElmoImplementation.lstm_layer`. No value is read from a tensor: the steps queue on the device without waiting.
    """
    hidden, cell = initial_state
    outputs, final_hidden, final_cell = [], [], []
    for size, values in zip(batch_sizes, step_values, strict=True):
        if size < hidden.shape[1]:  # rows `size:` ended at the previous step: their state is final
            final_hidden.append(hidden[:, size:])
            final_cell.append(cell[:, size:])
            hidden, cell = hidden[:, :size], cell[:, :size]
        hidden, cell = weights.cell(compute_gates(values, hidden), cell)
        outputs.append(hidden)
    final_hidden.append(hidden)
    final_cell.append(cell)
    final_state = (torch.cat(final_hidden[::-1], dim=1), torch.cat(final_cell[::-1], dim=1))
    return torch.cat(outputs, dim=1), final_state


def eager_lstm_layer(
    weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
) -> tuple[torch.Tensor, LstmState]:
    """A biLM layer's call (`ElmoImplementation.lstm_layer`) by the reference recurrence, the input-to-gate products
    a chunk of steps at a time (`input_gate_steps`)."""
    bias = weights.gate_bias().unsqueeze(1)

    def compute_gates(step_input_gates: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(step_input_gates, hidden, weights.weight_hh) + bias  # the bias last, as the engine

    steps = input_gate_steps(weights, inputs, batch_sizes)
    return recurrence(weights, steps, compute_gates, batch_sizes, initial_state)


def reference_lstm_layer(
    weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
) -> tuple[torch.Tensor, LstmState]:
    """A biLM layer's call in TensorFlow's formulation, for checks: per step and per direction, `[x_t; h] @ W + b`."""
    weight = torch.cat([weights.weight_ih, weights.weight_hh], dim=1)
    bias = weights.gate_bias()

    def compute_gates(step_inputs: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.cat([step_inputs[d], hidden[d]], dim=-1) @ weight[d] + bias[d] for d in range(2)])

    # one split instead of a slice per step: a slice's backward would zero-fill the whole packed tensor each step
    return recurrence(weights, inputs.split(batch_sizes, dim=1), compute_gates, batch_sizes, initial_state)


def device_type(tensor: torch.Tensor) -> str:
    """The type of `tensor`'s device ("cpu", "cuda", ...)."""
    return tensor.device.type


class ElmoEagerImplementation:
    """
    The reference implementation ("eager"): the character CNN's products as PyTorch computes them and a biLM layer's
    recurrence by `eager_lstm_layer`; differentiable, on any device. It serves every call that no registered
    implementation supports (gradients, other devices, export). The convolutions run in exact float32 on CUDA too (not
    on cuDNN's default TF32); "eager_tf32" (`allow_tf32=True`) leaves them to cuDNN's setting. The LSTM's products
    follow PyTorch's matmul setting (`torch.backends.cuda.matmul`, float32 by default).
    """

    embeds_unique_words = True

    def __init__(self, allow_tf32: bool = False) -> None:
        self.allow_tf32 = allow_tf32

    def supports(self, call: ElmoCall) -> bool:
        return True

    @staticmethod
    def linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """`inputs @ weight.T + bias`: (..., in_features) -> (..., out_features), weight (out_features,
        in_features)."""
        return nn.functional.linear(inputs, weight, bias)

    def max_pooled_convolution(self, chars: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The convolution of `weight` (num_filters, char_embedding_dim, width) and `bias` (num_filters,) over `chars`
        (num_words, num_chars, char_embedding_dim), max-pooled over positions: (num_words, num_filters). On CUDA in
        exact float32 (`fp32_convolutions`) unless `allow_tf32`."""
        exact = device_type(chars) == "cuda" and not self.allow_tf32
        with fp32_convolutions() if exact else contextlib.nullcontext():
            return nn.functional.conv1d(chars.transpose(1, 2), weight, bias).max(dim=-1).values

    @staticmethod
    def lstm_layer(
        weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        return eager_lstm_layer(weights, inputs, batch_sizes, initial_state)


class ElmoReferenceImplementation(ElmoEagerImplementation):
    """
    The straightforward paths, for checking the others ("reference"): the character CNN on every word (no
    deduplication, word cache or token-embedding table; its products those of the default implementation) and every
    LSTM layer by `reference_lstm_layer` (per step and direction, in TensorFlow's formulation).
    """

    embeds_unique_words = False

    def supports(self, call: ElmoCall) -> bool:
        return call.part == "lstm"

    @staticmethod
    def lstm_layer(
        weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        return reference_lstm_layer(weights, inputs, batch_sizes, initial_state)


ELMO_EAGER = ElmoEagerImplementation()
