"""
The biLM on padded batches, for `torch.export` and ONNX: no Python value is read from a tensor, so the batch size and
the number of words stay symbolic, and the recurrence over time is one `scan` per layer (exported as ONNX `Scan`).

`ElmoModel.forward` takes this path while `is_exporting()` (`torch.compiler.is_exporting`); eager calls keep the
packed path, which never computes padding. Every row is the sequence `<S> words </S>` (its words in order, wherever
its attention mask puts them), left-aligned on `num_words + 2` time steps; the backward direction reads each row
reversed by index arithmetic on its length, and the LSTM states of a row stay frozen past its end. The character CNN
runs on the batch's words only (their count is data-dependent: a symbolic size from `nonzero`, never a Python int),
on all `max_characters_per_token` characters and without the eager path's deduplication (`torch.unique` or a cut of
the character dimension add more data-dependent sizes, which the ONNX exporter of torch 2.13 fails on around `scan`).
Stateless only: every row starts from zero states. Imports only torch, `elmo_call` and `lstm_cell` (shipped as remote
code beside modeling_elmo.py).
"""

from __future__ import annotations  # annotations of the step functions are not evaluated while Dynamo traces

from collections.abc import Callable

import torch
from torch import nn

from .elmo_call import is_exporting
from .lstm_cell import LstmState, LstmWeights

# (hidden, cell, *step inputs, *constants) -> (hidden, cell, step output)
StepFn = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def _scan(
    step: StepFn, init: LstmState, xs: tuple[torch.Tensor, ...], constants: tuple[torch.Tensor, ...]
) -> torch.Tensor:
    """
    `step` over the first dimension of every tensor of `xs` (time, ...), carrying `init`, with `constants` passed
    to every step; returns the step outputs stacked, (time, ...).

    While exporting this is one `scan` higher-order op (ONNX `Scan`). In non-strict export (the default, and the
    ONNX exporter's) its operator is called directly, with the constants as explicit inputs: the public
    `torch._higher_order_ops.scan.scan` would first trace `step` with Dynamo, whose fresh symbols for the batch size
    are merged with any static size of equal value (the 2 directions, ...) and then specialise the exported batch
    size. Under Dynamo (`strict=True`) the public `scan`, which Dynamo traces itself. Eagerly, a Python loop.
    """
    if is_exporting() and torch.compiler.is_dynamo_compiling():  # strict export: Dynamo traces `scan` as it is
        from torch._higher_order_ops.scan import scan

        def combine(carry: LstmState, step_xs: tuple[torch.Tensor, ...]) -> tuple[LstmState, torch.Tensor]:
            hidden, cell, output = step(*carry, *step_xs, *constants)
            return (hidden, cell), output

        return scan(combine, init, xs)[1]
    if is_exporting():
        from torch._higher_order_ops.scan import scan_op

        def flat_step(*args: torch.Tensor) -> list[torch.Tensor]:
            return list(step(*args))

        hidden, cell, outputs = scan_op(flat_step, list(init), list(xs), tuple(constants))
        return outputs
    (hidden, cell), outputs = init, []
    for step_xs in zip(*(x.unbind(0) for x in xs), strict=True):
        hidden, cell, output = step(hidden, cell, *step_xs, *constants)
        outputs.append(output)
    return torch.stack(outputs)


