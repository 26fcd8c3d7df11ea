"""Every command that owns its process, on an idle machine and beside a busy process, under each thread setting.

    python benchmarks/bench_busy_machine.py --work-dir work/elmo-busy --baseline HEAD~1 --repeats 2

Each run is a fresh process of the command on small inputs built from the fixture biLM and CoNLL-2003 (400 training
sentences at batch 8 for the fine-tuning commands, 400 sentences at batch 8 for elmo-embed, 30 steps of elmo-pretrain,
elmo-convert --verify of the fixture), timed from start to exit. Settings: "today" = the code of `--baseline` (a git
revision, run from an exported copy), "new" = this checkout with no thread setting (the commands choose:
`modeling_elmo/runtime/cpu_threads.py`), and the fixed settings `OMP_NUM_THREADS=1` and `OMP_NUM_THREADS=2` with
`OMP_WAIT_POLICY` ACTIVE or PASSIVE (which the commands keep). "busy" = a Python loop (`while True: pass`) running
beside the command for the whole run. Rounds alternate idle and busy, and every row records the 1-minute load average
when its run started. Prints the CPU (`lscpu`) and a Markdown table; raw runs go to WORK_DIR/runs.jsonl.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("ELMO_SHARED_DIR", REPO.parent / "shared"))
FIXTURE = SHARED / "fixtures" / "elmo"
CONLL = SHARED / "data" / "conll2003"
SETTINGS = {
    "today": {},
    "new": {},
    "1 thread": {"OMP_NUM_THREADS": "1"},
    "2 ACTIVE": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"},
    "2 PASSIVE": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
}
FIXED = ("1 thread", "2 ACTIVE", "2 PASSIVE")
QUIET = ["--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true"]


def conll_sentences(split: str, count: int) -> list[str]:
    return CONLL.joinpath(f"{split}.txt").read_text(encoding="utf-8").strip().split("\n\n")[:count]


def words(sentence: str) -> list[str]:
    return [line.split()[0] for line in sentence.splitlines() if line.strip() and not line.startswith("-DOCSTART-")]


def prepare(work: Path) -> dict[str, list[str]]:
    """The inputs, and each command's arguments (outputs under WORK/out, written again by every run)."""
    inputs = work / "inputs"
    if inputs.exists():
        shutil.rmtree(inputs)
    (inputs / "conll").mkdir(parents=True)
    for split, count in (("train", 400), ("dev", 100), ("test", 100)):
        (inputs / "conll" / f"{split}.txt").write_text("\n\n".join(conll_sentences(split, count)) + "\n")
    train = [" ".join(words(s)) for s in conll_sentences("train", 400)]
    train = [text for text in train if text]
    (inputs / "sentences.txt").write_text("\n".join(train) + "\n")
    for name, texts in (("train", train), ("validation", train[:100])):
        rows = [json.dumps({"sentence": text, "label": int(any(c.isdigit() for c in text))}) for text in texts]
        (inputs / f"{name}.jsonl").write_text("\n".join(rows) + "\n")
    (inputs / "corpus").mkdir()
    (inputs / "corpus" / "part-0.txt").write_text("\n".join(train) + "\n")
    python = [sys.executable, "-m"]
    subprocess.run(
        [*python, "modeling_elmo.conversion.convert_command", "--options", str(FIXTURE / "options.json"), "--weights",
         str(FIXTURE / "lm_weights.hdf5"), "--output", str(inputs / "elmo-fixture")],
        check=True, capture_output=True,
    )  # fmt: skip
    vocab = inputs / "vocab.txt"
    subprocess.run(
        [*python, "modeling_elmo.pretraining.train", "build-vocab", "--train_files", str(inputs / "corpus" / "*.txt"),
         "--output", str(vocab)],
        check=True, capture_output=True,
    )  # fmt: skip
    options = json.loads((FIXTURE / "options.json").read_text())
    size = len(vocab.read_text(encoding="utf-8").splitlines())
    options |= {"bidirectional": True, "dropout": 0.1, "all_clip_norm_val": 10.0, "n_epochs": 1, "batch_size": 8}
    options |= {"unroll_steps": 20, "n_negative_samples_batch": min(64, size), "n_tokens_vocab": size}
    options["char_cnn"]["n_characters"] = 261
    (inputs / "options.json").write_text(json.dumps(options))
    out, model = work / "out", str(inputs / "elmo-fixture")
    return {
        "elmo-train-ner": [
            "--model_name_or_path", model, "--data_dir", str(inputs / "conll"), "--output_dir", str(out / "ner"),
            "--num_train_epochs", "1", "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "8",
            *QUIET,
        ],
        "elmo-train-classifier": [
            "--model_name_or_path", model, "--train_file", str(inputs / "train.jsonl"), "--validation_file",
            str(inputs / "validation.jsonl"), "--output_dir", str(out / "classifier"), "--do_train", "--do_eval",
            "--num_train_epochs", "1", "--per_device_train_batch_size", "8", *QUIET,
        ],
        "elmo-pretrain": [
            "--options", str(inputs / "options.json"), "--vocab_file", str(vocab), "--train_files",
            str(inputs / "corpus" / "*.txt"), "--output_dir", str(out / "pretrain"), "--max_steps", "30", *QUIET,
        ],
        "elmo-embed": [
            str(inputs / "sentences.txt"), str(out / "embed.hdf5"), "--model", model, "--batch-size", "8",
            "--no-progress", "--overwrite",
        ],
        "elmo-convert": [
            "--options", str(FIXTURE / "options.json"), "--weights", str(FIXTURE / "lm_weights.hdf5"), "--output",
            str(out / "convert"), "--verify", "--overwrite",
        ],
    }  # fmt: skip


