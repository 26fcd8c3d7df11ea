"""
A biLM layer with quantized weights (`ElmoQuantizedLstmLayer`), and the conversion of a model's layers to it
(`quantize_bilm`, `prepare_quantized_bilm`).

The layer holds its input-to-gate, recurrent and projection weights only in the method's storage (buffers; no
float32 copy): `weight_ih` (2, 4 * cell_size, input_size), `weight_hh` (2, 4 * cell_size, proj_size) and
`weight_proj` (2, proj_size, cell_size), each direction's matrix as (out_features, in_features), int8 with
`<name>_scale` (2, out_features) (float32 for "int8", bfloat16 for "int8_weight_only") or bfloat16 for "bf16". These
are what `save_pretrained` writes and a saved quantized folder loads back bit for bit. The kernels' own layouts
(fbgemm's or oneDNN's packed weights) are derived from them on the first call and kept while the buffers stay the
same tensors at the same version (`load_state_dict` renews them).

The layer runs on CPUs only, without gradients: the CPU engine's recurrence (`lstm_engine.LstmEngine.run`), one
direction over all its time steps before the other (so at batch 1 one direction's weights stay in cache), the gate
bias added once per block of steps with the input-to-gate products, and its own time step (`time_steps`: sigmoids
only, few element-wise passes).
"""

import torch
from torch import nn

from ..engine.lstm_engine import LinearSet, LstmEngine, StepSet
from ..lstm_cell import LstmState
from ..modeling_elmo import ElmoBiLm, ElmoConfig, ElmoLstmLayer, ElmoModel, ElmoPreTrainedModel
from .kernels import int8_unit_rows_product, quantized_linear
from .methods import check_method
from .storage import register_empty, restore_dtypes, storage_dtypes, store, version_key
from .time_steps import time_step

QUANTIZED_WEIGHTS = ("weight_ih", "weight_hh", "weight_proj")
_RECURRENCE = LstmEngine()  # holds nothing for given products: one serves every quantized layer


class ElmoQuantizedLstmLayer(ElmoLstmLayer):
    """`ElmoLstmLayer` with its three weight matrices held quantized by `method` (one of `methods.METHODS`)."""

    def __init__(self, config: ElmoConfig, method: str):
        super().__init__(config)
        self.quantization = method
        for name in QUANTIZED_WEIGHTS:
            _, in_features, out_features = getattr(self, name).shape
            device = getattr(self, name).device
            delattr(self, name)
            register_empty(self, name, (2, out_features, in_features), method, device)
        self._products: tuple[tuple, list[StepSet]] | None = None

    def storage_dtypes(self) -> dict[str, torch.dtype]:
        """The dtype of each buffer of the method's storage."""
        return {
            key: dtype for name in QUANTIZED_WEIGHTS for key, dtype in storage_dtypes(self.quantization, name).items()
        }

    def restore_storage_dtypes(self) -> None:
        """The storage dtypes as saved (`storage.restore_dtypes`)."""
        restore_dtypes(self, QUANTIZED_WEIGHTS, self.quantization)

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        """`load_state_dict` writes the buffers in place: drop the kernels derived from them (inference tensors keep
        no version counter to tell)."""
        self._products = None
        super()._load_from_state_dict(*args, **kwargs)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_products": None}  # packed kernel weights cannot be pickled or copied

    @classmethod
    def from_float(cls, layer: ElmoLstmLayer, method: str) -> "ElmoQuantizedLstmLayer":
        """`layer`'s weights quantized by `method` (its bias and settings kept)."""
        with torch.device("meta"):
            quantized = cls(layer.config, method)
        quantized.bias = layer.bias
        quantized.train(layer.training)
        for name in QUANTIZED_WEIGHTS:
            store(quantized, name, getattr(layer, name).detach().transpose(1, 2), method)  # (2, out, in)
        return quantized

    def step_sets(self) -> list[StepSet]:
        """Per direction, the input-to-gate product (gate bias added) and the time step, on this CPU's kernels
        (`kernels.quantized_linear`, `time_steps.time_step`), derived on first use and kept while the layer's
        tensors are unchanged."""
        key = version_key(self)
        cached = self._products
        if cached is None or cached[0] != key:
            self._products = None  # free the old packed weights before packing new ones
            cached = self._products = (key, self._derive_step_sets())
        return cached[1]

    def _gate_factors(self) -> torch.Tensor:
        """(4 * cell_size,): 2 for the new-input gate's rows (`j`), 1 for the others (see `time_steps`)."""
        factors = torch.ones(4, self.weight_proj.shape[-1])
        factors[1] = 2.0
        return factors.flatten()

    def _product(self, name: str, direction: int, bias: torch.Tensor | None = None, unit_rows: bool = False):
        """The product of one direction's `name` (plus `bias`) on this CPU's kernel, or with `unit_rows` ("int8"
        only) its product of unit rows (`kernels.int8_unit_rows_product`); the gate products' `j` rows doubled (a
        power of two: exact in the scales or bfloat16 weights)."""
        weight = getattr(self, name)[direction]
        scales = getattr(self, f"{name}_scale", None)
        scales = None if scales is None else scales[direction]
        if name != "weight_proj":
            factors = self._gate_factors()
            if scales is None:
                weight = weight * factors.to(weight.dtype).unsqueeze(1)
            else:
                scales = scales * factors.to(scales.dtype)
        if unit_rows:
            return int8_unit_rows_product(weight, scales)
        return quantized_linear(self.quantization, weight, scales, bias=bias)

    def linear_sets(self) -> list[LinearSet]:
        """Per direction, the input-to-gate (gate bias added), recurrent and projection products as float32 products
        (`kernels.quantized_linear`), derived anew on each call and not kept: what the benchmarks time
        (benchmarks/bench_inference.py's ceilings)."""
        bias = self._gate_bias()
        return [
            (
                slice(direction, direction + 1),
                tuple(
                    self._product(name, direction, bias=bias[direction] if name == "weight_ih" else None)
                    for name in QUANTIZED_WEIGHTS
                ),
            )
            for direction in range(2)
        ]

    def _gate_bias(self) -> torch.Tensor:
        """(2, 4 * cell_size): the gate bias with its `j` part doubled."""
        return (self.weights().gate_bias().detach() * self._gate_factors()).contiguous()

    def _derive_step_sets(self) -> list[StepSet]:
        bias = self._gate_bias()
        unit_rows = self.quantization == "int8"
        sets = []
        for direction in range(2):
            input_to_gates = self._product("weight_ih", direction, bias=bias[direction].contiguous())
            recurrent = self._product("weight_hh", direction, unit_rows=unit_rows)
            projection = self._product("weight_proj", direction, unit_rows=unit_rows)
            step = time_step(self.quantization, recurrent, projection, self.cell_clip, self.proj_clip)
            sets.append((slice(direction, direction + 1), input_to_gates, step))
        return sets

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState, dispatch: object = None
    ) -> tuple[torch.Tensor, LstmState]:
        """`ElmoLstmLayer.forward` on the quantized weights (`dispatch` unused: no implementation applies). CPU only
        and no gradients, float32 around the quantized weights: anything else is refused in one line."""
        refuse_gradients(self, inputs, initial_state)
        if inputs.device.type != "cpu":
            raise ValueError(
                f"A quantized biLM ({self.quantization!r}) runs on CPUs only; its inputs are on {inputs.device}."
            )
        stored = {name: getattr(self, name).dtype for name in self.storage_dtypes()} | {"bias": self.bias.dtype}
        if stored != self.storage_dtypes() | {"bias": torch.float32}:
            raise ValueError(
                f"A quantized biLM ({self.quantization!r}) was cast to other dtypes ({stored}): casting is refused; "
                "load it again with from_pretrained."
            )
        return _RECURRENCE.run(self.weights(), inputs.float(), batch_sizes, initial_state, self.step_sets())


