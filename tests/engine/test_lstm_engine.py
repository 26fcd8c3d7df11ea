"""The CPU inference engine (`lstm_engine`) against the layer's reference recurrence, and its defaults being
predictable: the same bits whatever the load and however many Python threads call the model, and no process-wide
setting changed by a call."""

import subprocess
import sys
import threading

import pytest
import torch
from model_inputs import char_ids as _char_ids
from model_inputs import engine_of, record_onednn_calls, set_lstm_inference
from model_inputs import random_model as _model
from test_fast_paths import ARCHITECTURE_CASES, _max_difference, _sentences

from modeling_elmo import ElmoModel
from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS, resolve_implementation
from modeling_elmo.engine.cpu_linear import onednn_linear, onednn_linear_applies
from modeling_elmo.engine.lstm_engine import LstmEngine
from modeling_elmo.engine.weight_fingerprint import WeightFingerprint
from modeling_elmo.reference_implementations import ELMO_EAGER

TOLERANCE = 1e-6


def _disable_engine(model: ElmoModel) -> None:
    model.set_implementation("eager")


def _engine_applies(layer: torch.nn.Module, inputs: torch.Tensor) -> bool:
    """Whether the default implementation of `layer`'s call on `inputs` is the CPU engine."""
    return (
        resolve_implementation(None, layer, inputs, ELMO_EAGER)
        is ALL_ELMO_IMPLEMENTATIONS.get_interface("cpu", None)[0]
    )