def entry_points(code: Path = REPO) -> dict[str, str]:
    """The console scripts of the checkout `code` (its pyproject.toml)."""
    return tomllib.loads((code / "pyproject.toml").read_text())["project"]["scripts"]


def export_baseline(revision: str, work: Path) -> Path:
    """The repository at `revision`, exported to WORK/baseline (its modeling_elmo comes first on PYTHONPATH)."""
    target = work / "baseline"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def run_once(command: str, arguments: list[str], setting: str, baseline: Path, work: Path) -> dict:
    module, function = entry_points(baseline if setting == "today" else REPO)[command].split(":")
    code = f"import sys; sys.argv[0] = {command!r}; from {module} import {function}; sys.exit({function}())"
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    environment |= SETTINGS[setting] | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    if setting == "today":
        environment["PYTHONPATH"] = str(baseline)
    shutil.rmtree(work / "out", ignore_errors=True)
    (work / "out").mkdir()
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(  # from the work folder: `python -c` puts the current folder first on sys.path
        [sys.executable, "-c", code, *arguments], env=environment, capture_output=True, text=True, cwd=work
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command} ({setting}) exited {done.returncode}:\n{done.stderr[-3000:]}")
    return {"command": command, "setting": setting, "seconds": seconds, "load": load}


def table(runs: list[dict]) -> str:
    lines = [
        "| command | machine | today | new | 1 thread | 2 ACTIVE | 2 PASSIVE | new / best fixed | new / today |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for command in dict.fromkeys(run["command"] for run in runs):
        for machine in ("idle", "busy"):
            chosen = [run for run in runs if run["command"] == command and run["machine"] == machine]
            if {run["setting"] for run in chosen} != set(SETTINGS):
                continue
            median = {s: statistics.median(r["seconds"] for r in chosen if r["setting"] == s) for s in SETTINGS}
            cells = []
            for setting in SETTINGS:
                mine = [r for r in chosen if r["setting"] == setting]
                times = ", ".join(f"{r['seconds']:.1f}" for r in mine)
                loads = ", ".join(f"{r['load']:.1f}" for r in mine)
                cells.append(f"{median[setting]:.1f} ({times}; load {loads})")
            best = min(median[s] for s in FIXED)
            lines.append(
                f"| {command} | {machine} | {' | '.join(cells)} | **{median['new'] / best:.2f}** | "
                f"**{median['new'] / median['today']:.2f}** |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--baseline", help="git revision of 'today' (before the thread choice)")
    parser.add_argument("--report", action="store_true", help="only print the table of WORK_DIR/runs.jsonl")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--commands", default=",".join(entry_points()), help="comma-separated console scripts")
    args = parser.parse_args()
    if args.report:
        print(table([json.loads(line) for line in (args.work_dir / "runs.jsonl").read_text().splitlines()]))
        return
    if args.baseline is None:
        parser.error("--baseline is required to run")
    print(subprocess.run(["lscpu"], capture_output=True, text=True).stdout)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    baseline = export_baseline(args.baseline, args.work_dir)
    jobs = prepare(args.work_dir)
    commands = [command for command in args.commands.split(",") if command in jobs]
    runs, log = [], (args.work_dir / "runs.jsonl").open("a")
    for repeat in range(args.repeats):
        for machine in ("idle", "busy"):
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if machine == "busy" else None
            try:
                for command in commands:
                    order = list(SETTINGS)[repeat % len(SETTINGS) :] + list(SETTINGS)[: repeat % len(SETTINGS)]
                    for setting in order:
                        run = run_once(command, jobs[command], setting, baseline, args.work_dir)
                        run |= {"machine": machine, "repeat": repeat}
                        runs.append(run)
                        log.write(json.dumps(run) + "\n")
                        log.flush()
                        print(json.dumps(run), flush=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    print(table(runs))


if __name__ == "__main__":
    main()
