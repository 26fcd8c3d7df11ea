"""benchmarks/bench_inference.py: its ceilings' arithmetic per kind of product (float32 or a quantization method) on
made-up measurements, and the time split's sums on a profiled call of known products."""

import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench_inference  # noqa: E402

CEILINGS = {
    "bandwidth_gbs": 10.0,
    "step_bytes": {"fp32": 4_000_000, "int8": 1_000_000},
    "step_ms": {"fp32": {1: 1.0, 2: 1.0}, "int8": {1: 0.25, 2: 0.5}},
    "input_gflops": {"fp32": 100.0, "int8": 400.0},
    "input_flops_per_row": 1_000_000,
    "flops_per_token": {"lstm": 0, "char": 2_000_000},
}
SENTENCES = [["a", "b", "c"], ["a"]]  # 4 words; with <S> and </S>: 5 and 3 time steps


def test_batch_1_streams_the_paths_own_bytes_at_the_float32_bandwidth():
    # 8 time steps of 4 MB at 10 GB/s: 3.2 ms for 4 words; int8: a quarter of the bytes
    assert bench_inference.ceiling_tok_s(CEILINGS, SENTENCES, 1, "fast") == (pytest.approx(4 / 3.2e-3), "bandwidth")
    assert bench_inference.ceiling_tok_s(CEILINGS, SENTENCES, 1, "int8") == (pytest.approx(4 / 0.8e-3), "bandwidth")


def test_a_batch_runs_its_kinds_products_and_the_char_cnn_at_float32s_rate():
    # one batch: 3 distinct words + 2 boundaries through the CNN at float32's 100 GFLOP/s (0.1 ms); 8 rows of
    # input-to-gate products at the kind's rate; steps: 3 at 2 rows, 2 at 1 row
    float32 = 5 * 2e6 / 100e9 + 8 * 1e6 / 100e9 + (3 * 1.0 + 2 * 1.0) / 1000
    int8 = 5 * 2e6 / 100e9 + 8 * 1e6 / 400e9 + (3 * 0.5 + 2 * 0.25) / 1000
    assert bench_inference.ceiling_tok_s(CEILINGS, SENTENCES, 2, "fast") == (pytest.approx(4 / float32), "GEMM")
    assert bench_inference.ceiling_tok_s(CEILINGS, SENTENCES, 2, "int8") == (pytest.approx(4 / int8), "GEMM")


def test_the_split_puts_the_products_apart_from_the_other_ops():
    left, right = torch.randn(256, 256), torch.randn(256, 256)
    split = bench_inference.time_split(lambda: [torch.mm(left, right).relu_() for _ in range(20)])
    assert split.keys() == {"products", "other ops", "outside ops", "profiled", "unprofiled"}
    assert split["products"] > 0 and split["other ops"] > 0
    assert split["products"] + split["other ops"] + split["outside ops"] == pytest.approx(split["profiled"])


def test_the_workers_methods_are_the_quantized_paths_listed():
    assert bench_inference._methods("int8,bf16") == ["int8", "bf16"]
    assert bench_inference._methods("fast") == []
