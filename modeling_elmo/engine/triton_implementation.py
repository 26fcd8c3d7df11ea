"""
The biLM's recurrence on Triton kernels as ELMo implementations (`elmo_implementations`), for CUDA devices:

- "triton" (a default on CUDA when Triton imports): exact float32 products (`tl.dot(..., input_precision="ieee")`);
- "triton_tf32": TF32 products (float32 sums), chosen by name only;
- "triton_bf16": bfloat16 copies of the LSTM weights, bfloat16 operands and float32 sums, chosen by name only.

Each serves the calls of a float32 biLM layer that need no gradient and are not exported; the character CNN and every
other call keep their implementations. On a CPU a call is served only when the model chose the implementation by
name and the kernels were decorated under `TRITON_INTERPRET=1` (`triton_kernels.INTERPRETED`): how the tests run the
kernels; "triton" is a default for CUDA calls only, so on a CPU machine with Triton installed nothing changes. Triton
is imported when first needed (`import modeling_elmo` does not import it). A kernel that fails to compile for a device
hands that device's calls to the next implementation of the registry, with one warning naming the reason. Small
batches replay CUDA graphs of the step loop (`cuda_graphs`).
"""

import functools
import importlib.util
import warnings
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .triton_kernels import Mode
    from .triton_recurrence import KernelWeights

from ..elmo_implementations import ElmoCall, ElmoImplementations, ImplementationUnavailable, PerLayer
from ..foundation.errors import extra_install_hint, one_line
from ..lstm_cell import LayerKey, LstmState, LstmWeights
from .cuda_graphs import StepLoopGraphs

INSTALL_HINT = extra_install_hint("gpu")


@functools.cache
def triton_unavailable() -> str | None:
    """Why the kernels cannot be imported (None when they can); the first call imports Triton and decorates them."""
    try:
        from . import triton_kernels  # noqa: F401
    except ImportError as error:
        missing = error.name == "triton"
        return f"Triton is not installed ({INSTALL_HINT})" if missing else f"Triton does not import: {error}"
    return None


def kernels_interpreted() -> bool:
    """Whether the kernels were decorated under `TRITON_INTERPRET=1` (they then run on CPU tensors)."""
    from .triton_kernels import INTERPRETED

    return INTERPRETED


