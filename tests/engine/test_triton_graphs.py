"""The bookkeeping of CUDA-graph replay (`cuda_graphs.StepLoopGraphs`) on a CPU: no GPU here, so a stand-in backend
"captures" by remembering the computation and "replays" by running it again on the captured input buffers into the
captured output buffers, as a graph reads and writes fixed addresses. What a real capture does on a GPU (Triton's
launches recorded, replay speed) is not tested here. The layer-level test runs the kernels interpreted."""

import torch
from model_inputs import char_ids, random_model
from triton_testing import require_interpreted_triton

from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from modeling_elmo.engine.cuda_graphs import StepLoopGraphs
from modeling_elmo.reference_implementations import ELMO_EAGER


class ReplayOnCpu:
    """A graph backend for CPU tensors: `capture` runs nothing (as a CUDA capture) and returns buffers for the
    outputs; `replay` recomputes from the captured inputs into them."""

    device_type = "cpu"

    def __init__(self) -> None:
        self.current_stream = 0

    def stream(self, device: torch.device) -> int:
        return self.current_stream

    def capture(self, compute, static_inputs):
        outputs = tuple(torch.full_like(output, float("nan")) for output in compute(*static_inputs))

        class Graph:
            @staticmethod
            def replay() -> None:
                for buffer, value in zip(outputs, compute(*static_inputs), strict=True):
                    buffer.copy_(value)

        return Graph(), outputs


def _doubled(calls: list[torch.Tensor]):
    def compute(values: torch.Tensor) -> tuple[torch.Tensor]:
        calls.append(values)
        return (values * 2,)

    return compute


def test_the_first_call_runs_directly_the_second_captures_later_ones_replay():
    graphs, calls = StepLoopGraphs(backend=ReplayOnCpu()), []
    compute = _doubled(calls)
    first = torch.arange(3.0)
    assert torch.equal(graphs.run("key", (first,), compute)[0], first * 2)
    assert calls[-1] is first and (graphs.captures, graphs.replays, len(graphs)) == (0, 0, 0)
    for value in (10.0, 20.0):
        (result,) = graphs.run("key", (torch.full((3,), value),), compute)
        assert torch.equal(result, torch.full((3,), 2 * value))  # the new inputs were copied into the graph's
    assert (graphs.captures, graphs.replays, len(graphs)) == (1, 2, 1)


def test_results_are_copies_of_the_graph_buffers():
    graphs = StepLoopGraphs(backend=ReplayOnCpu())
    compute = _doubled([])
    for _ in range(2):
        graphs.run("key", (torch.ones(2),), compute)
    (kept,) = graphs.run("key", (torch.ones(2),), compute)
    graphs.run("key", (torch.full((2,), 5.0),), compute)
    assert torch.equal(kept, torch.full((2,), 2.0))  # not overwritten by the next replay


def test_at_most_max_graphs_the_least_recently_used_dropped():
    graphs = StepLoopGraphs(max_graphs=2, backend=ReplayOnCpu())
    compute = _doubled([])
    for key in ("a", "b", "a", "b", "c", "c"):  # c's capture drops a, the least recently used
        graphs.run(key, (torch.ones(1),), compute)
    assert (graphs.captures, len(graphs)) == (3, 2)
    replays = graphs.replays
    assert torch.equal(graphs.run("b", (torch.full((1,), 4.0),), compute)[0], torch.full((1,), 8.0))
    assert graphs.replays == replays + 1
    graphs.run("a", (torch.ones(1),), compute)
    assert graphs.replays == replays + 1  # a was dropped: run directly


def test_another_stream_has_its_own_graphs():
    backend = ReplayOnCpu()
    graphs = StepLoopGraphs(backend=backend)
    compute = _doubled([])
    for _ in range(2):
        graphs.run("key", (torch.ones(1),), compute)
    backend.current_stream = 1
    graphs.run("key", (torch.ones(1),), compute)
    assert (graphs.captures, graphs.replays) == (1, 1)


def test_which_calls_apply():
    graphs = StepLoopGraphs(max_rows=4, backend=ReplayOnCpu())
    assert graphs.applies(torch.zeros(1), [4, 2])
    assert not graphs.applies(torch.zeros(1), [5, 2])  # launches do not bound a large batch
    assert not graphs.applies(torch.zeros(1), [])
    assert not graphs.applies(torch.zeros(1, device="meta"), [1])
    assert not StepLoopGraphs().applies(torch.zeros(1), [1])  # the CUDA backend: CUDA tensors only


def test_a_layer_replays_its_step_loop_and_reads_weights_changed_in_place(random_checkpoint, monkeypatch):
    require_interpreted_triton()
    model = random_model(random_checkpoint, seed=20, n_layers=1)
    triton = ALL_ELMO_IMPLEMENTATIONS.get_interface("triton", ELMO_EAGER)[0]
    graphs = StepLoopGraphs(backend=ReplayOnCpu())
    monkeypatch.setattr(triton, "make_graphs", lambda: graphs)
    ids = char_ids([["the", "river"]])

    def layers(implementation: str) -> tuple[torch.Tensor, ...]:
        model.set_implementation(implementation)
        with torch.inference_mode():
            return model(ids, output_hidden_states=True).hidden_states

    def max_difference(left, right) -> float:
        return float(max((a - b).abs().max() for a, b in zip(left, right, strict=True)))

    reference = layers("reference")
    for _ in range(3):
        assert max_difference(layers("triton"), reference) <= 1e-6
    assert (graphs.captures, graphs.replays) == (1, 2)
    with torch.no_grad():
        model.bilm.layers[0].weight_hh.mul_(0.5)
        model.bilm.layers[0].bias.add_(0.1)
    reference = layers("reference")
    assert max_difference(layers("triton"), reference) <= 1e-6
    assert (graphs.captures, graphs.replays) == (1, 3)
    model.bilm.layers[0].weight_proj = torch.nn.Parameter(model.bilm.layers[0].weight_proj * 2)  # a new address
    reference = layers("reference")
    for _ in range(2):
        assert max_difference(layers("triton"), reference) <= 1e-6
    assert (graphs.captures, graphs.replays) == (2, 4)
