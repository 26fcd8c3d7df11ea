"""The kernels of the quantization methods (`modeling_elmo.quantization.kernels`): the choice by instruction set and
probe, the fallbacks where an op is missing or its quantized tensors are gone (faked), which kernel ran, and each
product against the float64 product of the dequantized weight.

A test of one kernel skips where that kernel does not serve, but only where the CPU lacks what the kernel needs: where
/proc/cpuinfo (read here, not by the code under test) lists its instruction set, the skip is a failure
(`require_kernel`); the per-row property of fbgemm's int8 product is also checked on the fallback (`torch._int_mm`),
which runs everywhere."""

import os
import platform
import warnings
from pathlib import Path

import pytest
import torch

from modeling_elmo.quantization import kernels

CACHED = (kernels.int8_kernel, kernels.weight_only_kernel, kernels.bf16_kernel, kernels.stable_rows)


@pytest.fixture(autouse=True)
def fresh_choices():
    """Every test decides the kernels afresh (they are decided once per process), and leaves no choice behind."""
    for choice in CACHED:
        choice.cache_clear()
    yield
    for choice in CACHED:
        choice.cache_clear()


def cpuinfo_flags() -> frozenset[str]:
    """This CPU's instruction-set flags as /proc/cpuinfo lists them (empty where there is no such file)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text(errors="replace").splitlines() if cpuinfo.exists() else []
    return frozenset(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), ()))


def _vector_isa(flags: frozenset[str]) -> bool:
    """An x86-64 CPU with AVX2 or AVX-512 whose ATen kernels are not lowered to the default ones."""
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    lowered = os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "default"
    return x86 and bool({"avx2", "avx512f"} & flags) and not lowered


def promised_by_the_cpu(method: str, kernel: str) -> str | None:
    """What in this CPU's flags and this torch's build means `kernel` must serve `method` here (None: nothing)."""
    flags = cpuinfo_flags()
    if (method, kernel) == ("int8", "fbgemm"):
        if _vector_isa(flags) and "fbgemm" in torch.backends.quantized.supported_engines:
            return "AVX2 or AVX-512 and a torch built with fbgemm"
    elif (method, kernel) == ("int8_weight_only", "int8pack"):
        if _vector_isa(flags) and hasattr(torch.ops.aten, "_weight_int8pack_mm"):
            return "AVX2 or AVX-512 and ATen's `_weight_int8pack_mm`"
    elif (method, kernel) == ("bf16", "onednn"):
        native = sorted({"avx512_bf16", "amx_bf16"} & flags)
        if native and _vector_isa(flags) and torch.backends.mkldnn.is_available():
            return f"{' and '.join(native)} and a torch built with oneDNN"
    else:
        raise ValueError(f"no rule for {method} on {kernel}")
    return None


def require_kernel(method: str, kernel: str) -> None:
    """Skip unless `kernel` serves `method` here (`kernels.kernel_name`), where this CPU lacks what it needs; fail
    where the CPU has it (a probe or a detection that went wrong would otherwise pass as a skip)."""
    serving = kernels.kernel_name(method)
    if kernel in serving.split("+"):
        return
    promise = promised_by_the_cpu(method, kernel)
    if promise is not None:
        pytest.fail(f"this CPU has {promise} (/proc/cpuinfo), but {method} runs on {serving}, not {kernel}")
    pytest.skip(f"{kernel} does not serve {method} on this CPU ({serving} does)")


def _weights(out_features=48, in_features=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(out_features, in_features, generator=generator) * 0.1
    inputs = torch.randn(5, 3, in_features, generator=generator)
    return weight, inputs


def _error_bound(method: str, weight: torch.Tensor, inputs: torch.Tensor) -> float:
    """A loose bound on the product's error: the rounding of weights and activations to the method's bits."""
    bits = {"int8": 7, "int8_weight_only": 7, "bf16": 8}[method]
    return float(inputs.abs().sum(-1).max() * weight.abs().max()) * 2.0 ** (1 - bits)


def _product(method: str, weight: torch.Tensor):
    if method == "bf16":
        return kernels.quantized_linear(method, weight.to(torch.bfloat16), None)
    scale_dtype = torch.float32 if method == "int8" else torch.bfloat16
    quantized, scales = kernels.quantize_symmetric(weight, scale_dtype)
    return kernels.quantized_linear(method, quantized, scales)


@pytest.mark.parametrize("method", ["int8", "int8_weight_only", "bf16"])
def test_each_method_computes_the_product_within_its_rounding(method):
    weight, inputs = _weights()
    found = _product(method, weight)(inputs)
    expected = inputs.double() @ weight.double().t()
    assert found.dtype == torch.float32 and found.shape == (5, 3, 48)
    assert (found.double() - expected).abs().max() <= _error_bound(method, weight, inputs)


def test_the_symmetric_quantization_is_within_half_a_scale():
    weight, _ = _weights(seed=3)
    weight[4] = 0.0
    quantized, scales = kernels.quantize_symmetric(weight, torch.float32)
    assert quantized.dtype == torch.int8 and quantized.abs().max() <= 127
    assert scales[4] == 1 and not quantized[4].any()
    assert ((quantized.float() * scales.unsqueeze(1) - weight).abs() <= scales.unsqueeze(1) / 2 + 1e-7).all()


def test_on_an_avx2_cpu_int8_runs_on_fbgemm_at_full_range_with_vnni(monkeypatch):
    require_kernel("int8", "fbgemm")
    weight, inputs = _weights()
    product = _product("int8", weight)  # its probes' products, before the spy
    seen = _spy_static_inputs(monkeypatch)
    product(inputs)
    levels = 127 if {"avx512_vnni", "avx_vnni"} & cpuinfo_flags() else 63  # 7-bit activations without VNNI
    assert [(step, zero_point) for _, step, zero_point in seen] == [(1 / levels, levels + 1)]


def _fake_without_fbgemm(monkeypatch):
    def missing(*args, **kwargs):
        raise RuntimeError("fbgemm's product is not available (faked)")

    monkeypatch.setattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32", missing)


def test_without_fbgemm_int8_falls_back_to_int_mm_and_runs_it(monkeypatch):
    _fake_without_fbgemm(monkeypatch)
    calls = []
    int_mm = torch._int_mm
    monkeypatch.setattr(torch, "_int_mm", lambda *args: calls.append(args) or int_mm(*args))
    assert kernels.int8_kernel() == "int_mm"
    weight, inputs = _weights()
    product = _product("int8", weight)
    calls.clear()  # the probes' calls
    found = product(inputs)
    assert len(calls) == 1
    assert (found.double() - inputs.double() @ weight.double().t()).abs().max() <= _error_bound("int8", weight, inputs)


def test_without_quantized_tensors_int8_falls_back(monkeypatch):
    """A torch whose deprecated quantized tensors are gone (their constructor raises) leaves fbgemm's path."""

    def removed(*args, **kwargs):
        raise RuntimeError("quantized tensors were removed (faked)")

    monkeypatch.setattr(torch, "_make_per_channel_quantized_tensor", removed)
    assert kernels.int8_kernel() == "int_mm"


