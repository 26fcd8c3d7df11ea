"""Opt-in compressed recurrent and projection weights (`cpu_int8`, `cpu_bf16`; `compress_lstm_weights` of
`model_inputs`): the products against bounds derived from their rounding, one LSTM step against the bound propagated
through the cell, whole models against float32, and the runtime-only nature of the choice (float32 restored exactly,
training untouched, snapshots followed, nothing saved)."""

import copy
import json
import pickle

import pytest
import torch
from model_inputs import char_ids as _char_ids
from model_inputs import compress_lstm_weights, drop_thread_probe_calls, engine_of, reference_implementation
from model_inputs import random_model as _model

from modeling_elmo import ElmoModel, ElmoTokenizer
from modeling_elmo.conversion.export import export_model
from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from modeling_elmo.engine.compressed_linear import (
    INT8_K_MULTIPLE,
    compressed_linear,
    int8_activation_dtype,
    quantize_int8,
)
from modeling_elmo.formats.original_checkpoint import load_original_checkpoint
from modeling_elmo.modeling_elmo import ElmoLstmLayer

WORDS = "the bank closed its doors . river boats go by Zürich naïve café ! a , of".split()
BF16_UNIT_ROUNDOFF = 2.0**-8  # round to nearest with 8 significant bits: relative error <= 2^-8
FP32_UNIT_ROUNDOFF = 2.0**-24
# Whole models: no useful rigorous bound exists (over many steps a recurrence may amplify a perturbation), so this is
# a margin: ~3x the largest error measured on the fixture and random checkpoints (0.018, outputs up to 7). A broken
# path (wrong scale, transposed or stale weights) is off by O(1).
MODEL_TOLERANCE = 0.05


def _sentences(seed: int, count: int, max_words: int) -> list[list[str]]:
    generator = torch.Generator().manual_seed(seed)
    sentences = []
    for _ in range(count):
        length = int(torch.randint(1, max_words + 1, (1,), generator=generator))
        sentences.append([WORDS[int(i)] for i in torch.randint(len(WORDS), (length,), generator=generator)])
    return sentences


def _layers(model: ElmoModel, ids: torch.Tensor, grad: bool = False) -> tuple[torch.Tensor, ...]:
    with torch.set_grad_enabled(grad):
        return model(ids, output_hidden_states=True).hidden_states


def _max_difference(left: tuple[torch.Tensor, ...], right: tuple[torch.Tensor, ...]) -> float:
    """Max abs difference over all layers; NaN if any value is NaN (compare with `<=`, which NaN fails)."""
    return float(torch.stack([(a - b).detach().abs().amax() for a, b in zip(left, right, strict=True)]).amax())


def _stored_weight(weight: torch.Tensor, compression: str) -> torch.Tensor:
    """The float64 values the compressed product multiplies by, (in_features, out_features)."""
    if compression == "bf16":
        return weight.to(torch.bfloat16).double()
    quantized, scales = quantize_int8(weight, int8_activation_dtype())
    return (quantized[:, : weight.shape[0]].double() * scales.double().unsqueeze(1)).t()