def refuse_gradients(layer: ElmoQuantizedLstmLayer, inputs: torch.Tensor, state: tuple) -> None:
    """Refuse a call that would need a gradient through the quantized weights (`RuntimeError`, one line)."""
    tensors = (inputs, *state, *layer.parameters(), *layer.buffers())
    if torch.is_grad_enabled() and any(tensor.requires_grad for tensor in tensors):
        raise RuntimeError(
            f"The biLM's weights are quantized ({layer.quantization!r}): no gradient flows into or through them. "
            "Keep the biLM frozen (it is, once quantized), or load it without quantization_config to train it."
        )


def bilms_of(model: nn.Module) -> list[ElmoModel]:
    """The `ElmoModel`s in `model` (itself, or a head's `elmo`)."""
    return [module for module in model.modules() if isinstance(module, ElmoModel)]


def _replace_layers(bilm: ElmoBiLm, make) -> None:
    for index, layer in enumerate(bilm.layers):
        if not isinstance(layer, ElmoQuantizedLstmLayer):
            bilm.layers[index] = make(layer)


def prepare_quantized_bilm(model: ElmoPreTrainedModel, method: str) -> None:
    """Give `model`'s biLM layers the storage of `method` (empty, on the model's device: the meta device while
    Transformers loads a saved quantized folder into it)."""
    check_method(method)
    for elmo in bilms_of(model):
        _replace_layers(elmo.bilm, lambda layer: _empty_like(layer, method))


def _empty_like(layer: ElmoLstmLayer, method: str) -> ElmoQuantizedLstmLayer:
    with torch.device(layer.bias.device):
        quantized = ElmoQuantizedLstmLayer(layer.config, method)
    quantized.bias = layer.bias
    return quantized


def quantize_bilm(model: ElmoPreTrainedModel, method: str) -> None:
    """Quantize `model`'s biLM layers by `method` from their float32 weights (which are dropped), and freeze the
    biLM (character CNN and LSTM): a head above it may still train."""
    check_method(method)
    for elmo in bilms_of(model):
        _replace_layers(elmo.bilm, lambda layer: ElmoQuantizedLstmLayer.from_float(layer, method))
    freeze_quantized_bilm(model)


def finish_loading_quantized_bilm(model: ElmoPreTrainedModel) -> None:
    """After a saved quantized folder loaded into `prepare_quantized_bilm`'s layers: the storage dtypes as saved,
    and the biLM frozen."""
    for module in model.modules():
        if isinstance(module, ElmoQuantizedLstmLayer):
            module.restore_storage_dtypes()
    freeze_quantized_bilm(model)


def freeze_quantized_bilm(model: ElmoPreTrainedModel) -> None:
    """No gradient for the parameters below the quantized layers: the character CNN and the LSTM biases."""
    for elmo in bilms_of(model):
        elmo.char_encoder.requires_grad_(False)
        elmo.bilm.requires_grad_(False)
