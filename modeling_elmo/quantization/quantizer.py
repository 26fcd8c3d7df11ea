"""
`ElmoQuantizer`, Transformers' `HfQuantizer` for `ElmoQuantizationConfig`: `from_pretrained(folder,
quantization_config=ElmoQuantizationConfig(method))` loads the float32 weights as usual and then quantizes the biLM
layers (`quantized_layer.quantize_bilm`); a folder saved from a quantized model (its `config.json` holds the
quantization config) gets the quantized layers' storage before its weights load (`prepare_quantized_bilm`), so the
same bits come back. Works on Transformers 5.x and 4.52 (the hooks both call: `_process_model_before_weight_loading`
and `_process_model_after_weight_loading`; no parameter is quantized while it loads).
"""

import torch
from transformers.quantizers.base import HfQuantizer

from ..modeling_elmo import ElmoPreTrainedModel
from .quantized_layer import finish_loading_quantized_bilm, prepare_quantized_bilm, quantize_bilm


class ElmoQuantizer(HfQuantizer):
    """Quantizes ELMo's biLM on CPUs (see the module's docstring)."""

    requires_calibration = False
    requires_parameters_quantization = False  # Transformers 4.x: no parameter is quantized while loading
    required_packages = None

    def validate_environment(self, *args, device_map=None, **kwargs) -> None:
        """Refuse a `device_map` that puts any part off the CPU (the quantized kernels are CPU kernels)."""
        devices = set(device_map.values()) if isinstance(device_map, dict) else {device_map}
        off_cpu = sorted(str(device) for device in devices if device not in (None, "cpu", torch.device("cpu")))
        if off_cpu:
            raise ValueError(f"A quantized ELMo runs on CPUs only: device_map names {', '.join(off_cpu)}.")

    def update_dtype(self, dtype: torch.dtype | None) -> torch.dtype:
        """The model's other parameters stay float32 (the quantized products read and return float32)."""
        if dtype not in (None, "auto", torch.float32):
            raise ValueError(f"A quantized ELMo keeps its other weights in float32: dtype={dtype} is refused.")
        return torch.float32

    def update_torch_dtype(self, dtype: torch.dtype | None) -> torch.dtype:
        """Transformers 4.x's name of `update_dtype`."""
        return self.update_dtype(dtype)

    def _check_model(self, model) -> None:
        if not isinstance(model, ElmoPreTrainedModel):
            raise ValueError(f"ElmoQuantizationConfig quantizes ELMo models only, not {type(model).__name__}.")

    def _convert_model_for_quantization(self, model) -> None:
        """Nothing to patch (Transformers patches some of its own models' modules here, through accelerate in
        4.x)."""

    def _process_model_before_weight_loading(self, model, **kwargs):
        self._check_model(model)
        if self.pre_quantized:
            prepare_quantized_bilm(model, self.quantization_config.method)
        return model

    def _process_model_after_weight_loading(self, model, **kwargs):
        if self.pre_quantized:
            finish_loading_quantized_bilm(model)
        else:
            quantize_bilm(model, self.quantization_config.method)
        return model

    def is_serializable(self, *args, **kwargs) -> bool:
        """Saved quantized folders load back quantized with the same bits."""
        return True

    @property
    def is_trainable(self) -> bool:
        """A head over the frozen quantized biLM trains (the quantized weights are buffers: no gradient reaches
        them, and a call that would need one through them is refused)."""
        return True

    @property
    def is_qat_trainable(self) -> bool:
        """Lets Transformers' `Trainer` train such a head (it otherwise asks for adapters on quantized models)."""
        return True
