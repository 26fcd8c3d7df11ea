"""
Float32 matrix products for inference on x86 CPUs through oneDNN.

PyTorch sends float32 `mm`/`addmm`/`linear` to MKL, whose kernels are fast on Intel CPUs but take slower code on
others (2-3x slower than oneDNN on an AMD EPYC with AVX-512). oneDNN, also part of PyTorch's x86 CPU builds, picks its
kernels from the CPU's instruction sets, and its weight can be reordered once into the kernel's blocked layout, which
matters for the biLM's per-time-step products with few rows. Both are plain float32 arithmetic; only the order of the
additions differs. oneDNN's linear has no backward: it is used only where no gradient is needed.
"""

import functools
import platform
from collections.abc import Callable

import torch

Linear = Callable[[torch.Tensor], torch.Tensor]


@functools.cache
def _onednn_linear_available() -> bool:
    return (
        platform.machine().lower() in ("x86_64", "amd64")
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def onednn_linear_applies(weight: torch.Tensor, inputs: torch.Tensor | None = None) -> bool:
    """Whether oneDNN computes products with `weight` (and `inputs`): float32 on an x86 CPU, oneDNN built and
    enabled (`torch.backends.mkldnn.flags(enabled=False)` turns it off), no gradient needed."""
    needs_grad = torch.is_grad_enabled() and (weight.requires_grad or (inputs is not None and inputs.requires_grad))
    return (
        not needs_grad
        and weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and torch.backends.mkldnn.enabled
        and _onednn_linear_available()
    )


def make_linear(weight: torch.Tensor, bias: torch.Tensor | None = None, pack_rows: int | None = None) -> Linear:
    """
    `inputs (n, in_features) -> inputs @ weight + bias (n, out_features)` for a fixed `weight` (in_features,
    out_features) and `bias` (out_features,), for inference: oneDNN where `onednn_linear_applies`, else
    `torch.addmm`/`torch.mm`. With `pack_rows` (a hint for the usual `n`; any `n` works) oneDNN gets a copy of the
    weight in its packed layout, made once: worth its memory for products with few rows, which the per-call reorder
    would otherwise dominate.
    """
    weight, bias = weight.detach(), None if bias is None else bias.detach()
    if onednn_linear_applies(weight):
        transposed = weight.t()  # (out_features, in_features), as oneDNN's linear expects
        if pack_rows is not None:
            transposed = torch.ops.mkldnn._reorder_linear_weight(transposed.contiguous(), pack_rows)
        return lambda inputs: torch.ops.mkldnn._linear_pointwise(inputs, transposed, bias, "none", [], "")
    if bias is None:
        return lambda inputs: torch.mm(inputs, weight)
    return lambda inputs: torch.addmm(bias, inputs, weight)
