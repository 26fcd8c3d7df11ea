"""
Compressed recurrent and projection weights for the biLM's inference engine (`lstm_engine`), for callers that trade
exactness for speed at small batches (opt-in: `model.set_implementation("cpu_int8" | "cpu_bf16")`).

At batch 1 every time step of the biLM reads all its recurrent and projection weights for a product of one row, so
its speed is bound by how fast they stream from memory; in 8 or 16 bits they are a quarter or half the bytes. The
products still accumulate in float32; what changes is the rounding:

- `"int8"`: weight-only int8, symmetric, one scale per output channel (`|q| <= 127`, error at most half a scale per
  weight), through ATen's `_weight_int8pack_mm`: weight (N, K) int8, scales (N,) and activations (M, K) of one
  dtype, output (M, N) of that dtype, float32 accumulation. Its x86 kernels (AVX2 and AVX-512, chosen by instruction
  set, not vendor) take bfloat16 activations only: float32 ones go to a scalar loop, slower than the float32
  product. So on those CPUs the activations and scales are bfloat16 (each scale rounded up, so that `|q| <= 127`
  still holds) and the output is rounded to bfloat16 after the float32 sums; elsewhere (aarch64's NEON kernel, or
  ATen's scalar fallback) everything stays float32. The vectorised kernels read K in blocks of 8 or 16 with no tail
  (other K crash them), so K is zero-padded to a multiple of 16.
- `"bf16"`: weights rounded to bfloat16, activations rounded to bfloat16, float32 accumulation, output rounded to
  bfloat16: oneDNN's linear with the weight packed once where oneDNN supports bfloat16 on this CPU (x86 with
  AVX-512), `torch.matmul` elsewhere.

Both return float32. Neither has a backward: these are for inference only.
"""

import functools
import platform
from collections.abc import Callable

import torch

LinearFn = Callable[[torch.Tensor], torch.Tensor]

WEIGHT_COMPRESSIONS = ("int8", "bf16")
INT8_K_MULTIPLE = 16  # ATen's vectorised int8 kernels step through K 16 (AVX-512) or 8 (AVX2, NEON) values at a time


def compressed_linear_applies(weight: torch.Tensor, inputs: torch.Tensor) -> bool:
    """Whether the compressed products replace float32 ones: float32 weight and inputs on a CPU, no CPU autocast, not
    inside `torch.compile` (traced graphs keep the float32 products)."""
    return (
        not torch.compiler.is_compiling()
        and weight.device.type == inputs.device.type == "cpu"
        and weight.dtype == inputs.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
    )


def int8_activation_dtype() -> torch.dtype:
    """The activation (and scale) dtype of `_weight_int8pack_mm` here: bfloat16 where ATen runs its x86 AVX2/AVX-512
    kernels (they take no other), float32 elsewhere (aarch64's kernel takes it; the scalar fallback is no faster in
    bfloat16)."""
    return torch.bfloat16 if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512") else torch.float32


def quantize_int8(weight: torch.Tensor, scale_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """
    `weight` (in_features, out_features) -> `q` (out_features, in_features padded to `INT8_K_MULTIPLE`) int8 and
    `scales` (out_features,) in `scale_dtype`, with `weight[k, n] ~ q[n, k] * scales[n]` to within `scales[n] / 2`.
    A channel holding NaN or infinity gets a NaN scale, so its outputs stay non-finite as in float32.
    """
    transposed = weight.detach().t().float()  # (out_features, in_features)
    amax = transposed.abs().amax(dim=1)
    exact = amax / 127
    # bfloat16 rounds to nearest with a relative error <= 2^-8: scaling up by 1 + 2^-7 first keeps scale >= amax / 127
    scales = (exact * (1 + 2**-7) if scale_dtype == torch.bfloat16 else exact).to(scale_dtype)
    scales = torch.where(amax > 0, scales, torch.ones_like(scales))  # an all-zero channel: q = 0 whatever the scale
    scales = torch.where(torch.isfinite(amax), scales, torch.full_like(scales, float("nan")))
    divisor = torch.where(torch.isfinite(amax), scales.float(), torch.ones_like(amax)).unsqueeze(1)
    quantized = torch.nan_to_num(transposed / divisor).round_().clamp_(-127, 127).to(torch.int8)
    padding = -quantized.shape[1] % INT8_K_MULTIPLE
    if padding:
        quantized = torch.nn.functional.pad(quantized, (0, padding))
    return quantized.contiguous(), scales.contiguous()


def int8_linear(weight: torch.Tensor) -> LinearFn:
    """`inputs (*, in_features) -> inputs @ weight (*, out_features)`, float32, with `weight` (in_features,
    out_features) quantized to int8 per output channel (`quantize_int8`)."""
    activation_dtype = int8_activation_dtype()
    quantized, scales = quantize_int8(weight, activation_dtype)
    in_features, out_features = weight.shape
    padding = quantized.shape[1] - in_features

    def linear(inputs: torch.Tensor) -> torch.Tensor:
        # a new tensor (dtype change or padding), so its rows are aligned as the kernels' aligned loads require
        rows = inputs.reshape(-1, in_features).to(activation_dtype, copy=True)
        if padding:
            rows = torch.nn.functional.pad(rows, (0, padding))
        product = torch.ops.aten._weight_int8pack_mm(rows, quantized, scales)  # (rows, out_features)
        return product.to(inputs.dtype).reshape(*inputs.shape[:-1], out_features)

    return linear


@functools.cache
def _onednn_bf16_linear_works() -> bool:
    """oneDNN's linear is built, on an x86 CPU where oneDNN supports bfloat16, and exact on a small integer probe."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        return False
    try:
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return False
        weight = torch.arange(12.0).reshape(3, 4).to(torch.bfloat16)
        inputs = torch.arange(8.0).reshape(2, 4).to(torch.bfloat16)
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, 2)
            result = torch.ops.mkldnn._linear_pointwise(inputs, packed, None, "none", [], "")
    except (AttributeError, NotImplementedError, RuntimeError):
        return False
    return torch.equal(result.float(), inputs.float() @ weight.float().t())


def bf16_linear(weight: torch.Tensor, pack_rows: int) -> LinearFn:
    """`inputs (*, in_features) -> inputs @ weight (*, out_features)`, float32, with `weight` (in_features,
    out_features) and the inputs rounded to bfloat16; through oneDNN with the weight packed for products of about
    `pack_rows` rows where it applies (`torch.backends.mkldnn.enabled` included), `torch.matmul` otherwise."""
    rounded = weight.detach().to(torch.bfloat16).t().contiguous()  # (out_features, in_features)
    if torch.backends.mkldnn.enabled and _onednn_bf16_linear_works():
        packed = torch.ops.mkldnn._reorder_linear_weight(rounded, pack_rows)
        return lambda inputs: torch.ops.mkldnn._linear_pointwise(
            inputs.to(torch.bfloat16), packed, None, "none", [], ""
        ).to(inputs.dtype)
    return lambda inputs: torch.matmul(inputs.to(torch.bfloat16), rounded.t()).to(inputs.dtype)


def compressed_linear(weight: torch.Tensor, compression: str, pack_rows: int) -> LinearFn:
    """The float32 function `inputs (*, in_features) -> ~ inputs @ weight (*, out_features)` for `weight`
    (in_features, out_features) kept as `compression` (one of `WEIGHT_COMPRESSIONS`)."""
    if compression == "int8":
        return int8_linear(weight)
    if compression == "bf16":
        return bf16_linear(weight, pack_rows)
    raise ValueError(f"compression must be one of {WEIGHT_COMPRESSIONS}, got {compression!r}.")
