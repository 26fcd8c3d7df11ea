"""
The products of quantized weights, per method (`methods.METHODS`), on the fastest library kernel that applies on
this CPU, chosen from its instruction set (`torch.backends.cpu.get_cpu_capability()`, the flags of /proc/cpuinfo),
never from its vendor, and checked once on a small probe; where a kernel is missing or fails its probe, the next one
serves.

The `"int8"` and `"bf16"` products give a row the same result whatever other rows it is computed with (a sentence
gets the same vector in any batch): each runs one kernel at every row count, int8 quantizes the activations per row,
and where a kernel sums a row in another order at a few rows than at many (oneDNN's bfloat16 linear at one row, on
some shapes), products of fewer rows are padded to the fewest rows at which it does not (`stable_rows`, probed once
per kernel and shape). `"int8_weight_only"` keeps a faster kernel for one row than for several, at the cost of a
batch tolerance of a bfloat16 step (`weight_only_int8_linear`).

- `"int8"`: int8 weights (symmetric, one float32 scale per output channel) times int8 activations quantized per row
  (each row over its own magnitude, as torchao's dynamic activation quantization does), int32 sums: fbgemm's product
  of a statically quantized input on x86 CPUs with AVX2 or AVX-512 (`fbgemm_int8_unscaled`; VNNI's `vpdpbusd` where
  present; without VNNI the activations take 7 bits, as fbgemm's 16-bit intermediate sums need), else the same
  per-row arithmetic by `torch._int_mm`, else the weights dequantized for each call (plain float32 matmul: slow, for
  CPUs without either).
- `"int8_weight_only"`: int8 weights (one bfloat16 scale per output channel), bfloat16 activations, float32 sums:
  one row on ATen's `_weight_int8pack_mm` (AVX2/AVX-512 kernels take bfloat16 activations only; elsewhere float32
  ones), which streams one byte a weight; two rows or more on oneDNN's bfloat16 linear (where `"bf16"` runs on it)
  applied to the int8 values, which bfloat16 holds exactly (the same arithmetic, then the scales in float32), its
  bfloat16 copy of the weight packed on the first such call (ATen's kernel is not blocked for many rows).
- `"bf16"`: bfloat16 weights and activations, float32 sums: oneDNN's linear with the weight packed once (AMX or
  AVX512-BF16 where the CPU has them: oneDNN picks), else `torch.matmul` in bfloat16.

Every product maps float32 `inputs (*, in_features)` to float32 `(*, out_features)`; none has a backward. torch 2.13
warns that creating quantized tensors (fbgemm's weight format) is deprecated: the warning is silenced where the
weights are packed, and a torch without the ops falls back (`int8_kernel`).
"""

import functools
import platform
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

LinearFn = Callable[[torch.Tensor], torch.Tensor]