def _product_bound(inputs: torch.Tensor, weight: torch.Tensor, compression: str) -> torch.Tensor:
    """
    Elementwise bound on |compressed(inputs) - inputs @ weight| for inputs (..., K) and weight (K, N), derived from
    the rounding steps, with W~ the stored weight (`_stored_weight`), a the activations as the kernel reads them and
    S = |inputs| @ |W~|:
    - weight rounding: int8, per output channel n with scale s_n >= max_k |W[k, n]| / 127 and |q| <= 127: |W - W~|
      <= s_n / 2, so the product moves by <= s_n / 2 * sum_k |x_k|; bf16: |W - W~| <= u |W| (u = 2^-8), <= u |x| @ |W|;
    - activation rounding to bf16 (where the kernel reads bf16): <= u_a S;
    - float32 accumulation of K exact products (int8 x bf16 x bf16 scale, and bf16 x bf16, fit in 24 bits):
      <= gamma_K (1 + u_a) S with gamma_K = K u32 / (1 - K u32); with float32 activations the products themselves
      round too, covered by gamma_{K+2};
    - output rounding to bf16 (or the final scale multiply in float32): <= u_o (1 + u_a)(1 + gamma) S.
    """
    inputs, weight = inputs.double(), weight.double()
    stored = _stored_weight(weight, compression)
    absolute = inputs.abs()
    total = absolute @ stored.abs()
    reads_bf16 = compression == "bf16" or int8_activation_dtype() == torch.bfloat16
    unit = BF16_UNIT_ROUNDOFF if reads_bf16 else FP32_UNIT_ROUNDOFF
    count = weight.shape[0] + 2
    gamma = count * FP32_UNIT_ROUNDOFF / (1 - count * FP32_UNIT_ROUNDOFF)
    rounding = total * (unit + gamma * (1 + unit) + unit * (1 + unit) * (1 + gamma))
    if compression == "bf16":
        return BF16_UNIT_ROUNDOFF * (absolute @ weight.abs()) + rounding
    scales = quantize_int8(weight.float(), int8_activation_dtype())[1].double()
    return absolute.sum(dim=-1, keepdim=True) * scales / 2 + rounding


@pytest.mark.parametrize("scale_dtype", [torch.bfloat16, torch.float32])
def test_int8_quantization_is_per_channel_round_to_nearest(scale_dtype):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(24, 7, generator=generator) * torch.logspace(-3, 1, 7)  # (in, out): channels of any scale
    weight[:, 3] = 0.0  # an all-zero channel
    quantized, scales = quantize_int8(weight, scale_dtype)
    assert quantized.dtype == torch.int8 and scales.dtype == scale_dtype
    assert quantized.shape == (7, 32) and quantized.shape[1] % INT8_K_MULTIPLE == 0 and quantized.is_contiguous()
    assert not quantized[:, 24:].any()  # zero padding of K
    assert int(quantized.abs().max()) <= 127
    limit = weight.abs().amax(dim=0) / 127
    channels = limit > 0
    assert bool((scales.float()[channels] >= limit[channels]).all())
    # rounded up by at most 2^-7 and bf16's 2^-8: no coarser than it needs to be
    assert bool((scales.float()[channels] <= limit[channels] * (1 + 2**-7) * (1 + 2**-8)).all())
    assert int(quantized[3].abs().max()) == 0
    error = (quantized[:, :24].double() * scales.double().unsqueeze(1)).t() - weight.double()
    assert bool((error.abs() <= scales.double() / 2 * (1 + 1e-6)).all())


def test_int8_channel_with_nan_or_infinity_stays_non_finite():
    weight = torch.ones(32, 4)
    weight[0, 1], weight[5, 2] = float("nan"), float("inf")
    quantized, scales = quantize_int8(weight, int8_activation_dtype())
    output = compressed_linear(weight, "int8", 64)(torch.ones(2, 32))
    assert scales.float()[[1, 2]].isnan().all() and torch.isfinite(scales.float()[[0, 3]]).all()
    assert not torch.isfinite(output[:, 1:3]).any() and torch.isfinite(output[:, [0, 3]]).all()


