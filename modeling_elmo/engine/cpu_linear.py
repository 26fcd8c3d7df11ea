"""
Float32 matrix products through oneDNN for inference on x86 CPUs, for the biLM's inference engine (`lstm_engine`) and
the character CNN's (`char_cnn_engine`).

PyTorch sends float32 `mm`/`bmm` on CPUs to MKL, whose kernels are chosen by CPU vendor; oneDNN, part of PyTorch's x86
builds, picks its kernels from the CPU's instruction sets and splits a product with several rows among threads by
output columns, so its sums do not depend on the thread count. A one-row product with few outputs stays off the
vendors' matrix-vector kernels (oneDNN's, and MKL's on Intel CPUs, split the inner dimension among threads) and uses
PyTorch's own column sums. The weight is taken as it is (a transposed view needs no copy) or reordered once into
oneDNN's blocked layout. All are plain float32 arithmetic; only the order of the additions differs from MKL's.
oneDNN's linear has no backward: these products are for inference only.
"""

import functools
import platform
from collections.abc import Callable

import torch

LinearFn = Callable[[torch.Tensor], torch.Tensor]


@functools.cache
def _onednn_linear_works() -> bool:
    """oneDNN's linear is built, on an x86 CPU, and gives `torch.mm`'s result on a small probe (checked once)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        return False
    weight, inputs = torch.arange(12.0).reshape(3, 4), torch.arange(8.0).reshape(2, 4)
    try:
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, 2)
            result = torch.ops.mkldnn._linear_pointwise(inputs, packed, None, "none", [], "")
    except (AttributeError, NotImplementedError, RuntimeError):
        return False
    return torch.equal(result, inputs @ weight.t())


def onednn_applies(device: torch.device, dtype: torch.dtype) -> bool:
    """
    Whether oneDNN's linear ops serve products on `device` in `dtype`: float32 on an x86 CPU, no CPU autocast, not
    inside `torch.compile`, oneDNN working and enabled (`torch.backends.mkldnn.flags(enabled=False)` turns it off).
    """
    return (
        not torch.compiler.is_compiling()  # inductor cannot lower oneDNN's linear ops: traced graphs use bmm
        and device.type == "cpu"
        and dtype == torch.float32
        and torch.backends.mkldnn.enabled
        and not torch.is_autocast_enabled("cpu")
        and _onednn_linear_works()
    )


def onednn_linear_applies(weight: torch.Tensor, inputs: torch.Tensor) -> bool:
    """Whether `onednn_linear` should compute the products of `inputs` with `weight`: both of one dtype, where
    `onednn_applies`."""
    return weight.dtype == inputs.dtype and onednn_applies(weight.device, weight.dtype)


def onednn_linear(weight: torch.Tensor, pack_rows: int | None = None, one_row_sums: bool = True) -> LinearFn:
    """
    `inputs (*, in_features) -> inputs @ weight (*, out_features)` through oneDNN, for a fixed `weight` (in_features,
    out_features). Without `pack_rows` it reads `weight` as it is, through its transposed view; with `pack_rows` (a
    hint for the usual number of rows; any number works) the weight is copied once into oneDNN's packed layout,
    which costs its memory again and no longer follows changes to `weight`. With `one_row_sums` (always, unpacked),
    a single row with fewer outputs than inputs takes PyTorch's column sums on `weight` as it is instead.
    """
    transposed = weight.detach().t()  # (out_features, in_features), as oneDNN's linear expects
    if pack_rows is not None:
        transposed = torch.ops.mkldnn._reorder_linear_weight(transposed.contiguous(), pack_rows)
    in_features, out_features = weight.shape
    column_sums = (one_row_sums or pack_rows is None) and out_features < in_features
    plain = weight.detach()

    def linear(inputs: torch.Tensor) -> torch.Tensor:
        if column_sums and inputs.shape[:-1].numel() == 1:
            # one row, few outputs: the vendors' matrix-vector kernels (oneDNN's on an unpacked weight, MKL's on
            # Intel CPUs) split the inner dimension among threads, so their sums would depend on the thread count;
            # PyTorch's own column sums split only the outputs
            return (inputs.reshape(-1, 1) * plain).sum(0).reshape(*inputs.shape[:-1], out_features)
        return torch.ops.mkldnn._linear_pointwise(inputs, transposed, None, "none", [], "")

    return linear


def onednn_affine(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`torch.nn.functional.linear(inputs, weight, bias)` (weight (out_features, in_features)) through oneDNN, the
    weight reordered on every call (for products with many rows, or used once)."""
    return torch.ops.mkldnn._linear_pointwise(inputs, weight, bias, "none", [], "")
