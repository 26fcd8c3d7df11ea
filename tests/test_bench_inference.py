"""benchmarks/bench_inference.py and its jobs (benchmarks/inference_bench/): the ceilings' arithmetic per kind of
product (float32 or a quantization method) on made-up measurements, the time split's sums on a profiled call of known
products, and the command line and the names the other benchmarks import from the script."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench_inference  # noqa: E402
from inference_bench import ceilings, common  # noqa: E402
from inference_bench.split import time_split  # noqa: E402

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
    assert ceilings.ceiling_tok_s(CEILINGS, SENTENCES, 1, "fast") == (pytest.approx(4 / 3.2e-3), "bandwidth")
    assert ceilings.ceiling_tok_s(CEILINGS, SENTENCES, 1, "int8") == (pytest.approx(4 / 0.8e-3), "bandwidth")


def test_a_batch_runs_its_kinds_products_and_the_char_cnn_at_float32s_rate():
    # one batch: 3 distinct words + 2 boundaries through the CNN at float32's 100 GFLOP/s (0.1 ms); 8 rows of
    # input-to-gate products at the kind's rate; steps: 3 at 2 rows, 2 at 1 row
    float32 = 5 * 2e6 / 100e9 + 8 * 1e6 / 100e9 + (3 * 1.0 + 2 * 1.0) / 1000
    int8 = 5 * 2e6 / 100e9 + 8 * 1e6 / 400e9 + (3 * 0.5 + 2 * 0.25) / 1000
    assert ceilings.ceiling_tok_s(CEILINGS, SENTENCES, 2, "fast") == (pytest.approx(4 / float32), "GEMM")
    assert ceilings.ceiling_tok_s(CEILINGS, SENTENCES, 2, "int8") == (pytest.approx(4 / int8), "GEMM")


def test_the_split_puts_the_products_apart_from_the_other_ops():
    left, right = torch.randn(256, 256), torch.randn(256, 256)
    split = time_split(lambda: [torch.mm(left, right).relu_() for _ in range(20)])
    assert split.keys() == {"products", "other ops", "outside ops", "profiled", "unprofiled"}
    assert split["products"] > 0 and split["other ops"] > 0
    assert split["products"] + split["other ops"] + split["outside ops"] == pytest.approx(split["profiled"])


def test_the_workers_methods_are_the_quantized_paths_listed():
    assert common.quantized_methods("int8,bf16") == ["int8", "bf16"]
    assert common.quantized_methods("fast") == []


def test_the_other_benchmarks_names_are_still_the_scripts():
    """bench_engine.py, bench_scale_out.py and bench_serve.py import these from bench_inference."""
    names = ("DEFAULT_CONLL", "_peak_rss_mib", "busy_process", "cpu_description", "ensure_model", "load_corpus")
    assert all(callable(getattr(bench_inference, name)) for name in names[1:])
    assert bench_inference.DEFAULT_CONLL.name == "dev.txt"


def test_the_command_line_is_the_scripts():
    """`python benchmarks/bench_inference.py` takes the same flags as before its jobs moved to inference_bench/ (the
    lead's command among them), and each worker is the script itself."""
    help_text = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_inference.py"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    flags = "--models --batch-sizes --paths --busy-paths --repeats --rounds --omp-passive --no-ceilings"
    assert all(flag in help_text for flag in (*flags.split(), "--long-sentence-words", "--no-split", "--choice"))
    assert common.SCRIPT == BENCHMARKS / "bench_inference.py"
