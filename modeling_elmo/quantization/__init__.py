"""
Quantized ELMo the way Transformers quantizes (docs/speed.md, "Quantization"): `ElmoQuantizationConfig(method)` for
`from_pretrained(..., quantization_config=...)` on `ElmoModel` and every head, its quantizer (`ElmoQuantizer`), the
quantized biLM layer (`quantized_layer`), the kernels of each method (`kernels`) and the methods' names (`methods`).

`register_quantization()` registers the config and the quantizer with Transformers (the inference core's
`register_auto_classes` calls it). The public names are imported on first use, so that `methods` (what a command
checks `--quantization` against) imports no torch.
"""

import importlib

from .methods import METHODS

# public name: the module of this package that defines it (imported on first use: torch and Transformers)
_LAZY = {"ElmoQuantizationConfig": "config", "ElmoQuantizer": "quantizer", "kernel_name": "kernels"}

__all__ = ["METHODS", "ElmoQuantizationConfig", "ElmoQuantizer", "kernel_name", "register_quantization"]


def __getattr__(name: str):
    """`ElmoQuantizationConfig`, `ElmoQuantizer` and `kernel_name`, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_quantization() -> None:
    """Register `ElmoQuantizationConfig` and `ElmoQuantizer` under `QUANT_METHOD` with Transformers (once)."""
    from transformers.quantizers.auto import (
        AUTO_QUANTIZATION_CONFIG_MAPPING,
        AUTO_QUANTIZER_MAPPING,
        register_quantization_config,
        register_quantizer,
    )

    from .config import QUANT_METHOD, ElmoQuantizationConfig
    from .quantizer import ElmoQuantizer

    if AUTO_QUANTIZATION_CONFIG_MAPPING.get(QUANT_METHOD) is not ElmoQuantizationConfig:
        register_quantization_config(QUANT_METHOD)(ElmoQuantizationConfig)
    if AUTO_QUANTIZER_MAPPING.get(QUANT_METHOD) is not ElmoQuantizer:
        register_quantizer(QUANT_METHOD)(ElmoQuantizer)