INT8_K_MULTIPLE = 16  # ATen's vectorised `_weight_int8pack_mm` steps through K 16 (AVX-512) or 8 values at a time
_DEPRECATED_QUANTIZED_TENSORS = r".*quantized tensor creation functions.*deprecated"


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this CPU (/proc/cpuinfo's `flags`; empty where there is no such file)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def is_x86() -> bool:
    """Whether this is an x86-64 machine (fbgemm's and oneDNN's x86 kernels)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def has_vnni() -> bool:
    """Whether this CPU has an int8 dot-product instruction (AVX512-VNNI or AVX-VNNI), so 8-bit activations need no
    reduced range."""
    return bool({"avx512_vnni", "avx_vnni"} & cpu_flags())


def vectorised_capability() -> bool:
    """Whether ATen runs its AVX2 or AVX-512 kernels here (`torch.backends.cpu.get_cpu_capability()`)."""
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


# ---- int8 x int8 (dynamic activations) --------------------------------------------------------------------------


def quantize_symmetric(weight: torch.Tensor, scale_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """
    `weight` (out_features, in_features), float -> `q` int8 of that shape and `scales` (out_features,) in
    `scale_dtype`, with `weight[n, k] ~ q[n, k] * scales[n]` to within `scales[n] / 2` and `|q| <= 127`. A bfloat16
    scale is rounded up first (so `|q| <= 127` still holds). An all-zero channel gets scale 1; a channel holding NaN
    or infinity a NaN scale, so its outputs stay non-finite as in float32.
    """
    weight = weight.detach().float()
    amax = weight.abs().amax(dim=-1)
    exact = amax / 127
    # bfloat16 rounds to nearest with a relative error <= 2^-8: scaling up by 1 + 2^-7 first keeps scale >= amax / 127
    scales = (exact * (1 + 2**-7) if scale_dtype == torch.bfloat16 else exact).to(scale_dtype)
    scales = torch.where(amax > 0, scales, torch.ones_like(scales))
    scales = torch.where(torch.isfinite(amax), scales, torch.full_like(scales, float("nan")))
    divisor = torch.where(torch.isfinite(amax), scales.float(), torch.ones_like(amax)).unsqueeze(-1)
    quantized = torch.nan_to_num(weight / divisor).round_().clamp_(-127, 127).to(torch.int8)
    return quantized.contiguous(), scales.contiguous()


def _rows(inputs: torch.Tensor, in_features: int) -> torch.Tensor:
    """`inputs` (*, in_features) as a contiguous float32 matrix (rows, in_features)."""
    return inputs.reshape(-1, in_features).contiguous()


def unit_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows` (M, K) float32 -> each row divided by its largest magnitude (every value in [-1, 1]) and those
    magnitudes (M, 1) (an all-zero row's: the smallest normal float, so it stays zero)."""
    # abs + amax: a quarter of `vector_norm(inf)`'s cost on a row (what a batch-1 time step runs eight times)
    magnitudes = rows.abs().amax(dim=1, keepdim=True).clamp_min_(torch.finfo(torch.float32).tiny)
    return rows / magnitudes, magnitudes


def fbgemm_int8_unscaled(quantized: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """
    The `"int8"` product of unit rows on fbgemm: `units` (M, in) with every value in [-1, 1] (`unit_rows`) are
    quantized with one fixed step and zero point (`quantized::linear_with_input_q_dq_qweight_dq_output_fp32`,
    fbgemm's product of a statically quantized input: 8 bits, 7 without VNNI, symmetric around zero) -> float32
    (M, out), before the rows' magnitudes scale it back (`per_row_int8_linear`). A row's 8-bit values depend on that
    row alone and the int32 sums are exact, so a row gets the same result in any batch (fbgemm's dynamic product takes
    one range per call: the batch's). The weight (`quantized` (out, in) int8, `scales` (out,) float32) is packed once
    into fbgemm's layout.
    """
    out_features = quantized.shape[0]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATED_QUANTIZED_TENSORS, category=UserWarning)
        weight = torch._make_per_channel_quantized_tensor(
            quantized, scales.double(), torch.zeros(out_features, dtype=torch.long), 0
        )
        packed = torch.ops.quantized.linear_prepack(weight, None)
    levels = 127 if has_vnni() else 63  # steps either side of the zero point: 8-bit values, 7 without VNNI
    step, zero_point = 1.0 / levels, levels + 1
    return lambda units: torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
        units, step, zero_point, packed
    )