def test_without_either_int8_op_the_weights_are_dequantized_per_call(monkeypatch):
    _fake_without_fbgemm(monkeypatch)
    monkeypatch.delattr(torch, "_int_mm")
    assert kernels.int8_kernel() == "dequantized"
    weight, inputs = _weights()
    found = _product("int8", weight)(inputs)
    assert (found.double() - inputs.double() @ weight.double().t()).abs().max() <= _error_bound("int8", weight, inputs)


def test_fbgemm_is_not_chosen_without_its_instruction_sets(monkeypatch):
    monkeypatch.setattr(kernels, "vectorised_capability", lambda: False)
    assert kernels.int8_kernel() != "fbgemm"


def test_the_weight_only_and_bf16_kernels_fall_back_where_their_ops_fail(monkeypatch):
    def missing(*args, **kwargs):
        raise RuntimeError("not available (faked)")

    monkeypatch.setattr(torch.ops.aten, "_weight_int8pack_mm", missing)
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", missing)
    assert kernels.weight_only_kernel() == "dequantized"
    assert kernels.bf16_kernel() == "matmul"
    weight, inputs = _weights()
    for method in ("int8_weight_only", "bf16"):
        found = _product(method, weight)(inputs)
        error = (found.double() - inputs.double() @ weight.double().t()).abs().max()
        assert error <= _error_bound(method, weight, inputs)


def _spy(monkeypatch, namespace, name: str) -> list:
    """Record each call of `namespace.name` (its first argument's shape), and still run it."""
    calls, original = [], getattr(namespace, name)

    def spy(*args, **kwargs):
        calls.append(tuple(args[0].shape))
        return original(*args, **kwargs)

    monkeypatch.setattr(namespace, name, spy)
    return calls