def _hidden_states(model: ElmoModel, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        return model(ids, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("architecture", ARCHITECTURE_CASES.values(), ids=ARCHITECTURE_CASES.keys())
def test_engine_and_reference_recurrence_agree(random_checkpoint, monkeypatch, architecture):
    model = _model(random_checkpoint, seed=30, **architecture)
    ids = _char_ids(_sentences(seed=31, count=7, max_words=20))
    runs = []
    run = LstmEngine.run
    monkeypatch.setattr(LstmEngine, "run", lambda self, *args: runs.append(1) or run(self, *args))
    with_engine = _hidden_states(model, ids)
    assert len(runs) == len(model.bilm.layers)
    _disable_engine(model)
    without_engine = _hidden_states(model, ids)
    assert len(runs) == len(model.bilm.layers)  # the reference recurrence only
    assert _max_difference(with_engine, without_engine) <= TOLERANCE


def test_engine_runs_on_cpu_only_and_without_gradients(random_checkpoint):
    layer = _model(random_checkpoint, seed=37).bilm.layers[0]
    inputs = torch.zeros(2, 3, layer.weight_ih.shape[1])
    with torch.no_grad():
        assert _engine_applies(layer, inputs)
        assert not _engine_applies(layer, inputs.to("meta"))  # any other device: the reference recurrence
    with torch.enable_grad():
        assert not _engine_applies(layer, inputs)  # the layer's parameters require gradients
        assert _engine_applies(layer.requires_grad_(False), inputs)
        assert not _engine_applies(layer, inputs.requires_grad_())


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_calls_change_no_thread_setting(random_checkpoint, monkeypatch, two_threads):
    """By default no call sets the thread count (a process-wide setting), not even for a moment."""
    model = _model(random_checkpoint, seed=32)
    ids = _char_ids(_sentences(seed=33, count=5, max_words=12))
    settings = []
    set_num_threads = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda count: settings.append(count) or set_num_threads(count))
    for _ in range(3):
        _hidden_states(model, ids)
    assert settings == [] and torch.get_num_threads() == 2


def test_concurrent_calls_give_the_serial_bits(random_checkpoint, two_threads):
    model = _model(random_checkpoint, seed=34, dim=256, projection_dim=64)
    batches = [_char_ids(_sentences(seed=seed, count=6, max_words=15)) for seed in range(4)]
    serial = [_hidden_states(model, ids) for ids in batches]
    found, errors = {}, []

    def call(index: int) -> None:
        try:
            for _ in range(3):
                found.setdefault(index, []).append(_hidden_states(model, batches[index]))
        except Exception as error:  # noqa: BLE001 (reported by the main thread)
            errors.append(error)

    workers = [threading.Thread(target=call, args=(index,)) for index in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    for index, expected in enumerate(serial):
        for layers in found[index]:
            assert all(torch.equal(a, b) for a, b in zip(layers, expected, strict=True))


BUSY_LOOP = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"


@pytest.mark.integration
def test_same_bits_beside_a_busy_process(random_checkpoint, two_threads):
    """A process keeping a CPU busy changes nothing in the outputs (no timing decides anything)."""
    model = _model(random_checkpoint, seed=35, dim=256, projection_dim=64)
    ids = _char_ids(_sentences(seed=36, count=6, max_words=15))
    idle = _hidden_states(model, ids)
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        beside_busy = [_hidden_states(_model(random_checkpoint, seed=35, dim=256, projection_dim=64), ids)]
        beside_busy.append(_hidden_states(model, ids))
    finally:
        busy.kill()
        busy.wait()
    for layers in beside_busy:
        assert all(torch.equal(a, b) for a, b in zip(layers, idle, strict=True))


def test_views_keep_no_derived_copy_of_the_weights(random_checkpoint):
    """`products="views"` reads the parameters as they are: nothing derived from them is kept, so nothing can go
    stale and no copy costs memory (the default and `products="packed"` keep packed weights and a fingerprint)."""
    model = _model(random_checkpoint, seed=38)
    set_lstm_inference(model, "views")
    ids = _char_ids(_sentences(seed=39, count=3, max_words=10))
    _hidden_states(model, ids)
    assert all(engine_of(layer)._derived is None for layer in model.bilm.layers)


def test_default_keeps_packed_weights_with_a_fingerprint_not_a_copy(random_checkpoint):
    """Where oneDNN applies, the default packs the recurrent and projection weights once and keeps them with a
    fingerprint of the weights' bits (no copy of the weights): the next call of the same weights packs nothing."""
    if not _onednn_applies():
        pytest.skip("packed oneDNN weights need oneDNN on an x86 CPU")
    model = _model(random_checkpoint, seed=38)
    ids = _char_ids(_sentences(seed=39, count=3, max_words=10))
    _hidden_states(model, ids)
    kept = [engine_of(layer)._derived for layer in model.bilm.layers]
    assert all(isinstance(derived[0], WeightFingerprint) for derived in kept)
    _hidden_states(model, ids)
    assert all(engine_of(layer)._derived is derived for layer, derived in zip(model.bilm.layers, kept, strict=True))


def _onednn_applies() -> bool:
    return onednn_linear_applies(torch.zeros(1), torch.zeros(1))


@pytest.mark.parametrize("products", ["onednn", "packed", "bmm", "auto"])
def test_every_product_setting_agrees_with_the_reference_recurrence(random_checkpoint, products):
    if products == "packed" and not _onednn_applies():
        pytest.skip("packed oneDNN weights need oneDNN on an x86 CPU")
    model = _model(random_checkpoint, seed=40, dim=256, projection_dim=64)
    ids = _char_ids(_sentences(seed=41, count=6, max_words=15))
    set_lstm_inference(model, products)
    with_engine = _hidden_states(model, ids)
    _disable_engine(model)
    assert _max_difference(with_engine, _hidden_states(model, ids)) <= TOLERANCE


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN:UserWarning")
def test_views_run_onednn_on_the_weights_own_views(random_checkpoint, monkeypatch):
    """Where oneDNN applies, `products="views"` runs the step products through it one direction at a time, on the
    parameters themselves: nothing is packed; where it does not, `bmm` runs (no error, same results within the
    tolerance)."""
    model = _model(random_checkpoint, seed=42)
    set_lstm_inference(model, "views")
    ids = _char_ids(_sentences(seed=43, count=4, max_words=10))
    onednn = _onednn_applies()  # before counting: its first call checks oneDNN once with a packed weight
    calls = record_onednn_calls(monkeypatch, lstm_only=True)
    packings = []
    reorder = torch.ops.mkldnn._reorder_linear_weight
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", lambda *args: packings.append(1) or reorder(*args))
    found = _hidden_states(model, ids)
    lengths = ((ids != 0).any(dim=-1).sum(dim=1) + 2).sort(descending=True).values
    num_steps, steps_of_several_rows = int(lengths[0]), int(lengths[1])
    cell_size, proj_size = model.bilm.layers[0].weight_proj.shape[-2:]
    # a one-row projection to fewer outputs than inputs runs through PyTorch (`cpu_linear.onednn_linear`)
    projections = steps_of_several_rows if proj_size < cell_size else num_steps
    if onednn:
        # per layer and direction: 1 input-to-gate block, then per step the recurrent and projection products
        assert len(calls) == len(model.bilm.layers) * 2 * (1 + num_steps + projections)
        assert all(shape[0] == 1 for shape in calls)  # one direction at a time
    assert not packings and all(engine_of(layer)._derived is None for layer in model.bilm.layers)
    calls.clear()
    with torch.backends.mkldnn.flags(enabled=False):
        assert _max_difference(_hidden_states(model, ids), found) <= TOLERANCE
    assert not calls  # oneDNN switched off: `bmm`


def test_default_runs_bmm_for_a_single_sequence(random_checkpoint, monkeypatch):
    """A batch of one sequence takes `bmm` under the default (a fixed rule on the shape: its products only stream
    the weights), within the tolerance of the oneDNN products of the same sentence in a larger batch."""
    model = _model(random_checkpoint, seed=42)
    ids = _char_ids(_sentences(seed=43, count=4, max_words=10))
    calls = record_onednn_calls(monkeypatch, lstm_only=True)
    alone = _hidden_states(model, ids[:1])
    assert not calls
    in_batch = _hidden_states(model, ids)
    assert bool(calls) == _onednn_applies()
    width = alone[0].shape[1]
    assert _max_difference(tuple(layer[:1, :width] for layer in in_batch), alone) <= TOLERANCE


def test_default_sees_every_weight_change_on_the_next_call(random_checkpoint):
    """The default reads the weights at each call: writes through `.data`, tensors swapped in through `.data` and
    in-place updates show in the next call's outputs, exactly as in the reference recurrence's."""
    model = _model(random_checkpoint, seed=44)
    reference = _model(random_checkpoint, seed=44)
    _disable_engine(reference)
    ids = _char_ids(_sentences(seed=45, count=4, max_words=10))
    _hidden_states(model, ids)

    def scale_through_data(module: ElmoModel) -> None:
        for layer in module.bilm.layers:
            layer.weight_hh.data.mul_(1.5)

    def swap_through_data(module: ElmoModel) -> None:
        for layer in module.bilm.layers:
            layer.weight_proj.data = layer.weight_proj.data * 0.5 + 0.01

    def update_in_place(module: ElmoModel) -> None:
        with torch.no_grad():
            for layer in module.bilm.layers:
                layer.weight_ih.add_(0.02)

    for change in (scale_through_data, swap_through_data, update_in_place):
        before = _hidden_states(model, ids)
        change(model)
        change(reference)
        expected = _hidden_states(reference, ids)
        assert not _max_difference(before, expected) <= 100 * TOLERANCE  # the change shows in the outputs
        assert _max_difference(_hidden_states(model, ids), expected) <= TOLERANCE


@pytest.mark.parametrize("packed", [False, True], ids=["views", "packed"])
@pytest.mark.parametrize("shape", [(4096, 512), (512, 16384)], ids=["projection", "recurrent"])
@pytest.mark.parametrize("rows", [1, 2, 64])
def test_default_and_views_products_give_the_same_bits_at_every_thread_count(two_threads, rows, shape, packed):
    """The default's products (packed weights) and the views' (the weight unpacked) on 'original''s shapes; at one
    row oneDNN's matrix-vector kernel would split the inner dimension of a projection to fewer outputs among threads
    (seen on 'original''s projection, 4096 -> 512): they must not depend on the count."""
    if not _onednn_applies():
        pytest.skip("oneDNN's products apply on x86 CPUs only")
    generator = torch.Generator().manual_seed(46)
    weight = torch.randn(*shape, generator=generator)  # (in_features, out_features)
    inputs = torch.randn(1, rows, shape[0], generator=generator)
    results = []
    with torch.inference_mode():
        for count in (2, 1):
            torch.set_num_threads(count)
            results.append(onednn_linear(weight, LstmEngine.PACKED_WEIGHT_ROWS if packed else None)(inputs))
    assert torch.equal(results[0], results[1])
    exact = inputs.double() @ weight.double()
    assert results[0].shape == exact.shape
    assert float((results[0].double() - exact).abs().max()) <= 1e-3  # sums of 4096 products of size ~1


@pytest.mark.skipif(not onednn_linear_applies(torch.zeros(1), torch.zeros(1)), reason="packs for oneDNN (x86 CPUs)")
def test_packed_input_weights_agree_and_follow_a_weight_change(random_checkpoint):
    """`LstmEngine(pack_inputs=True)` (the step scheduler's): the input-to-gate weights packed beside the step weights,
    the layer's call within float32 rounding of the default engine's, and an in-place change of `weight_ih` renewing
    the packed copy on the next call."""
    layer = _model(random_checkpoint, seed=46).bilm.layers[0]
    generator = torch.Generator().manual_seed(47)
    batch_sizes = [3, 3, 2, 1]
    inputs = torch.randn(2, sum(batch_sizes), layer.weight_ih.shape[1], generator=generator)
    state = (torch.zeros(2, 3, layer.weight_hh.shape[1]), torch.zeros(2, 3, layer.weight_proj.shape[1]))
    packed, default = LstmEngine(pack_inputs=True), LstmEngine()
    with torch.inference_mode():
        for change in (None, 0.5):
            if change is not None:
                layer.weight_ih.data.mul_(change)
            outputs = packed.run(layer.weights(), inputs, batch_sizes, state)[0]
            expected = default.run(layer.weights(), inputs, batch_sizes, state)[0]
            assert packed._derived[2] is not None and default._derived[2] is None
            assert (outputs - expected).abs().max() <= TOLERANCE