def int_mm_int8_unscaled(quantized: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """The `"int8"` product of unit rows (M, in) on `torch._int_mm` (int8 x int8 -> int32): each value rounded to
    one of 255 steps, the sums times the weight's `scales` (out,)."""
    transposed = quantized.t()  # (in, out): `_int_mm` takes the weight as its second factor
    step_scales = scales / 127

    def unscaled(units: torch.Tensor) -> torch.Tensor:
        values = (units * 127).round_().to(torch.int8)
        return torch._int_mm(values, transposed).float().mul_(step_scales)

    return unscaled


def per_row_int8_linear(unscaled: LinearFn, in_features: int, bias: torch.Tensor | None = None) -> LinearFn:
    """
    The `"int8"` product with the activations quantized per row: `inputs` (*, in_features) float32, each row divided
    by its largest magnitude (`unit_rows`), multiplied by the weight on an int8 kernel (`unscaled`, one of
    `INT8_KERNELS`), scaled back by the row's magnitude, `bias` (out,) added in the same pass -> (*, out).
    """

    def linear(inputs: torch.Tensor) -> torch.Tensor:
        units, magnitudes = unit_rows(_rows(inputs, in_features))
        product = unscaled(units)
        if bias is None:
            product.mul_(magnitudes)
        else:
            torch.addcmul(bias, product, magnitudes, out=product)
        return product.reshape(*inputs.shape[:-1], product.shape[-1])

    return linear


def dequantized_linear(quantized: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """Any int8 method's product with the weight dequantized to float32 on every call (no float32 copy kept): the
    slow fallback for a CPU or torch without the int8 kernels (float32 activations)."""
    out_features = quantized.shape[0]

    def linear(inputs: torch.Tensor) -> torch.Tensor:
        weight = quantized.float() * scales.float().unsqueeze(1)
        return torch.nn.functional.linear(inputs, weight).reshape(*inputs.shape[:-1], out_features)

    return linear


def _probe_weights() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Small exact integer weights (out 24, in 32), scales and inputs for the kernels' probes."""
    generator = torch.Generator().manual_seed(0)
    quantized = torch.randint(-127, 128, (24, 32), generator=generator, dtype=torch.int8)
    scales = torch.full((24,), 0.5)
    inputs = torch.randint(-127, 128, (17, 32), generator=generator).float() * 0.25
    return quantized, scales, inputs


def _probe(make: Callable[[torch.Tensor, torch.Tensor], LinearFn], tolerance: float) -> bool:
    """Whether `make(quantized, scales)` builds and computes a small product within `tolerance` (relative to the
    largest output) of the float64 one."""
    quantized, scales, inputs = _probe_weights()
    try:
        with torch.no_grad():
            found = make(quantized, scales)(inputs)
    except (AttributeError, NotImplementedError, RuntimeError):
        return False
    expected = inputs.double() @ (quantized.double() * scales.double().unsqueeze(1)).t()
    error = (found.double() - expected).abs().max()
    return found.shape == expected.shape and bool(error <= tolerance * expected.abs().max())


# the `"int8"` kernels, best first: each makes the product of unit rows (`per_row_int8_linear`'s `unscaled`)
INT8_KERNELS: dict[str, Callable[[torch.Tensor, torch.Tensor], LinearFn]] = {
    "fbgemm": fbgemm_int8_unscaled,
    "int_mm": int_mm_int8_unscaled,
    "dequantized": dequantized_linear,
}


def _int8_kernel_applies(name: str) -> bool:
    """Whether the int8 kernel `name` serves on this CPU: its instruction set, then a probe (8-bit activations on
    a probe of quarter-integer values: within 2% of the exact product)."""
    if name == "fbgemm" and not (is_x86() and vectorised_capability()):
        return False  # fbgemm's kernels are AVX2/AVX-512 only
    if name == "fbgemm" and "fbgemm" not in torch.backends.quantized.supported_engines:
        return False
    if name == "dequantized":
        return True
    return _probe(lambda q, s: per_row_int8_linear(INT8_KERNELS[name](q, s), q.shape[1]), tolerance=0.02)


@functools.cache
def int8_kernel() -> str:
    """The name of the `"int8"` kernel that serves here, best first (`INT8_KERNELS`), decided once per process."""
    return next(name for name in INT8_KERNELS if _int8_kernel_applies(name))


# ---- int8 weight-only ---------------------------------------------------------------------------------------------


def int8pack_linear(quantized: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """The `"int8_weight_only"` product on ATen's `_weight_int8pack_mm` (`quantized` (out, in) int8, `scales` (out,)
    bfloat16): bfloat16 activations where ATen runs its AVX2/AVX-512 kernels (they take no other; K zero-padded to
    `INT8_K_MULTIPLE`), float32 elsewhere."""
    out_features, in_features = quantized.shape
    activation_dtype = torch.bfloat16 if vectorised_capability() else torch.float32
    padding = -in_features % INT8_K_MULTIPLE
    packed = torch.nn.functional.pad(quantized, (0, padding)) if padding else quantized
    kernel_scales = scales.to(activation_dtype)

    def linear(inputs: torch.Tensor) -> torch.Tensor:
        # a new tensor (dtype change or padding): its rows are aligned as the kernels' aligned loads require
        rows = inputs.reshape(-1, in_features).to(activation_dtype, copy=True)
        if padding:
            rows = torch.nn.functional.pad(rows, (0, padding))
        product = torch.ops.aten._weight_int8pack_mm(rows, packed, kernel_scales)
        return product.to(inputs.dtype).reshape(*inputs.shape[:-1], out_features)

    return linear


def int8_values_bf16_linear(quantized: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """The `"int8_weight_only"` product as oneDNN's bfloat16 linear of the int8 values (exact in bfloat16: |q| <=
    127 needs 7 bits), times `scales` (out,) in float32; the bfloat16 copy of the weight is packed on the first call
    (a model only loaded holds the int8 weights alone)."""
    out_features, in_features = quantized.shape
    kernel_scales = scales.float()
    packed: list[LinearFn] = []

    def linear(inputs: torch.Tensor) -> torch.Tensor:
        if not packed:
            packed.append(bf16_linear(quantized.to(torch.bfloat16), pack_rows=64))
        product = packed[0](inputs.reshape(-1, in_features)).mul_(kernel_scales)
        return product.reshape(*inputs.shape[:-1], out_features)

    return linear


def weight_only_int8_linear(quantized: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """The `"int8_weight_only"` product (`quantized` (out, in) int8, `scales` (out,) bfloat16): one row on
    `weight_only_kernel`'s (`int8pack_linear`, else the weight dequantized per call), more on
    `int8_values_bf16_linear` where oneDNN's bfloat16 linear serves (`bf16_kernel`), else on the one row's kernel.
    The two kernels sum in other orders and round to bfloat16: a row alone and the same row among others differ by
    up to a bfloat16 step (the method's batch tolerance, docs/speed.md). oneDNN at one row too would remove it, but
    streams the bfloat16 copy, twice the int8 bytes: 15% slower at batch 1 ('original', AMD EPYC)."""
    one_row = (int8pack_linear if weight_only_kernel() == "int8pack" else dequantized_linear)(quantized, scales)
    if bf16_kernel() != "onednn":
        return one_row
    in_features = quantized.shape[1]
    many_rows = int8_values_bf16_linear(quantized, scales)
    return lambda inputs: (one_row if inputs.numel() == in_features else many_rows)(inputs)


@functools.cache
def weight_only_kernel() -> str:
    """`"int8pack"` where `_weight_int8pack_mm` passes its probe here, else `"dequantized"`."""
    probe_ok = _probe(lambda q, s: int8pack_linear(q, s.to(torch.bfloat16)), tolerance=0.02)
    return "int8pack" if probe_ok else "dequantized"


# ---- bfloat16 -----------------------------------------------------------------------------------------------------


@functools.cache
def bf16_kernel() -> str:
    """`"onednn"` where oneDNN's bfloat16 linear is built for this x86 CPU and exact on a small integer probe, else
    `"matmul"`."""
    if not (is_x86() and torch.backends.mkldnn.is_available()):
        return "matmul"
    try:
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return "matmul"
        weight = torch.arange(12.0).reshape(3, 4).to(torch.bfloat16)
        inputs = torch.arange(8.0).reshape(2, 4).to(torch.bfloat16)
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, 2)
            result = torch.ops.mkldnn._linear_pointwise(inputs, packed, None, "none", [], "")
    except (AttributeError, NotImplementedError, RuntimeError):
        return "matmul"
    return "onednn" if torch.equal(result.float(), inputs.float() @ weight.float().t()) else "matmul"


def bf16_linear(weight: torch.Tensor, pack_rows: int) -> LinearFn:
    """The `"bf16"` product of `weight` (out, in) bfloat16: oneDNN with the weight packed once for products of about
    `pack_rows` rows (`bf16_kernel`), `torch.matmul` otherwise."""
    out_features, in_features = weight.shape
    if bf16_kernel() == "onednn" and torch.backends.mkldnn.enabled:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), pack_rows)

        def linear(inputs: torch.Tensor) -> torch.Tensor:
            rows = inputs.reshape(-1, in_features).to(torch.bfloat16)
            product = torch.ops.mkldnn._linear_pointwise(rows, packed, None, "none", [], "")
            return product.to(inputs.dtype).reshape(*inputs.shape[:-1], out_features)

        return linear
    return lambda inputs: torch.matmul(inputs.to(torch.bfloat16), weight.t()).to(inputs.dtype)


# ---- the same result for a row in any product ---------------------------------------------------------------------

ROW_STABLE_METHODS = ("int8", "bf16")  # "int8_weight_only": one row on another kernel (`weight_only_int8_linear`)
PROBED_ROWS = (1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128)
REFERENCE_ROWS = 256  # the probes' rows are compared with the same rows of a product of this many
PROBE_WINDOWS = 32  # products of each probed row count, on successive rows (a differing sum shows on some rows only)


@functools.cache
def stable_rows(method: str, kernel: str, out_features: int, in_features: int) -> int:
    """
    The fewest rows at which `method`'s product on `kernel` gives each row the bits it gets in a product of
    `REFERENCE_ROWS` rows, for weights of this shape (probed once per process on random weights, `PROBE_WINDOWS`
    products of each of `PROBED_ROWS`: kernels choose their blocking by shape and rows, not by values): 1 where
    every probe agrees, 2 where a single row is summed in another order (oneDNN's bfloat16 linear at K 4096 on
    AVX512-BF16), more if a kernel differs at more rows.
    """
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(out_features, in_features, generator=generator) * 0.05
    inputs = torch.randn(REFERENCE_ROWS, in_features, generator=generator)
    linear = _build(method, weight)

    def agrees(rows: int) -> bool:
        starts = range(0, min(REFERENCE_ROWS - rows, (PROBE_WINDOWS - 1) * rows) + 1, rows)
        windows = ((inputs[start : start + rows], reference[start : start + rows]) for start in starts)
        return all(torch.equal(linear(window), expected) for window, expected in windows)

    with torch.no_grad():
        reference = linear(inputs)
        unstable = [rows for rows in PROBED_ROWS if not agrees(rows)]
    return max(unstable, default=0) + 1


def _build(method: str, weight: torch.Tensor) -> LinearFn:
    """`method`'s product of the float32 `weight` (out, in), quantized as the method stores it (for probes)."""
    if method == "bf16":
        return bf16_linear(weight.to(torch.bfloat16), pack_rows=64)
    quantized, scales = quantize_symmetric(weight, torch.float32 if method == "int8" else torch.bfloat16)
    return _kernel_linear(method, quantized, scales, pack_rows=64)


def padded_to_rows(linear: LinearFn, in_features: int, fewest_rows: int) -> LinearFn:
    """`linear` with products of fewer than `fewest_rows` rows padded with zero rows to that many (their results
    dropped)."""
    if fewest_rows <= 1:
        return linear

    def padded(inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs.reshape(-1, in_features)
        if rows.shape[0] >= fewest_rows:
            return linear(inputs)
        product = linear(torch.nn.functional.pad(rows, (0, 0, 0, fewest_rows - rows.shape[0])))
        return product[: rows.shape[0]].reshape(*inputs.shape[:-1], product.shape[-1])

    return padded


# ---- one entry point ----------------------------------------------------------------------------------------------


def kernel_name(method: str) -> str:
    """The kernel that computes `method`'s products on this CPU (for records and tests)."""
    if method == "int8":
        return int8_kernel()
    if method == "int8_weight_only":
        one_row = weight_only_kernel()  # and, with oneDNN's bfloat16 linear, "+onednn" for two rows or more
        return f"{one_row}+onednn" if bf16_kernel() == "onednn" else one_row
    return bf16_kernel()


def _kernel_linear(
    method: str, weight: torch.Tensor, scales: torch.Tensor | None, pack_rows: int, bias: torch.Tensor | None = None
) -> LinearFn:
    """`method`'s product on `kernel_name(method)`, as it is (`quantized_linear` without the padding)."""
    if method == "int8":
        return per_row_int8_linear(INT8_KERNELS[int8_kernel()](weight, scales), weight.shape[1], bias)
    if method == "bf16":
        linear = bf16_linear(weight, pack_rows)
    else:
        linear = weight_only_int8_linear(weight, scales)
    return linear if bias is None else lambda inputs: linear(inputs).add_(bias)


def quantized_linear(
    method: str,
    weight: torch.Tensor,
    scales: torch.Tensor | None,
    pack_rows: int = 64,
    bias: torch.Tensor | None = None,
) -> LinearFn:
    """
    The float32 product `inputs (*, in) -> ~ inputs @ dequantized(weight).T + bias (*, out)` of one quantized weight
    held as `method` stores it (`weight` (out, in): int8 with `scales` (out,), float32 for "int8" and bfloat16 for
    "int8_weight_only"; bfloat16 without scales for "bf16"), on `kernel_name(method)`; for `ROW_STABLE_METHODS`,
    each row's result does not depend on the other rows (`stable_rows`). `bias` (out,) float32 or None.
    """
    out_features, in_features = weight.shape
    linear = _kernel_linear(method, weight, scales, pack_rows, bias)
    if method not in ROW_STABLE_METHODS:
        return linear
    return padded_to_rows(linear, in_features, stable_rows(method, kernel_name(method), out_features, in_features))


def int8_unit_rows_product(weight: torch.Tensor, scales: torch.Tensor) -> LinearFn:
    """
    The `"int8"` product of unit rows, before their magnitudes scale it back: `units` (M, in), every value in
    [-1, 1] (`unit_rows`) -> float32 (M, out), on `kernel_name("int8")`, padded as `quantized_linear` pads (a row's
    result does not depend on the other rows). `weight` (out, in) int8, `scales` (out,) float32. For a time step that
    scales it back in the pass that adds it to the gates (`quantization.time_steps`).
    """
    out_features, in_features = weight.shape
    unscaled = INT8_KERNELS[int8_kernel()](weight, scales)
    return padded_to_rows(unscaled, in_features, stable_rows("int8", kernel_name("int8"), out_features, in_features))