def test_weight_only_runs_one_row_on_int8pack_and_more_rows_on_onednn_packed_on_first_use(monkeypatch):
    require_kernel("int8_weight_only", "int8pack")
    require_kernel("bf16", "onednn")
    assert kernels.kernel_name("int8_weight_only") == "int8pack+onednn"
    int8pack = _spy(monkeypatch, torch.ops.aten, "_weight_int8pack_mm")
    onednn = _spy(monkeypatch, torch.ops.mkldnn, "_linear_pointwise")
    packing = _spy(monkeypatch, torch.ops.mkldnn, "_reorder_linear_weight")
    weight, inputs = _weights()
    product = _product("int8_weight_only", weight)
    one_row = inputs[:1, :1]
    assert (product(one_row).double() - one_row.double() @ weight.double().t()).abs().max() <= _error_bound(
        "int8_weight_only", weight, one_row
    )
    assert (len(int8pack), len(onednn), len(packing)) == (1, 0, 0)  # one row never derives the bfloat16 copy
    found = product(inputs)
    assert (len(int8pack), onednn, packing) == (1, [(15, 40)], [(48, 40)])
    product(inputs)
    assert len(packing) == 1  # packed once
    expected = inputs.double() @ weight.double().t()
    assert (found.double() - expected).abs().max() <= _error_bound("int8_weight_only", weight, inputs)


def test_weight_only_on_both_kernels_is_the_same_arithmetic():
    """bfloat16 holds the int8 values exactly: a row gives the same product on either kernel, to the rounding of
    the bfloat16 outputs."""
    require_kernel("int8_weight_only", "int8pack")
    require_kernel("bf16", "onednn")
    weight, inputs = _weights(seed=5)
    quantized, scales = kernels.quantize_symmetric(weight, torch.bfloat16)
    rows = inputs.reshape(-1, 40)
    one_at_a_time = torch.cat([kernels.int8pack_linear(quantized, scales)(row[None]) for row in rows])
    together = kernels.int8_values_bf16_linear(quantized, scales)(rows)
    assert (together - one_at_a_time).abs().max() <= 2**-7 * one_at_a_time.abs().max()


def test_without_onednn_weight_only_runs_every_row_count_on_int8pack(monkeypatch):
    require_kernel("int8_weight_only", "int8pack")
    monkeypatch.setattr(kernels, "bf16_kernel", lambda: "matmul")
    assert kernels.kernel_name("int8_weight_only") == "int8pack"
    weight, inputs = _weights()
    product = _product("int8_weight_only", weight)
    int8pack = _spy(monkeypatch, torch.ops.aten, "_weight_int8pack_mm")
    onednn = _spy(monkeypatch, torch.ops.mkldnn, "_linear_pointwise")
    found = product(inputs)
    product(inputs[:1, :1])
    assert (int8pack, onednn) == ([(15, 48), (1, 48)], [])  # K padded to the kernel's multiple of 16
    expected = inputs.double() @ weight.double().t()
    assert (found.double() - expected).abs().max() <= _error_bound("int8_weight_only", weight, inputs)


# shapes of 'original' (recurrent, projection) and a small one: kernels choose their blocking by shape
ROW_SHAPES = [(48, 40), (16384, 512), (512, 4096)]


def _rows_apart_and_together(method: str, shape: tuple[int, int], rows: int):
    """Per window of `rows` rows: (its product alone, the same rows of one product of 64 rows, the sums of the
    magnitudes of their terms)."""
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(*shape, generator=generator) * 0.05
    inputs = torch.randn(64, shape[1], generator=generator) * torch.rand(64, 1, generator=generator) * 3
    product = _product(method, weight)
    together, magnitudes = product(inputs), inputs.abs() @ weight.abs().t()
    windows = [slice(start, start + rows) for start in range(0, 64 - rows + 1, rows)]
    return [(product(inputs[window]), together[window], magnitudes[window]) for window in windows]


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=[f"{o}x{i}" for o, i in ROW_SHAPES])
@pytest.mark.parametrize("method", kernels.ROW_STABLE_METHODS)
def test_a_row_gets_the_same_product_in_a_product_of_any_rows(method, shape):
    """1, 3 and 32 rows at a time against the same rows of one product of 64 rows, every window: bit for bit (each
    method runs one kernel at every row count, int8 quantizes each row on its own, and products of fewer rows than
    `stable_rows` are padded)."""
    for rows in (1, 3, 32):
        for index, (alone, together, _) in enumerate(_rows_apart_and_together(method, shape, rows)):
            assert torch.equal(alone, together), (rows, index)


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=[f"{o}x{i}" for o, i in ROW_SHAPES])
def test_weight_only_differs_by_one_row_only_and_within_a_bfloat16_step(shape):
    """`"int8_weight_only"` runs one row on another kernel (its documented batch tolerance): 3 and 32 rows are bit for
    bit the rows of 64, one row within a bfloat16 step of the sum of its terms' magnitudes."""
    for rows in (3, 32):
        windows = _rows_apart_and_together("int8_weight_only", shape, rows)
        assert all(torch.equal(alone, together) for alone, together, _ in windows)
    for alone, together, magnitudes in _rows_apart_and_together("int8_weight_only", shape, 1):
        assert ((alone - together).abs() <= 2**-7 * magnitudes).all()


