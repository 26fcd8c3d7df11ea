"""The Triton backend's kernels run by Triton's interpreter on a CPU (`TRITON_INTERPRET=1`, set before they are
decorated), against the "reference" recurrence (TensorFlow's formulation) on tiny architectures: clips that bite and
none, one to three layers, with and without the skip connection, shrinking packed batches, input gates in several
chunks, states carried from call to call, a one-word batch; and the launch counts that show the kernels ran."""

import types
import warnings

import pytest
import torch
from model_inputs import char_ids, random_model
from triton_testing import require_interpreted_triton

require_interpreted_triton()

from triton.runtime.errors import OutOfResources  # noqa: E402

from modeling_elmo import ElmoModel  # noqa: E402
from modeling_elmo.elmo_implementations import (  # noqa: E402
    ALL_ELMO_IMPLEMENTATIONS,
    ElmoCall,
    resolve_implementation,
)
from modeling_elmo.engine import triton_kernels, triton_recurrence  # noqa: E402
from modeling_elmo.lstm_states import ElmoLstmStates  # noqa: E402
from modeling_elmo.reference_implementations import ELMO_EAGER, reference_lstm_layer  # noqa: E402

TOLERANCE = 1e-6
SENTENCES = [["the", "bank", "closed", "early"], ["river"], ["a", "café", "by", "the", "river"]]
ARCHITECTURES = {
    "tiny": {},  # clips of 3.0, never reached
    "clips-active": {"cell_clip": 0.5, "proj_clip": 0.25},
    "three-layers-no-clip-no-skip": {
        "cell_clip": None,
        "proj_clip": None,
        "use_skip_connections": False,
        "n_layers": 3,
    },
    "one-layer": {"n_layers": 1},
}


def _layers(model: ElmoModel, ids: torch.Tensor, implementation: str, **kwargs) -> tuple[torch.Tensor, ...]:
    model.set_implementation(implementation)
    with torch.inference_mode():
        return model(ids, output_hidden_states=True, **kwargs).hidden_states


def _call(layer: torch.nn.Module, inputs: torch.Tensor, needs_grad: bool, exporting: bool) -> ElmoCall:
    """The `ElmoCall` of a biLM layer's call on `inputs` for its model's choice."""
    weight_dtype = layer.weight_hh.dtype
    return ElmoCall("lstm", inputs.device, inputs.dtype, weight_dtype, needs_grad, exporting, layer.implementation)


def _max_difference(left: tuple[torch.Tensor, ...], right: tuple[torch.Tensor, ...]) -> float:
    return float(max((a - b).abs().max() for a, b in zip(left, right, strict=True)))


def _launches() -> dict[str, int]:
    return dict(triton_kernels.launches)


def _launched_since(before: dict[str, int]) -> dict[str, int]:
    return {name: count - before.get(name, 0) for name, count in _launches().items() if count > before.get(name, 0)}


def test_the_kernels_were_decorated_interpreted():
    assert triton_kernels.INTERPRETED
    assert type(triton_kernels.lstm_cell_kernel).__name__ == "InterpretedFunction"


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES.keys())
def test_triton_matches_the_reference(random_checkpoint, architecture):
    model = random_model(random_checkpoint, seed=3, **architecture)
    ids = char_ids(SENTENCES)
    reference = _layers(model, ids, "reference")
    before = _launches()
    found = _layers(model, ids, "triton")
    steps, layers = max(map(len, SENTENCES)) + 2, model.config.num_hidden_layers  # <S> and </S> added
    assert _launched_since(before) == {"input_gates": layers, "cell": steps * layers, "projection": steps * layers}
    assert _max_difference(found, reference) <= TOLERANCE
    if architecture.get("proj_clip") == 0.25:
        assert float(found[1].abs().max()) == pytest.approx(0.25)  # the projection clip bites


def test_input_gates_in_many_chunks(random_checkpoint, monkeypatch):
    model = random_model(random_checkpoint, seed=4)
    ids = char_ids(SENTENCES)
    reference = _layers(model, ids, "reference")
    cells = model.config.lstm_cell_size
    monkeypatch.setattr(triton_recurrence, "INPUT_GATE_CHUNK_BYTES", 4 * (2 * 4 * cells * 4))  # 4 packed rows
    before = _launches()
    found = _layers(model, ids, "triton")
    # batch sizes 3,3,3,2,2,2,1 (7 steps): chunks of rows {3}, {3}, {3}, {2, 2}, {2, 1} per layer
    assert _launched_since(before)["input_gates"] == 5 * model.config.num_hidden_layers
    assert _max_difference(found, reference) <= TOLERANCE


def test_a_one_word_batch(random_checkpoint):
    model = random_model(random_checkpoint, seed=5)
    ids = char_ids([["river"]])
    assert _max_difference(_layers(model, ids, "triton"), _layers(model, ids, "reference")) <= TOLERANCE


def test_states_carried_between_calls(random_checkpoint):
    """Stateful calls: the second batch has more rows than the first, then fewer; states come in and go out."""
    model = random_model(random_checkpoint, seed=6)
    batches = [char_ids(SENTENCES[:2]), char_ids(SENTENCES), char_ids(SENTENCES[2:])]
    found = {}
    for implementation in ("reference", "triton"):
        states = ElmoLstmStates(model.config)
        found[implementation] = [
            layer for ids in batches for layer in _layers(model, ids, implementation, states=states)
        ] + [tensor for layer_states in states.layers for tensor in layer_states]
    assert _max_difference(found["triton"], found["reference"]) <= TOLERANCE


