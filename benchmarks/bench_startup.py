"""Start-up time of the console commands: `--help`, an argument error and a mistyped model folder, each run as a
fresh process the way its console script runs it, for this checkout and a baseline commit side by side (the runs
alternate, so both see the same machine load). Reports wall time and CPU time (user + system of the process): on a
shared machine the CPU time is the steadier figure, and it is about the wall time the command takes on an idle one.

    python benchmarks/bench_startup.py --baseline HEAD~3 [--this HEAD] [--runs 3]
"""

import argparse
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from io import BytesIO
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = [
    "elmo-convert",
    "elmo-export",
    "elmo-publish",
    "elmo-embed",
    "elmo-train-ner",
    "elmo-train-classifier",
    "elmo-pretrain",
    "elmo-export-onnx",
]
ARGUMENT_ERRORS = {
    "elmo-convert": ["--output", "out"],
    "elmo-export": [],
    "elmo-publish": [],
    "elmo-embed": ["in.txt", "out.h5", "--model", "m", "--batch-size", "0"],
    "elmo-train-ner": ["--model_name_or_path", "m", "--output_dir", "o", "--bogus_flag"],
    "elmo-train-classifier": ["--model_name_or_path", "m", "--output_dir", "o", "--bogus_flag"],
    "elmo-pretrain": ["--options", "x.json", "--vocab_file", "v.txt", "--output_dir", "o", "--bogus_flag"],
    "elmo-export-onnx": [],
}
MISTYPED_MODEL = {
    "elmo-embed": ["in.txt", "out.h5", "--model", "elmo-fixtur"],
    "elmo-train-ner": ["--model_name_or_path", "elmo-fixtur", "--train_file", "train.txt", "--output_dir", "o"],
    "elmo-train-classifier": ["--model_name_or_path", "elmo-fixtur", "--do_train", "--train_file", "t.jsonl"],
}


def entry_point(code: Path, command: str) -> tuple[str, str]:
    """(module, function) of the console script `command` in the checkout `code` (its pyproject.toml)."""
    scripts = tomllib.loads((code / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts[command].split(":")
    return module, function


def run_once(code: Path, command: str, arguments: list[str], work: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one run of `command` from the code in `code`."""
    module, function = entry_point(code, command)
    launcher = f"import sys; sys.argv[0] = {command!r}; from {module} import {function}; sys.exit({function}())"
    environment = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", launcher, *arguments], cwd=work, env=environment, capture_output=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.returncode


def checkout(commit: str, into: Path) -> Path:
    """The tree of `commit` extracted into `into` (a baseline that does not touch the working tree)."""
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="git commit to compare with (e.g. the branch's base)")
    parser.add_argument("--this", help="git commit to measure (default: the working tree)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cases = [(command, "--help", ["--help"]) for command in COMMANDS]
    cases += [(command, "argument error", arguments) for command, arguments in ARGUMENT_ERRORS.items()]
    cases += [(command, "mistyped model folder", arguments) for command, arguments in MISTYPED_MODEL.items()]
    with tempfile.TemporaryDirectory() as temporary:
        baseline = checkout(args.baseline, Path(temporary) / "baseline")
        this = checkout(args.this, Path(temporary) / "this") if args.this else ROOT
        work = Path(temporary) / "work"
        work.mkdir()
        (work / "in.txt").write_text("a sentence\n")
        (work / "train.txt").write_text("EU NNP B-NP B-ORG\n")
        print(
            "| command | case | baseline wall s | baseline CPU s | this wall s | this CPU s | exits (baseline, this) |"
        )
        print("|---|---|---|---|---|---|---|")
        for command, case, arguments in cases:
            timings: dict[str, list[tuple[float, float, int]]] = {"baseline": [], "this": []}
            for _ in range(args.runs):
                for name, code in (("baseline", baseline), ("this", this)):
                    timings[name].append(run_once(code, command, arguments, work))
            cells = []
            for name in ("baseline", "this"):
                walls, cpus = [wall for wall, _, _ in timings[name]], [cpu for _, cpu, _ in timings[name]]
                cells += [f"{median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})", f"{median(cpus):.2f}"]
            codes = f"{timings['baseline'][0][2]}, {timings['this'][0][2]}"
            print(f"| {command} | {case} | {' | '.join(cells)} | {codes} |", flush=True)


if __name__ == "__main__":
    main()