@pytest.mark.parametrize("kernel", ["fbgemm", "int_mm"])
def test_int8_quantizes_each_row_to_its_own_range(monkeypatch, kernel):
    """fbgemm's product takes one quantization step per call: each row reaches it scaled to [-1, 1]; `_int_mm`'s
    (the fallback, everywhere) takes int8 rows, each scaled to reach 127. So rows a million times apart in magnitude
    keep their 8 bits each."""
    if kernel == "fbgemm":
        require_kernel("int8", "fbgemm")
    monkeypatch.setattr(kernels, "int8_kernel", lambda: kernel)
    weight, inputs = _weights()
    product = _product("int8", weight)
    seen = _spy_static_inputs(monkeypatch) if kernel == "fbgemm" else _spy_int_mm(monkeypatch)
    small, large = inputs[0] * 1e-3, inputs[1] * 1e3  # with one range for the call, the small rows would be zeros
    found = product(torch.cat((small, large)))
    ((rows, _, _),) = seen
    full_scale = 1 if kernel == "fbgemm" else 127
    assert rows.shape == (6, 40) and rows.abs().amax(dim=1).eq(full_scale).all()
    for part, found_part in ((small, found[:3]), (large, found[3:])):
        expected = part.double() @ weight.double().t()
        assert (found_part.double() - expected).abs().max() <= _error_bound("int8", weight, part)


@pytest.mark.parametrize("kernel", ["fbgemm", "int_mm"])
def test_int8_gives_an_all_zero_row_zeros_beside_other_rows(monkeypatch, kernel):
    """A row of zeros (the first time step's hidden state) has no magnitude to scale by: its product is zero, not
    NaN, and the rows beside it are unchanged."""
    if kernel == "fbgemm":
        require_kernel("int8", "fbgemm")
    monkeypatch.setattr(kernels, "int8_kernel", lambda: kernel)
    weight, inputs = _weights()
    product = _product("int8", weight)
    rows = inputs.reshape(-1, 40)[:4].clone()
    rows[1] = 0.0
    found = product(rows)
    assert torch.equal(found[1], torch.zeros(48))
    assert torch.equal(found[[0, 2, 3]], product(rows[[0, 2, 3]]))


def _spy_static_inputs(monkeypatch) -> list:
    """(inputs, step, zero point) of every call of fbgemm's statically quantized product from now on."""
    seen, static = [], torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32

    def spy(inputs, step, zero_point, packed):
        seen.append((inputs.clone(), step, zero_point))
        return static(inputs, step, zero_point, packed)

    monkeypatch.setattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32", spy)
    return seen


def _spy_int_mm(monkeypatch) -> list:
    """(int8 rows, None, None) of every call of `torch._int_mm` from now on."""
    seen, int_mm = [], torch._int_mm

    def spy(rows, weight):
        seen.append((rows.clone(), None, None))
        return int_mm(rows, weight)

    monkeypatch.setattr(torch, "_int_mm", spy)
    return seen


def test_a_kernel_that_sums_one_row_differently_is_padded_to_two(monkeypatch):
    """`stable_rows` finds the row counts at which a kernel differs (here a fake one that rounds single rows
    differently) and the product pads them."""
    original = kernels.bf16_linear

    def single_rows_differ(weight, pack_rows):
        linear = original(weight, pack_rows)
        return lambda inputs: linear(inputs) + (inputs.reshape(-1, inputs.shape[-1]).shape[0] == 1) * 1e-3

    monkeypatch.setattr(kernels, "bf16_linear", single_rows_differ)
    assert kernels.stable_rows("bf16", kernels.bf16_kernel(), 48, 40) == 2
    weight, inputs = _weights()
    product = _product("bf16", weight)
    rows = inputs.reshape(-1, 40)
    assert torch.equal(product(rows[:1]), product(rows)[:1])


def test_packing_for_fbgemm_raises_no_deprecation_warning():
    require_kernel("int8", "fbgemm")
    weight, inputs = _weights()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _product("int8", weight)(inputs)


def test_the_cpu_flags_are_read_from_the_instruction_set_list():
    flags = kernels.cpu_flags()
    assert isinstance(flags, frozenset)
    if platform.machine().lower() in ("x86_64", "amd64") and Path("/proc/cpuinfo").exists():
        assert flags == cpuinfo_flags() and "sse2" in flags  # every x86-64 CPU has it
    assert kernels.has_vnni() == bool({"avx512_vnni", "avx_vnni"} & cpuinfo_flags())