@pytest.mark.parametrize("compression", ["int8", "bf16"])
@pytest.mark.parametrize("shape", [(1, 512, 2048), (5, 4096, 64), (3, 24, 40), (2, 7, 5)], ids=str)
@pytest.mark.parametrize("onednn", [True, False])
def test_compressed_product_within_derived_bound(monkeypatch, compression, shape, onednn):
    """
    Every element of the compressed product within `_product_bound` of the exact product, for K that the kernels
    take as it is and K that must be padded (24, 7), 2-D and 3-D inputs; and the bound is not loose by orders of
    magnitude (the rounding of the weights shows).
    """
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", onednn)
    rows, in_features, out_features = shape
    generator = torch.Generator().manual_seed(sum(shape))
    weight = torch.randn(in_features, out_features, generator=generator) / in_features**0.5
    weight *= torch.logspace(-2, 0, out_features)  # output channels of different scales: per-channel scales matter
    for inputs in (torch.randn(rows, in_features, generator=generator), torch.randn(1, rows, in_features) * 3):
        found = compressed_linear(weight, compression, 64)(inputs)
        assert found.dtype == torch.float32 and found.shape == (*inputs.shape[:-1], out_features)
        error = (found.double() - inputs.double() @ weight.double()).abs()
        bound = _product_bound(inputs, weight, compression)
        assert bool((error <= bound * (1 + 1e-9)).all()), float((error / bound).max())
        assert float((error / bound).max()) > 1e-2  # the bound is not loose by orders of magnitude


def _one_step_bound(layer: ElmoLstmLayer, inputs: torch.Tensor, state, compression: str):
    """
    One time step of `layer` computed exactly (float64) and the bound on how far the compressed step may be from it:
    the gates move by at most the recurrent product's bound; sigmoid is 1/4- and tanh 1-Lipschitz, clipping
    1-Lipschitz, the initial cell is exact, so with d the gate bounds
    |dc| <= d_f |c0| / 4 + d_i / 4 + d_j and |d(o * tanh c)| <= d_o / 4 + |dc|; the hidden state then moves by at
    most the projection's bound (on inputs as large as they may have become) plus |d(o * tanh c)| @ |W_proj|.
    """
    hidden, cell = (tensor.double() for tensor in state)
    count = layer.weight_ih.shape[1] + 3
    float32_gamma = count * FP32_UNIT_ROUNDOFF / (1 - count * FP32_UNIT_ROUNDOFF)
    exact_hidden, exact_cell, hidden_bound, cell_bound = [], [], [], []
    for d in range(2):
        weight_hh, weight_proj = layer.weight_hh[d].detach(), layer.weight_proj[d].detach()
        weight_ih, bias = layer.weight_ih[d].detach().double(), layer.gate_bias()[d].detach().double()
        input_gates = inputs[d].double() @ weight_ih
        gates = input_gates + hidden[d] @ weight_hh.double() + bias
        # the compressed recurrent product, plus the float32 input-to-gate product and the two float32 additions
        float32_terms = inputs[d].double().abs() @ weight_ih.abs() + bias.abs() + gates.abs()
        gate_bound = _product_bound(hidden[d], weight_hh, compression) * (1 + 2 * float32_gamma)
        gate_bound = gate_bound + float32_gamma * float32_terms
        i, j, f, o = gates.chunk(4, dim=-1)
        d_i, d_j, d_f, d_o = gate_bound.chunk(4, dim=-1)
        new_cell = torch.sigmoid(f) * cell[d] + torch.sigmoid(i) * torch.tanh(j)
        if layer.cell_clip:
            new_cell = new_cell.clamp(-layer.cell_clip, layer.cell_clip)
        output = torch.sigmoid(o) * torch.tanh(new_cell)
        d_cell = d_f * cell[d].abs() / 4 + d_i / 4 + d_j
        d_output = d_o / 4 + d_cell
        new_hidden = output @ weight_proj.double()
        if layer.proj_clip:
            new_hidden = new_hidden.clamp(-layer.proj_clip, layer.proj_clip)
        largest_input = output.abs() + d_output
        bound = _product_bound(largest_input, weight_proj, compression) + d_output @ weight_proj.double().abs()
        exact_hidden.append(new_hidden)
        exact_cell.append(new_cell)
        hidden_bound.append(bound)
        cell_bound.append(d_cell)
    return (torch.stack(exact_hidden), torch.stack(exact_cell)), (torch.stack(hidden_bound), torch.stack(cell_bound))


