"""
How each quantization method stores a weight matrix (out_features, in_features) in a module's buffers: `<name>` in
the method's dtype (int8, or bfloat16 for "bf16") and, for the int8 methods, `<name>_scale` (out_features,) (float32
for "int8", bfloat16 for "int8_weight_only"). These buffers are what `save_pretrained` writes.
"""

import torch
from torch import nn

from .kernels import quantize_symmetric

SCALE_DTYPES = {"int8": torch.float32, "int8_weight_only": torch.bfloat16}


def storage_dtypes(method: str, name: str) -> dict[str, torch.dtype]:
    """The buffers of one weight `name` under `method`, and their dtypes."""
    dtypes = {name: torch.bfloat16 if method == "bf16" else torch.int8}
    if method in SCALE_DTYPES:
        dtypes[f"{name}_scale"] = SCALE_DTYPES[method]
    return dtypes


def register_empty(module: nn.Module, name: str, shape: tuple[int, ...], method: str, device) -> None:
    """Register `name`'s buffers on `module`, uninitialised: `shape` (..., out_features, in_features)."""
    for buffer, dtype in storage_dtypes(method, name).items():
        buffer_shape = shape if buffer == name else shape[:-1]
        module.register_buffer(buffer, torch.empty(buffer_shape, dtype=dtype, device=device))


def store(module: nn.Module, name: str, weight: torch.Tensor, method: str) -> None:
    """Set `name`'s buffers on `module` from the float `weight` (..., out_features, in_features)."""
    if method == "bf16":
        setattr(module, name, weight.detach().to(torch.bfloat16).contiguous())
        return
    values, scales = quantize_symmetric(weight, SCALE_DTYPES[method])
    setattr(module, name, values)
    setattr(module, f"{name}_scale", scales)


def restore_dtypes(module: nn.Module, names: tuple[str, ...], method: str) -> None:
    """Give loaded buffers their storage dtype back (Transformers 4.x loads bfloat16 ones as float32, which holds
    them exactly)."""
    for name in names:
        for buffer, dtype in storage_dtypes(method, name).items():
            if getattr(module, buffer).dtype != dtype:
                setattr(module, buffer, getattr(module, buffer).to(dtype))


def version_key(module: nn.Module) -> tuple:
    """What the kernels derived from `module`'s own tensors depend on: each one's address and version (inference
    tensors, made under `torch.inference_mode`, keep no version: their address only)."""
    tensors = [*module.buffers(recurse=False), *module.parameters(recurse=False)]
    return tuple((tensor.data_ptr(), None if tensor.is_inference() else tensor._version) for tensor in tensors)
