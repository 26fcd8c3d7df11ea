"""benchmarks/bench_gpu.py: its roofline arithmetic against the figures of issue 37 (an H100's 168 MB of float32
weights per time step and 151 MFLOP per token for 'original'), and a tiny run on the CPU (`--dry-run`, "eager")
writing the JSON and the table. The GPU figures themselves need a CUDA GPU (docs/speed.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from modeling_elmo import ElmoConfig

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench_gpu  # noqa: E402

ORIGINAL = ElmoConfig(projection_dim=512, lstm_cell_size=4096, num_hidden_layers=2)


def test_roofline_of_original_on_an_h100_and_an_h200():
    h100 = bench_gpu.roofline(ORIGINAL, "NVIDIA H100 80GB HBM3")
    assert h100["gpu"] == "H100"
    assert h100["step_weight_bytes"]["fp32"] == pytest.approx(168e6, rel=0.01)
    assert h100["lstm_flops_per_token"] == pytest.approx(151e6, rel=0.01)
    assert bench_gpu.ceiling(h100, "fp32", 1, 1.0) == (pytest.approx(20e3, rel=0.01), "bandwidth")
    assert bench_gpu.ceiling(h100, "bf16", 1, 1.0) == (pytest.approx(40e3, rel=0.01), "bandwidth")
    assert bench_gpu.ceiling(h100, "fp32", 256, 1.0) == (pytest.approx(0.4e6, rel=0.01), "compute")
    assert bench_gpu.ceiling(h100, "tf32", 256, 1.0)[0] == pytest.approx(3.3e6, rel=0.01)
    h200 = bench_gpu.roofline(ORIGINAL, "NVIDIA H200")
    assert bench_gpu.ceiling(h200, "fp32", 1, 0.5)[0] == pytest.approx(
        0.5 * 4.8e12 / h100["step_weight_bytes"]["fp32"]
    )
    assert bench_gpu.roofline(ORIGINAL, "NVIDIA H100 PCIe")["bandwidth_bytes_per_s"] == 2.0e12
    assert bench_gpu.ceiling(bench_gpu.roofline(ORIGINAL, "cpu"), "fp32", 1, 1.0) == (None, None)


@pytest.mark.integration
def test_dry_run_writes_the_json_and_the_table(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_gpu.py"), "--dry-run", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads((tmp_path / "bench_gpu.json").read_text())
    assert report["device"] == "cpu" and report["roofline"]["gpu"] is None
    assert [(result["mode"], result["batch_size"]) for result in report["results"]] == [("eager", 1), ("eager", 2)]
    for result in report["results"]:
        assert result["tokens_per_s"] > 0 and result["passes"] >= 2
        assert 0 <= result["max_abs_error_vs_reference"] <= 2e-6  # "eager" against "reference", both float32
        assert result["roofline_share"] is None
    table = (tmp_path / "bench_gpu.md").read_text()
    assert "| eager | 1 |" in table and "| eager | 2 |" in table
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.integration
def test_bad_arguments_are_one_line(tmp_path):
    script = str(BENCHMARKS / "bench_gpu.py")
    completed = subprocess.run(
        [sys.executable, script, "--dry-run", "--out-dir", str(tmp_path), "--modes", "cudnn"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 2 and "--modes: unknown cudnn" in completed.stderr
    assert not (tmp_path / "bench_gpu.json").exists()