def _lstm_layer(layer: LstmWeights, inputs: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """
    One biLM layer, both directions, on time-major padded inputs (each direction in its own time order).

    Args:
        layer: the layer's weights and settings (`ElmoLstmLayer.weights()`).
        inputs: (time, 2, batch, input_size).
        active: (time, 1, batch, 1) bool: whether step `t` of a row is one of its sequence's steps.

    Returns:
        Outputs (time, 2, batch, proj_size); after a row's end its state is frozen (its outputs there are unused).
    """
    num_steps, _, batch_size, input_size = inputs.shape
    cell_size = layer.weight_proj.shape[1]
    flat_inputs = inputs.transpose(0, 1).reshape(2, num_steps * batch_size, input_size)
    input_gates = torch.bmm(flat_inputs, layer.weight_ih).view(2, num_steps, batch_size, 4 * cell_size)
    input_gates = input_gates.transpose(0, 1).contiguous()  # (time, 2, batch, 4 * cell)

    def step(
        hidden: torch.Tensor,
        cell: torch.Tensor,
        step_gates: torch.Tensor,
        step_active: torch.Tensor,
        weight_hh: torch.Tensor,
        weight_proj: torch.Tensor,
        bias: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden (2, batch, proj), cell (2, batch, cell), step_gates (2, batch, 4 * cell), step_active (1, batch,
        1) -> frozen hidden, frozen cell, new hidden (2, batch, proj): the layer's `cell`, with the weights passed in
        as the scan's constants."""
        gates = (step_gates + torch.bmm(hidden, weight_hh)) + bias  # the bias last, as the packed path
        new_hidden, new_cell = layer.cell(gates, cell, lambda cell_output: torch.bmm(cell_output, weight_proj))
        return torch.where(step_active, new_hidden, hidden), torch.where(step_active, new_cell, cell), new_hidden

    init = (
        inputs.new_zeros(2, batch_size, layer.weight_hh.shape[1]),
        inputs.new_zeros(2, batch_size, cell_size),
    )
    constants = (layer.weight_hh, layer.weight_proj, layer.gate_bias().unsqueeze(1))  # bias (2, 1, 4 * cell)
    return _scan(step, init, (input_gates, active), constants)


def padded_bilm_layers(
    char_encoder: nn.Module,
    bilm: nn.Module,
    boundary_char_ids: torch.Tensor,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """
    Every layer of the biLM, computed on the padded batch.

    Args:
        char_encoder: the `ElmoCharacterEncoder` ((words, chars) -> (words, projection_dim)).
        bilm: the `ElmoBiLm` (`layers`, `use_skip_connections`).
        boundary_char_ids: (2, max_characters_per_token): `<S>`, `</S>`.
        input_ids: (batch, num_words, max_characters_per_token) character ids.
        attention_mask: (batch, num_words), 1 for words and 0 for padding, any padding side.

    Returns:
        `len(bilm.layers) + 1` tensors (batch, num_words, 2 * projection_dim), zero at padding: the token layer
        `[x; x]`, then `[forward; backward]` of every LSTM layer, as `ElmoBiLm.forward` with `all_layers=True`.
    """
    batch_size, num_words, num_chars = input_ids.shape
    mask = attention_mask.bool()
    lengths = mask.sum(dim=1) + 2  # (batch,) steps of `<S> words </S>`
    num_steps = num_words + 2
    # The character CNN on the words only (a data-dependent count: NonZero in ONNX), not on padding.
    word_rows = mask.reshape(-1).nonzero().squeeze(1)  # (num_real_words,) flat index into batch x words
    real_words = input_ids.reshape(-1, num_chars).index_select(0, word_rows)
    embeddings = char_encoder(torch.cat([real_words, boundary_char_ids]))
    dim = embeddings.shape[-1]
    words = embeddings.new_zeros(batch_size * num_words, dim).index_copy(0, word_rows, embeddings[:-2])
    words = words.view(batch_size, num_words, dim)
    bos, eos = embeddings[-2], embeddings[-1]
    word_mask = mask.unsqueeze(-1)  # (batch, words, 1)
    layers = [torch.where(word_mask, torch.cat([words, words], dim=-1), 0.0)]

    # Sequence position of each word (its rank in its row, 1-based); padding columns go past the end, each to its
    # own place (num_steps + column), and are cut off.
    rank = mask.long().cumsum(dim=1)  # (batch, words)
    columns = torch.arange(num_words, device=input_ids.device)
    target = torch.where(mask, rank, num_steps + columns)
    sequence = words.new_zeros(batch_size, num_steps + num_words, dim)
    sequence = sequence.scatter(1, target.unsqueeze(-1).expand(-1, -1, dim), words)[:, :num_steps]
    steps = torch.arange(num_steps, device=input_ids.device)  # (time,)
    last = lengths.unsqueeze(1) - 1  # (batch, 1): position of `</S>`
    sequence = torch.where((steps == 0).unsqueeze(-1), bos, sequence)
    sequence = torch.where((steps == last).unsqueeze(-1), eos, sequence)  # (batch, time, dim)

    # The backward direction's step t reads position length - 1 - t (clamped past the end, where it is unused).
    reverse = (last - steps).clamp(min=0)  # (batch, time)
    backward = sequence.gather(1, reverse.unsqueeze(-1).expand(-1, -1, dim))
    inputs = torch.stack([sequence, backward]).permute(2, 0, 1, 3)  # (time, 2, batch, dim)
    active = (steps.unsqueeze(1) < lengths.unsqueeze(0)).view(num_steps, 1, batch_size, 1)  # (time, 1, batch, 1)

    # Where each word column's outputs are: forward step = rank, backward step = length - 1 - rank.
    forward_index = torch.where(mask, rank, 0).unsqueeze(-1)  # (batch, words, 1)
    backward_index = torch.where(mask, last - rank, 0).unsqueeze(-1)
    for index, layer in enumerate(bilm.layers):
        outputs = _lstm_layer(layer.weights(), inputs, active)
        if bilm.use_skip_connections and index > 0:
            outputs = outputs + inputs
        proj = outputs.shape[-1]
        forward_words = outputs[:, 0].transpose(0, 1).gather(1, forward_index.expand(-1, -1, proj))
        backward_words = outputs[:, 1].transpose(0, 1).gather(1, backward_index.expand(-1, -1, proj))
        layers.append(torch.where(word_mask, torch.cat([forward_words, backward_words], dim=-1), 0.0))
        inputs = outputs
    return tuple(layers)