@pytest.mark.parametrize("compression", ["int8", "bf16"])
@pytest.mark.parametrize(
    "architecture",
    [{"dim": 512, "projection_dim": 64}, {"dim": 256, "projection_dim": 48, "cell_clip": 0.5, "proj_clip": 0.25}],
    ids=["wide", "clipping"],
)
def test_one_lstm_step_within_propagated_bound(random_checkpoint, compression, architecture):
    model = _model(random_checkpoint, seed=3, filters=[[1, 8], [2, 8]], **architecture)
    compress_lstm_weights(model, compression)
    layer, batch = model.bilm.layers[0], 6
    generator = torch.Generator().manual_seed(4)
    cells, size = model.config.lstm_cell_size, model.config.projection_dim
    inputs = torch.randn(2, batch, size, generator=generator)
    state = (torch.randn(2, batch, size, generator=generator), torch.randn(2, batch, cells, generator=generator))
    with torch.no_grad():
        outputs, (final_hidden, final_cell) = layer(inputs, [batch], state)
        (hidden, cell), (hidden_bound, cell_bound) = _one_step_bound(layer, inputs, state, compression)
    slack = 1e-5  # float32 rounding of the step's other operations (the float32 path is within 1e-6 of float64)
    assert torch.equal(outputs, final_hidden)
    assert bool(((outputs.double() - hidden).abs() <= hidden_bound + slack).all())
    assert bool(((final_cell.double() - cell).abs() <= cell_bound + slack).all())
    assert float((outputs.double() - hidden).abs().max()) > 1e-5  # compressed: not the float32 products


@pytest.mark.parametrize("compression", ["int8", "bf16"])
def test_fixture_model_close_to_float32(converted_fixture, fixture_dir, compression):
    with open(fixture_dir / "sentences.json") as handle:
        sentences = [sentence for batch in json.load(handle) for sentence in batch]
    model = ElmoModel.from_pretrained(converted_fixture).eval()
    batch = ElmoTokenizer.from_pretrained(converted_fixture)(
        sentences, is_split_into_words=True, padding=True, return_tensors="pt"
    )
    with torch.inference_mode():
        expected = model(**batch, output_hidden_states=True).hidden_states
        compress_lstm_weights(model, compression)
        found = model(**batch, output_hidden_states=True).hidden_states
    assert torch.equal(found[0], expected[0])  # the character CNN is not compressed
    assert 1e-4 < _max_difference(found, expected) <= MODEL_TOLERANCE


@pytest.mark.parametrize("compression", ["int8", "bf16"])
def test_random_model_close_to_float32_and_used_per_direction(random_checkpoint, monkeypatch, compression):
    model = _model(random_checkpoint, seed=5, dim=256, projection_dim=32, cell_clip=1.0)
    ids = _char_ids(_sentences(seed=6, count=7, max_words=20))
    expected = _layers(model, ids)
    calls = []
    if compression == "int8":
        kernel = torch.ops.aten._weight_int8pack_mm
        monkeypatch.setattr(torch.ops.aten, "_weight_int8pack_mm", lambda *args: calls.append(1) or kernel(*args))
        drop_thread_probe_calls(monkeypatch, calls)
    compress_lstm_weights(model, compression)
    found = _layers(model, ids)
    assert 1e-5 < _max_difference(found, expected) <= MODEL_TOLERANCE
    if compression == "int8":  # per layer, direction and time step: the recurrent and the projection product
        num_steps = int((ids != 0).any(dim=-1).sum(dim=1).max()) + 2
        assert len(calls) == len(model.bilm.layers) * 2 * num_steps * 2


def test_none_restores_exact_float32_and_reference_path_is_untouched(random_checkpoint):
    model = _model(random_checkpoint, seed=7)
    ids = _char_ids(_sentences(seed=8, count=4, max_words=12))
    expected = _layers(model, ids)
    with reference_implementation(model):
        reference = _layers(model, ids)
    for compression in ("int8", "bf16"):
        compress_lstm_weights(model, compression)
        assert _max_difference(_layers(model, ids), expected) > 0
        with reference_implementation(model):
            assert _max_difference(_layers(model, ids), reference) == 0
    compress_lstm_weights(model, None)
    assert all(engine_of(layer).compression is None for layer in model.bilm.layers)
    assert _max_difference(_layers(model, ids), expected) == 0


