"""
CUDA-graph replay of a biLM layer's step loop, so that a small batch is not bound by launching kernels: at batch 1
a layer launches two kernels per word (`triton_recurrence`), each costing the host more than the device needs to run
it; a replayed graph launches them all at once.

Limits (what `StepLoopGraphs` does):

- Which calls: calls on CUDA whose first step has at most `max_rows` rows (16 by default: where the weights' reads,
  not the products, bound a step). Larger batches launch directly.
- When it captures: on the second call with the same key (the first launches directly, which also compiles the
  kernels, and nothing is kept). The key is the steps' rows (`batch_sizes`), the shapes of the inputs and initial
  states, the addresses of the weights the kernels read, the device and the current stream. A call that differs in
  any of them re-captures (on its second time); weights changed in place keep their addresses and are read by the
  replay as they are now.
- Memory per graph: a copy of the inputs and initial states, plus everything the loop allocates, held by the graph's
  private memory pool until the graph is dropped: the outputs and final states, one chunk of input gates and the
  cell outputs. For 'original' (4,096 cells, projection 512) that is about 132 KiB per packed token (the input gates
  128 KiB of it) and 40 KiB per row: a 50-word sentence holds about 6.5 MiB per layer.
- Bound: `max_graphs` graphs (32 by default) per layer, the least recently used dropped first; so at most about
  `max_graphs` x (the largest graph) per layer, 210 MiB per layer for 50-word sentences at batch 1.
- Results are copies: each replay writes the same buffers, so its outputs are cloned before the next call.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch

Tensors = tuple[torch.Tensor, ...]


class CudaGraphBackend:
    """Capture and replay with `torch.cuda.CUDAGraph` (tests replace it to check the bookkeeping on a CPU)."""

    device_type = "cuda"

    @staticmethod
    def stream(device: torch.device) -> Hashable:
        return torch.cuda.current_stream(device).cuda_stream

    @staticmethod
    def capture(compute: Callable[..., Tensors], static_inputs: Tensors) -> tuple[object, Tensors]:
        """(the graph of `compute(*static_inputs)`, its outputs); captured on a side stream, not run."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = compute(*static_inputs)
        return graph, outputs


@dataclass
class CapturedLoop:
    """A captured graph with the inputs it reads and the outputs it writes."""

    graph: object
    static_inputs: Tensors
    static_outputs: Tensors


class StepLoopGraphs:
    """One layer's captured step loops, by key (see the module docstring), least recently used first."""

    def __init__(self, max_graphs: int = 32, max_rows: int = 16, backend: CudaGraphBackend | None = None) -> None:
        self.max_graphs, self.max_rows = max_graphs, max_rows
        self.backend = backend if backend is not None else CudaGraphBackend()
        self._graphs: OrderedDict[Hashable, CapturedLoop] = OrderedDict()
        self._seen: OrderedDict[Hashable, None] = OrderedDict()  # keys called once (bounded as the graphs)
        self._lock = threading.Lock()
        self.captures = self.replays = 0

    def applies(self, inputs: torch.Tensor, batch_sizes: list[int]) -> bool:
        """Whether a call on `inputs` with these steps is replayed (once captured)."""
        return inputs.device.type == self.backend.device_type and bool(batch_sizes) and batch_sizes[0] <= self.max_rows

    def __len__(self) -> int:
        return len(self._graphs)

    def run(self, key: Hashable, inputs: Tensors, compute: Callable[..., Tensors]) -> Tensors:
        """`compute(*inputs)`: directly the first time `key` is seen, then by replaying its graph."""
        key = (key, inputs[0].device, self.backend.stream(inputs[0].device))
        with self._lock:
            loop = self._graphs.get(key)
            if loop is None and key not in self._seen:
                self._remember(self._seen, key)
                return compute(*inputs)
            if loop is None:
                loop = self._capture(key, inputs, compute)
            self._graphs.move_to_end(key)
            for static, value in zip(loop.static_inputs, inputs, strict=True):
                static.copy_(value)
            loop.graph.replay()
            self.replays += 1
            return tuple(output.clone() for output in loop.static_outputs)

    def _capture(self, key: Hashable, inputs: Tensors, compute: Callable[..., Tensors]) -> CapturedLoop:
        with torch.inference_mode(False), torch.no_grad():  # buffers written by later calls, whatever their mode
            static_inputs = tuple(value.clone(memory_format=torch.contiguous_format) for value in inputs)
        graph, static_outputs = self.backend.capture(compute, static_inputs)
        self.captures += 1
        loop = CapturedLoop(graph, static_inputs, tuple(static_outputs))
        self._remember(self._graphs, key, loop)
        return loop

    def _remember(self, table: OrderedDict, key: Hashable, value: object = None) -> None:
        table[key] = value
        while len(table) > self.max_graphs:
            table.popitem(last=False)