class TritonLayerRun:
    """What an implementation keeps for one biLM layer: the weights as the kernels read them (the bias with the
    forget bias added, in a buffer rewritten on every call; bfloat16 copies, renewed when a weight's address or
    version changes) and the layer's captured step loops."""

    def __init__(self, mode: "Mode", graphs: StepLoopGraphs) -> None:
        self.mode, self.graphs = mode, graphs
        self._bias: torch.Tensor | None = None
        self._copies: tuple[tuple[tuple[int, int], ...], tuple[torch.Tensor, ...]] | None = None

    def weights(self, layer: LstmWeights) -> "KernelWeights":
        """The layer's `KernelWeights` now."""
        from .triton_recurrence import KernelWeights

        with torch.inference_mode(False), torch.no_grad():  # kept buffers, written in place by later calls
            if self._bias is None or self._bias.device != layer.bias.device:
                self._bias = torch.empty_like(layer.bias, memory_format=torch.contiguous_format)
            self._bias.copy_(layer.gate_bias())
            matrices = (layer.weight_ih, layer.weight_hh, layer.weight_proj)
            dtype = self.mode.weight_dtype
            if dtype != torch.float32:
                versions = tuple((matrix.data_ptr(), matrix._version) for matrix in matrices)
                if self._copies is None or self._copies[0] != versions:
                    self._copies = (versions, tuple(matrix.detach().to(dtype).contiguous() for matrix in matrices))
                matrices = self._copies[1]
            matrices = tuple(matrix.detach().contiguous() for matrix in matrices)
        return KernelWeights(*matrices, self._bias, layer.cell_clip, layer.proj_clip)

    def __call__(
        self, layer: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        from .triton_recurrence import run_recurrence

        weights = self.weights(layer)

        def compute(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return run_recurrence(weights, batch_sizes, self.mode, *tensors)

        tensors = (inputs, *initial_state)
        if self.graphs.applies(inputs, batch_sizes):
            key = (tuple(batch_sizes), *(tuple(t.shape) for t in tensors), weights.addresses())
            outputs, hidden, cell = self.graphs.run(key, tensors, compute)
        else:
            outputs, hidden, cell = compute(*tensors)
        return outputs, (hidden, cell)


class TritonImplementation:
    """
    One setting of the Triton backend: registered as `name`, its products at `precision` ("ieee", "tf32") with
    weights in `weight_dtype` (float32, bfloat16). It computes the biLM's recurrence only (the character CNN goes to
    the next candidate). Keeps a `TritonLayerRun` per biLM layer it has run.
    """

    embeds_unique_words = True

    def __init__(self, name: str, precision: str = "ieee", weight_dtype: torch.dtype = torch.float32) -> None:
        self.name, self.precision, self.weight_dtype = name, precision, weight_dtype
        self._runs = PerLayer()
        self._failed_devices: set[torch.device] = set()
        self.make_graphs = StepLoopGraphs  # a layer's graph cache (tests give it a CPU stand-in)

    def supports(self, call: ElmoCall) -> bool:
        """Calls of a float32 biLM layer without gradients, not exported, on CUDA (a device whose kernels compiled),
        or on a CPU when chosen by name with the kernels interpreted."""
        if call.needs_grad or call.exporting or call.part != "lstm":
            return False
        if call.dtype != torch.float32 or call.weight_dtype != torch.float32 or call.device in self._failed_devices:
            return False
        if call.device.type == "cuda":
            return triton_unavailable() is None
        if call.device.type == "cpu" and call.choice == self.name:
            return triton_unavailable() is None and kernels_interpreted()
        return False

    @staticmethod
    def unavailable() -> str | None:
        """Why these kernels cannot run in this process ("needs Triton: ..."), or `None`."""
        reason = triton_unavailable()
        return None if reason is None else f"needs Triton: {reason}"

    def check(self, weights: LstmWeights) -> None:
        """Refuse a model these kernels cannot run, when it chooses this implementation (Triton importable: see
        `unavailable`): on a CPU unless interpreted, other devices, or an LSTM that is not float32."""
        device = weights.weight_hh.device
        interpreted = device.type == "cpu" and kernels_interpreted()
        if device.type != "cuda" and not interpreted:
            raise ValueError(
                f"Implementation {self.name!r} runs on CUDA devices; the model is on {device.type} (a CPU runs its "
                "kernels only when TRITON_INTERPRET=1 was set before they were first used)."
            )
        if weights.weight_hh.dtype != torch.float32:
            raise ValueError(
                f"Implementation {self.name!r} needs a float32 model; the LSTM weights are {weights.weight_hh.dtype}."
            )

    def run(self, layer: LstmWeights) -> TritonLayerRun:
        """The `TritonLayerRun` of the layer of `layer` under this setting (made on first use)."""

        def make() -> TritonLayerRun:
            from .triton_kernels import Mode

            return TritonLayerRun(Mode(self.precision, self.weight_dtype), self.make_graphs())

        return self._runs.of(layer, make)

    def lstm_layer(
        self, layer: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        from triton.errors import TritonError
        from triton.runtime.errors import InterpreterError

        if inputs.device in self._failed_devices:  # the call's other layers, after the first one failed
            raise ImplementationUnavailable(f"the kernels of {self.name!r} did not compile for {inputs.device}")
        try:
            return self.run(layer)(layer, inputs, batch_sizes, initial_state)
        except TritonError as error:  # compiling failed (a launch that fails on the device raises other errors)
            if isinstance(error, InterpreterError):
                raise
            self._failed_devices.add(inputs.device)
            reason = one_line(error, first=True)
            warnings.warn(
                f"The Triton kernels of {self.name!r} did not compile for {inputs.device} ({type(error).__name__}: "
                f"{reason}); the biLM runs the next implementation on it instead.",
                RuntimeWarning,
                stacklevel=2,
            )
            raise ImplementationUnavailable(reason) from error

    def release(self, key: LayerKey) -> None:
        """Drop the weight copies and graphs kept for the layer of `key` (`LstmWeights.key`)."""
        self._runs.pop(key, None)


def register_triton_implementations(registry: ElmoImplementations) -> None:
    """Register "triton" (a default for CUDA calls when Triton is installed), "triton_tf32" and "triton_bf16".
    Without Triton they are registered all the same, so that choosing one names what is missing."""
    installed = importlib.util.find_spec("triton") is not None
    registry.register("triton", TritonImplementation("triton"), default=installed, device_types=("cuda",))
    registry.register("triton_tf32", TritonImplementation("triton_tf32", precision="tf32"))
    registry.register("triton_bf16", TritonImplementation("triton_bf16", weight_dtype=torch.bfloat16))
