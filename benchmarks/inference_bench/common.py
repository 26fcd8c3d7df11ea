"""What every job of `bench_inference.py` shares: the paths, the corpus and its settings' sentences, the benchmark's
models (random checkpoints of the real shapes, converted once), loading one, a worker process (`spawn`: the script
itself with `--worker`) and its result, the busy process, and small helpers."""

import argparse
import importlib.util
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent
SCRIPT = BENCHMARKS / "bench_inference.py"  # the command, and every worker (`--worker MODE`)
REPO = BENCHMARKS.parent

DEFAULT_CONLL = REPO.parent / "shared" / "data" / "conll2003" / "dev.txt"
FIXTURE = REPO.parent / "shared" / "fixtures" / "elmo"
PEERS = REPO.parent / "shared" / "peers"  # AllenNLP's benchmark worker (bench_allennlp.py), run in its own venv
DEFAULT_PEER_PYTHON = os.environ.get("ELMO_PEER_PYTHON") or str(Path(tempfile.gettempdir()) / "peer/venv/bin/python")
HAS_ONNXRUNTIME = importlib.util.find_spec("onnxruntime") is not None  # the `onnx` path needs the onnx extra
QUANTIZED_PATHS = ("int8", "int8_weight_only", "bf16")  # ElmoQuantizationConfig(method=path)
WARM_UP_PASSES = 2  # untimed passes over a setting's sentences before the timed ones


def load_corpus(path: Path, count: int = 500) -> list[list[str]]:
    """The peer benchmark's corpus: first `count` sentences with >= 11 words, shuffled with Random(0)."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                current.append(line.split()[0])
                continue
            if len(current) >= 11:
                sentences.append(current)
            current = []
            if len(sentences) >= count:
                break
    if len(current) >= 11 and len(sentences) < count:
        sentences.append(current)
    random.Random(0).shuffle(sentences)
    return sentences


def ensure_model(work_dir: Path, name: str) -> Path:
    """Random original-format checkpoint of architecture `name`, or the shared fixture's model for "fixture",
    converted once into `work_dir/name/hf`; a model folder given as `name` is used as it is."""
    from modeling_elmo.conversion.convert import convert_checkpoint
    from modeling_elmo.conversion.testing_utils import ARCHITECTURES, write_random_original_checkpoint

    if Path(name).is_dir():
        return Path(name)
    folder = work_dir / name / "hf"
    if not (folder / "config.json").exists():
        if name == "fixture":
            options, weights = FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5"
        else:
            original = work_dir / name / "original"
            options, weights = write_random_original_checkpoint(original, ARCHITECTURES[name], seed=0)
        convert_checkpoint(str(options), str(weights), folder, overwrite=True)
    return folder


def setting_sentences(conll: Path, count: int, long_sentence: int = 0) -> list[list[str]]:
    """A setting's sentences: the first `count` of the corpus, or one sentence of the corpus' first `long_sentence`
    words."""
    if long_sentence:
        return [[word for sentence in load_corpus(conll) for word in sentence][:long_sentence]]
    return load_corpus(conll)[:count]


def original_folder(work_dir: Path, name: str) -> Path | None:
    """The original-format files (options.json, lm_weights.hdf5) of model `name`, which AllenNLP reads; None for a
    model folder given by path."""
    if name == "fixture":
        return FIXTURE
    folder = work_dir / name / "original"
    return folder if (folder / "options.json").is_file() else None


def load_model(model_dir: Path, threads: int, dtype=None, quantization: str | None = None):
    """(tokenizer, model in eval mode): float32 (or `dtype`), or quantized by `quantization` (a method)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    import modeling_elmo  # registers the Auto classes

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    options = (
        {} if quantization is None else {"quantization_config": modeling_elmo.ElmoQuantizationConfig(quantization)}
    )
    model = AutoModel.from_pretrained(model_dir, dtype=dtype or torch.float32, **options).eval()
    return tokenizer, model


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def busy_process() -> subprocess.Popen:
    """A competing process keeping one CPU busy (a pure-Python loop), as another user's job would."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def quantized_methods(text: str) -> list[str]:
    """The quantization methods of a comma-separated `--path` list given to a worker."""
    return [method for method in text.split(",") if method in QUANTIZED_PATHS]


def median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def spawn(args: argparse.Namespace, mode: str, model_dir: Path, **options) -> dict | None:
    command = [
        sys.executable,
        str(SCRIPT),
        "--worker",
        mode,
        "--model-dir",
        str(model_dir),
        "--conll",
        str(args.conll),
    ]
    command += ["--threads", str(args.threads), "--repeats", str(args.repeats)]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}"] + ([str(value)] if value != "" else [])
    return worker_result(args, command, f"{mode} {model_dir} {options}")


def worker_result(args: argparse.Namespace, command: list[str], label: str) -> dict | None:
    """Run a worker `command` (OpenMP's passive wait with `--omp-passive`) and return its last `RESULT` line's
    JSON, or None (its error printed, named by `label`) where it failed."""
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"} if args.omp_passive else None
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        print(f"FAILED {label}:\n{result.stderr[-2000:]}", flush=True)
        return None
    return json.loads(lines[-1][len("RESULT ") :])
