"""
Quantized ELMo the way Transformers quantizes (docs/speed.md, "Quantization"): `ElmoQuantizationConfig(method)` for
`from_pretrained(..., quantization_config=...)` on `ElmoModel` and every head, its quantizer (`ElmoQuantizer`), the
quantized biLM layer (`quantized_layer`) and the kernels of each method (`kernels`).

`register_quantization()` registers the config and the quantizer with Transformers (the package's
`register_auto_classes` calls it).
"""

from .config import QUANT_METHOD, ElmoQuantizationConfig
from .kernels import METHODS, kernel_name
from .quantizer import ElmoQuantizer

__all__ = ["METHODS", "ElmoQuantizationConfig", "ElmoQuantizer", "kernel_name", "register_quantization"]


def register_quantization() -> None:
    """Register `ElmoQuantizationConfig` and `ElmoQuantizer` under `QUANT_METHOD` with Transformers (once)."""
    from transformers.quantizers.auto import (
        AUTO_QUANTIZATION_CONFIG_MAPPING,
        AUTO_QUANTIZER_MAPPING,
        register_quantization_config,
        register_quantizer,
    )

    if AUTO_QUANTIZATION_CONFIG_MAPPING.get(QUANT_METHOD) is not ElmoQuantizationConfig:
        register_quantization_config(QUANT_METHOD)(ElmoQuantizationConfig)
    if AUTO_QUANTIZER_MAPPING.get(QUANT_METHOD) is not ElmoQuantizer:
        register_quantizer(QUANT_METHOD)(ElmoQuantizer)