def test_training_mode_runs_uncompressed_without_gradients_too(random_checkpoint):
    """The first pass of reentrant gradient checkpointing runs without gradients in training mode: float32 there."""
    model = _model(random_checkpoint, seed=22)
    ids = _char_ids(_sentences(seed=23, count=3, max_words=10))
    expected = _layers(model.train(), ids)
    compress_lstm_weights(model, "int8")
    assert _max_difference(_layers(model, ids), expected) == 0
    assert _max_difference(_layers(model.eval(), ids), expected) > 0


def test_training_path_keeps_float32_weights(random_checkpoint):
    """With gradients the differentiable path runs on the float32 parameters: same outputs and gradients."""
    model = _model(random_checkpoint, seed=9)
    ids = _char_ids(_sentences(seed=10, count=3, max_words=10))
    results = []
    for compression in (None, "int8"):
        compress_lstm_weights(model, compression)
        model.zero_grad()
        layers = _layers(model, ids, grad=True)
        sum(layer.pow(2).sum() for layer in layers).backward()
        results.append((layers, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}))
    assert _max_difference(results[0][0], results[1][0]) == 0
    assert all(torch.equal(results[0][1][name], grad) for name, grad in results[1][1].items())


def _fresh_compressed_outputs(model: ElmoModel, ids: torch.Tensor, compression: str) -> tuple[torch.Tensor, ...]:
    """Outputs of an independent copy of `model` compressed from its current weights."""
    clone = copy.deepcopy(model)
    compress_lstm_weights(clone, compression)
    for layer in clone.bilm.layers:
        ALL_ELMO_IMPLEMENTATIONS.release(layer)
    return _layers(clone, ids)


@pytest.mark.parametrize("compression", ["int8", "bf16"])
def test_compressed_copies_follow_weight_updates(random_checkpoint, compression):
    """Weight changes that leave no trace in version counters still renew the compressed copies (`WeightSnapshot`)."""
    model = _model(random_checkpoint, seed=11)
    other = _model(random_checkpoint, seed=12).state_dict()
    ids = _char_ids(_sentences(seed=13, count=4, max_words=12))
    compress_lstm_weights(model, compression)

    def update_in_place():
        with torch.no_grad():
            model.bilm.layers[1].weight_hh[0].mul_(1.5)

    def update_through_data():
        model.bilm.layers[0].weight_proj.data.add_(0.01)

    def fused_optimizer_step():
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
        model(ids).last_hidden_state.pow(2).mean().backward()
        optimizer.step()

    def replace_input_weights_only():  # a new tensor for weight_ih; the recurrent and projection weights unchanged
        state = {name: value.clone() for name, value in model.state_dict().items()}
        state["bilm.layers.0.weight_ih"] = other["bilm.layers.0.weight_ih"].clone()
        model.load_state_dict(state, assign=True)

    for change in (update_in_place, update_through_data, fused_optimizer_step, replace_input_weights_only):
        before = _layers(model, ids)
        assert _max_difference(before, _layers(model, ids)) == 0  # served from the kept copies
        change()
        expected = _fresh_compressed_outputs(model, ids, compression)
        assert _max_difference(before, expected) > 1e-4, change.__name__  # the change shows
        assert _max_difference(_layers(model, ids), expected) == 0, change.__name__


@pytest.mark.parametrize("compression", ["int4", "INT8", "bfloat16", "", 8, torch.bfloat16, ["int8"]])
def test_bad_compression_is_refused(random_checkpoint, compression):
    model = _model(random_checkpoint, seed=14)
    with pytest.raises(ValueError, match=r"compression must be one of 'int8', 'bf16' or None, got"):
        compress_lstm_weights(model, compression)
    assert all(engine_of(layer).compression is None for layer in model.bilm.layers)


