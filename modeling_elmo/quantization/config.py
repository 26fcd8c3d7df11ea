"""
`ElmoQuantizationConfig`, the quantization setting of ELMo for Transformers' `from_pretrained(...,
quantization_config=...)`: a `QuantizationConfigMixin` with `quant_method` `QUANT_METHOD`, registered with
`transformers.quantizers.auto.register_quantization_config` (`register_quantization`), and saved in a quantized
model's `config.json` so that the folder loads back quantized; `saved_quantization` reads it back for the tools that
refuse such a folder (`elmo-export`, `elmo-export-onnx`, `elmo-pretrain`).
"""

import json
import os
from pathlib import Path

from transformers import PretrainedConfig
from transformers.utils.quantization_config import QuantizationConfigMixin

from .methods import METHODS, check_method

QUANT_METHOD = "elmo"  # the name Transformers files the config and the quantizer under


class ElmoQuantizationConfig(QuantizationConfigMixin):
    """
    How to quantize ELMo's biLM (docs/speed.md, "Quantization").

    Args:
        method: `"int8"` (int8 weights x int8 activations quantized on every call, int32 sums), `"int8_weight_only"`
            (int8 weights, bfloat16 activations, float32 sums) or `"bf16"` (bfloat16 weights and activations,
            float32 sums): the input-to-gate, recurrent and projection weights of every biLM layer.
    """

    def __init__(self, method: str = "int8", **kwargs):
        check_method(method)
        unknown = sorted(set(kwargs) - {"quant_method"})
        if unknown:
            raise ValueError(f"ElmoQuantizationConfig takes method= only (one of {METHODS}), got {unknown}.")
        self.quant_method = QUANT_METHOD
        self.method = method

    def to_diff_dict(self) -> dict:
        """Every field (Transformers 4.x's `to_json_string` calls this, and its mixin lacks it)."""
        return self.to_dict()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ElmoQuantizationConfig) and other.method == self.method


def saved_quantization(config: str | os.PathLike | dict | PretrainedConfig) -> str | None:
    """The method (`"int8"`, ...) of the ELMo quantization that a saved model holds, or None: `config` is a folder
    (its `config.json` is read; one that cannot be read counts as not quantized, the tools' own checks say why), the
    dict of a `config.json`, or a loaded config (its `quantization_config`, a dict or an `ElmoQuantizationConfig`)."""
    if isinstance(config, str | os.PathLike):
        try:
            config = json.loads((Path(config) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    found = (
        config.get("quantization_config") if isinstance(config, dict) else getattr(config, "quantization_config", None)
    )
    if isinstance(found, QuantizationConfigMixin):
        found = found.to_dict()
    if isinstance(found, dict) and found.get("quant_method") == QUANT_METHOD:
        return str(found.get("method"))
    return None
