"""One package and one remote code for Transformers 4.52 - 5.x: a folder saved under one major loads under the other,
with the package and as remote code without it, and gives the same outputs (`other_major_worker.py` runs there).

The other major's Python comes from `ELMO_OTHER_TRANSFORMERS_PYTHON` (a virtual environment with this checkout
installed, as `.ci/run` builds it); without it these tests skip, and fail in CI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("other_major_worker.py")
SENTENCES = [["The", "U.S.", "didn't", "say", "."], ["Ünïcödé", "👍🏽"], ["a"]]
LABELS = ["O", "B-PER", "I-PER"]
TOLERANCE = 1e-6


def other_python() -> str:
    python = os.environ.get("ELMO_OTHER_TRANSFORMERS_PYTHON")
    if not python:
        message = "ELMO_OTHER_TRANSFORMERS_PYTHON is not set (the other Transformers major's python)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


def major(python: str) -> int:
    code = "import transformers; print(transformers.__version__.split('.')[0])"
    return int(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def site_packages(python: str) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def run_worker(python: str, tmp_path: Path, request: dict, with_package: bool) -> dict:
    """Run `other_major_worker.py` under `python`, with the package or in a clean interpreter, and read its outputs."""
    name = f"{len(list(tmp_path.glob('request-*.json')))}-{'package' if with_package else 'remote'}"
    request = {**request, "output": str(tmp_path / f"outputs-{name}.pt")}
    (tmp_path / f"request-{name}.json").write_text(json.dumps(request))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / f"hf_home-{name}"),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    command = [python, str(WORKER), str(tmp_path / f"request-{name}.json")]
    if not with_package:
        command[1:1] = ["-I", "-S"]
        command.append(site_packages(python))
    completed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-4000:]
    outputs = torch.load(request["output"])
    assert outputs["modeling_elmo_in_sys_modules"] == with_package
    remote_modules = [module.startswith("transformers_modules.") for module in outputs["classes"]]
    assert remote_modules == [not with_package] * 3 + [True]  # the pipeline is the folder's code in both
    return outputs


def assert_same_outputs(found: dict, expected: dict) -> None:
    assert torch.equal(found["attention_mask"], expected["attention_mask"])
    assert len(found["hidden_states"]) == len(expected["hidden_states"]) == 3
    for layer, (ours, theirs) in enumerate(zip(found["hidden_states"], expected["hidden_states"], strict=True)):
        assert ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) <= TOLERANCE, f"layer {layer}"
    assert float((found["logits"] - expected["logits"]).abs().max()) <= TOLERANCE
    assert found["entities"] == expected["entities"]


@pytest.fixture(scope="module")
def other(converted_fixture) -> str:
    python = other_python()
    here, there = int(transformers.__version__.split(".")[0]), major(python)
    assert {here, there} == {4, 5}, f"this Python has Transformers {here}.x, the other one {there}.x"
    return python


@pytest.mark.parametrize("saved_by", ["this major", "other major"])
def test_a_folder_saved_under_one_major_loads_under_the_other(other, converted_fixture, tmp_path, saved_by):
    folder = tmp_path / "tagger"
    save = {"source": str(converted_fixture), "labels": LABELS, "seed": 0}
    saver, loader = (sys.executable, other) if saved_by == "this major" else (other, sys.executable)
    saved = run_worker(saver, tmp_path, {"folder": str(folder), "sentences": SENTENCES, "save": save}, True)
    assert (folder / "transformers_compat.py").is_file()  # the remote code ships the version bridge
    for with_package in (True, False):
        loaded = run_worker(loader, tmp_path, {"folder": str(folder), "sentences": SENTENCES}, with_package)
        assert loaded["transformers_version"].split(".")[0] != saved["transformers_version"].split(".")[0]
        assert_same_outputs(loaded, saved)


def test_a_transformers_below_the_floor_is_named_in_one_line(tmp_path):
    code = "import transformers; transformers.__version__ = '4.51.3'; import modeling_elmo"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert completed.returncode != 0
    last_line = completed.stderr.strip().splitlines()[-1]
    expected = "ELMo needs transformers>=4.52 (this environment has 4.51.3): pip install -U 'transformers>=4.52'"
    assert last_line == f"RuntimeError: {expected}"