def test_compression_needs_a_float32_cpu_model(random_checkpoint):
    model = _model(random_checkpoint, seed=15).double()
    with pytest.raises(ValueError, match=r"needs the float32 model on a CPU; the LSTM weights are torch.float64"):
        compress_lstm_weights(model, "int8")
    compress_lstm_weights(model, None)  # going back to float32 is always allowed


def test_compression_is_not_saved(random_checkpoint, tmp_path):
    """`save_pretrained` writes the float32 parameters and no trace of the runtime choice."""
    model = _model(random_checkpoint, seed=16)
    ids = _char_ids(_sentences(seed=17, count=3, max_words=8))
    expected = _layers(model, ids)
    state = {name: value.clone() for name, value in model.state_dict().items()}
    compress_lstm_weights(model, "int8")
    _layers(model, ids)  # the compressed copies exist
    model.save_pretrained(tmp_path)
    assert "compress" not in (tmp_path / "config.json").read_text()
    loaded = ElmoModel.from_pretrained(tmp_path).eval()
    assert all(engine_of(layer).compression is None for layer in loaded.bilm.layers)
    assert loaded.state_dict().keys() == state.keys()
    for name, value in loaded.state_dict().items():
        assert value.dtype == state[name].dtype and torch.equal(value, state[name]), name
    assert _max_difference(_layers(loaded, ids), expected) == 0


def test_compressed_model_can_be_copied_and_pickled(random_checkpoint):
    model = _model(random_checkpoint, seed=18)
    ids = _char_ids(_sentences(seed=19, count=3, max_words=10))
    compress_lstm_weights(model, "int8")
    expected = _layers(model, ids)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert all(engine_of(layer).compression == "int8" for layer in clone.bilm.layers)
        assert _max_difference(_layers(clone, ids), expected) == 0


def test_autocast_and_float64_run_uncompressed(random_checkpoint):
    """Where the compressed products do not apply (CPU autocast, other dtypes), the model runs as without them."""
    model = _model(random_checkpoint, seed=20)
    ids = _char_ids(_sentences(seed=21, count=3, max_words=10))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected_autocast = _layers(model, ids)
    compress_lstm_weights(model, "int8")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _max_difference(_layers(model, ids), expected_autocast) == 0
    uncompressed = copy.deepcopy(model)
    compress_lstm_weights(uncompressed, None)
    expected = _layers(uncompressed.double(), ids)
    assert _max_difference(_layers(model.double(), ids), expected) == 0


def test_switching_compressions_gives_what_a_fresh_compression_does(random_checkpoint):
    """int8 -> bf16 -> int8 on one model: the same outputs as int8 on a copy that was never compressed otherwise."""
    model = _model(random_checkpoint, seed=24)
    ids = _char_ids(_sentences(seed=25, count=3, max_words=9))
    fresh = copy.deepcopy(model)
    compress_lstm_weights(fresh, "int8")
    for compression in ("int8", "bf16", "int8", "int8"):
        compress_lstm_weights(model, compression)
        _layers(model, ids)
    assert _max_difference(_layers(model, ids), _layers(fresh, ids)) == 0


def test_a_compressed_model_exports_its_float32_weights(random_checkpoint, tmp_path):
    """Saved after compressed calls, then `elmo-export`: the original format holds the float32 parameters, bit for
    bit (the compressed copies exist only at run time)."""
    model = _model(random_checkpoint, seed=26)
    compress_lstm_weights(model, "int8")
    _layers(model, _char_ids(_sentences(seed=27, count=2, max_words=6)))
    model.save_pretrained(tmp_path / "saved")
    export_model(tmp_path / "saved", tmp_path / "original")
    _, state = load_original_checkpoint(
        tmp_path / "original" / "options.json", tmp_path / "original" / "lm_weights.hdf5"
    )
    expected = model.state_dict()
    expected["char_encoder.char_embeddings.weight"][0] = 0.0  # the padding row, which the original format lacks
    for name, tensor in state.items():
        assert torch.equal(tensor, expected[name]), name