def test_the_layer_with_more_state_rows_than_live_rows(random_checkpoint):
    """A layer call whose initial states have rows beyond the first step's (their states are final at once)."""
    layer = random_model(random_checkpoint, seed=7).bilm.layers[0]
    layer.implementation = "triton"
    generator = torch.Generator().manual_seed(0)
    batch_sizes = [3, 2, 2, 1]
    inputs = torch.randn(2, sum(batch_sizes), layer.weight_ih.shape[1], generator=generator)
    state = (
        torch.randn(2, 5, layer.weight_hh.shape[1], generator=generator) * 0.1,
        torch.randn(2, 5, layer.weight_proj.shape[1], generator=generator),
    )
    with torch.no_grad():
        assert (
            resolve_implementation("triton", layer, inputs, ELMO_EAGER)
            is ALL_ELMO_IMPLEMENTATIONS.get_interface("triton", ELMO_EAGER)[0]
        )
        outputs, (hidden, cell) = layer(inputs, batch_sizes, state)
        expected, (expected_hidden, expected_cell) = reference_lstm_layer(layer.weights(), inputs, batch_sizes, state)
    assert _max_difference((outputs, hidden, cell), (expected, expected_hidden, expected_cell)) <= TOLERANCE
    assert torch.equal(hidden[:, 3:], state[0][:, 3:])  # rows with no step keep their state


def test_tf32_mode_is_exact_in_the_interpreter_and_bf16_mode_rounds(random_checkpoint):
    """The interpreter ignores `input_precision` (TF32 is plain float32 there); bfloat16 weights and operands
    change the values at bfloat16's precision."""
    model = random_model(random_checkpoint, seed=8)
    ids = char_ids(SENTENCES[:2])
    reference = _layers(model, ids, "reference")
    assert _max_difference(_layers(model, ids, "triton_tf32"), reference) <= TOLERANCE
    bf16 = _layers(model, ids, "triton_bf16")
    assert 1e-4 < _max_difference(bf16, reference) < 5e-2
    assert all(parameter.dtype == torch.float32 for parameter in model.parameters())  # copies, not the model's


def test_never_a_default_on_cpu_and_gradients_and_exports_take_the_reference(random_checkpoint):
    model = random_model(random_checkpoint, seed=9)
    layer, inputs = model.bilm.layers[0], torch.zeros(2, 3, model.config.projection_dim)
    triton = ALL_ELMO_IMPLEMENTATIONS.get_interface("triton", ELMO_EAGER)[0]
    with torch.no_grad():
        assert resolve_implementation(None, layer, inputs, ELMO_EAGER) is not triton  # the CPU engine
        model.set_implementation("triton")
        assert resolve_implementation("triton", layer, inputs, ELMO_EAGER) is triton
    with torch.enable_grad():
        assert resolve_implementation("triton", layer, inputs, ELMO_EAGER) is ELMO_EAGER  # parameters need gradients
    assert not triton.supports(_call(layer, inputs, needs_grad=False, exporting=True))
    before = _launches()
    model(char_ids(SENTENCES[:1])).last_hidden_state.sum().backward()
    assert _launched_since(before) == {}


def test_the_interpreter_is_decided_when_decorated_not_at_call_time(random_checkpoint, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    model = random_model(random_checkpoint, seed=10)
    model.set_implementation("triton")  # accepted: the kernels were decorated interpreted
    layer = model.bilm.layers[0]
    triton = ALL_ELMO_IMPLEMENTATIONS.get_interface("triton", ELMO_EAGER)[0]
    inputs = torch.zeros(2, 1, model.config.projection_dim)
    assert triton.supports(_call(layer, inputs, needs_grad=False, exporting=False))


def test_a_kernel_that_does_not_compile_falls_back_to_eager_with_one_warning(random_checkpoint, monkeypatch):
    model = random_model(random_checkpoint, seed=11)
    ids = char_ids(SENTENCES[:2])
    expected = _layers(model, ids, "reference")
    triton = ALL_ELMO_IMPLEMENTATIONS.get_interface("triton", ELMO_EAGER)[0]

    def out_of_shared_memory(*args, **kwargs):
        raise OutOfResources(263168, 232448, "shared memory")

    monkeypatch.setattr(triton_recurrence, "run_recurrence", out_of_shared_memory)
    monkeypatch.setattr(triton, "_failed_devices", set())
    with pytest.warns(RuntimeWarning, match=r"did not compile for cpu \(OutOfResources: out of resource: shared") as w:
        found = _layers(model, ids, "triton")
    assert len(w) == 1
    assert _max_difference(found, expected) <= TOLERANCE  # the first layer by `forward_eager`, the next by the CPU's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _layers(model, ids, "triton")  # no second warning: the device's calls go to the defaults now


def test_cuda_inputs_take_triton_by_default_and_the_named_modes_only_by_name(random_checkpoint):
    layer = random_model(random_checkpoint, seed=12).bilm.layers[0]
    cuda_inputs = types.SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.float32, requires_grad=False)
    with torch.no_grad():
        chosen = resolve_implementation(None, layer, cuda_inputs, ELMO_EAGER)
        assert chosen is ALL_ELMO_IMPLEMENTATIONS.get_interface("triton", ELMO_EAGER)[0]
        tf32 = ALL_ELMO_IMPLEMENTATIONS.get_interface("triton_tf32", ELMO_EAGER)[0]
        assert resolve_implementation("triton_tf32", layer, cuda_inputs, ELMO_EAGER) is tf32
        assert "triton_tf32" not in ALL_ELMO_IMPLEMENTATIONS.defaults
        half = types.SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.float16, requires_grad=False)
        assert resolve_implementation(None, layer, half, ELMO_EAGER) is ELMO_EAGER
