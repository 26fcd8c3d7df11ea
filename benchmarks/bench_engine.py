"""First call, steady calls, peak memory and output bits of the biLM's inference engine, one setting per process.

For the figures of benchmarks/RESULTS-engine.md: a random-weight 'original' model (or `--models`), the first
`--batch-size` sentences of the benchmark corpus (`bench_inference.load_corpus`) as one batch, called `--calls` times
in a fresh process under `torch.inference_mode()`: the first call's seconds, the median of the others (steady), peak
RSS, and a digest of the last call's outputs (all layers), so that settings and processes can be compared bit for
bit. `--settings` lists implementation names for `model.set_implementation` ("-" for the model's default; the CPU
engine's settings of `BENCHMARK_SETTINGS` are registered under their names here; `products/threads` pairs for
`set_lstm_inference` of versions before it, "-" as threads for None);
`--interleave` runs all `--settings` (implementation names) in one process instead, one model each, one call of each
in turn (the order rotating) for `--calls` rounds after one untimed call each, so that a machine whose load changes
weighs on all alike (steady: the median of a setting's calls, and the median over the rounds of its time over the
first setting's; peak RSS is then the process's); there `--versus DIR` adds the setting "versus": the default of
another version's package folder (a copy of its `modeling_elmo/`, imported under the folder's own name), so that two
versions alternate call by call in one process;
`--busy` runs them again beside a busy process (a Python loop keeping one CPU busy), `--omp-passive` again with
`OMP_WAIT_POLICY=PASSIVE` beside it. `--concurrent` also calls the model from 4 Python threads at once and reports
whether each got the serial call's bits. `--code DIR` imports `modeling_elmo` from DIR (a checkout of an older
version, for side-by-side runs).

    python benchmarks/bench_engine.py [--models original] [--batch-size 64] [--calls 4]
        [--settings -,cpu_packed,cpu_views] [--interleave] [--busy] [--omp-passive] [--concurrent] [--code DIR]
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_inference import DEFAULT_CONLL, _peak_rss_mib, busy_process, ensure_model, load_corpus  # noqa: E402

# The CPU engine's settings compared here besides the package's names (`CpuImplementation(products, threads)`),
# registered by `choose_setting` under these names (the package registered them itself before issue 41)
BENCHMARK_SETTINGS = {
    "cpu_views": ("views", None),
    "cpu_bmm": ("bmm", None),
    "cpu_auto": ("auto", None),
    "cpu_packed": ("packed", None),
    "cpu_threads": ("onednn", "auto"),
}


def choose_setting(model, setting: str) -> None:
    """`model.set_implementation(setting)` ("-": the default), a name of `BENCHMARK_SETTINGS` registered first."""
    from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS

    if setting in BENCHMARK_SETTINGS and setting not in ALL_ELMO_IMPLEMENTATIONS.names():
        from modeling_elmo.engine import CpuImplementation

        ALL_ELMO_IMPLEMENTATIONS.register(setting, CpuImplementation(*BENCHMARK_SETTINGS[setting]))
    model.set_implementation(None if setting == "-" else setting)


def worker(args: argparse.Namespace) -> dict:
    """One setting in this process: the first and the steady call's seconds, peak RSS and the outputs' digest."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    import modeling_elmo

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModel.from_pretrained(args.model_dir).eval()
    if args.setting != "-" and "/" not in args.setting:
        choose_setting(model, args.setting)
    elif args.setting != "-":
        products, threads = args.setting.split("/")
        model.set_lstm_inference(products, None if threads == "-" else int(threads) if threads.isdigit() else threads)
    batch = tokenizer(
        load_corpus(args.conll)[: args.batch_size], is_split_into_words=True, padding=True, return_tensors="pt"
    )
    threads_before = torch.get_num_threads()
    seconds = []
    with torch.inference_mode():
        for _ in range(args.calls):
            start = time.perf_counter()
            layers = model(**batch, output_hidden_states=True).hidden_states
            seconds.append(time.perf_counter() - start)
    digest, peak_rss_mib = _digest(layers), round(_peak_rss_mib())  # before the concurrent calls add theirs
    concurrent = {"concurrent_same": _concurrent_digests(model, batch) == [digest] * 4} if args.concurrent else {}
    return {
        "code": str(Path(modeling_elmo.__file__).parent),
        "first_s": round(seconds[0], 2),
        "steady_s": round(statistics.median(seconds[1:]), 2),
        "first_over_steady": round(seconds[0] / statistics.median(seconds[1:]), 2),
        "calls_s": [round(value, 2) for value in seconds],
        "peak_rss_mib": peak_rss_mib,
        "threads_unchanged": torch.get_num_threads() == threads_before,
        "digest": digest,
    } | concurrent


def interleaved_worker(args: argparse.Namespace) -> dict:
    """All settings (implementation names, "-" for the default) in this process, one model each, one call of each in
    turn, the order rotating from round to round: per setting the median seconds, the median over the rounds of its
    time over the first setting's, and the outputs' digest."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    import modeling_elmo  # noqa: F401  (registers the Auto classes and the implementations)

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    settings = args.setting.split("+")
    models = {setting: AutoModel.from_pretrained(args.model_dir).eval() for setting in settings}
    for setting, model in models.items():
        choose_setting(model, setting)
    if args.versus:
        settings.append("versus")
        models["versus"] = _versus_model(args.versus, args.model_dir)
    batch = tokenizer(
        load_corpus(args.conll)[: args.batch_size], is_split_into_words=True, padding=True, return_tensors="pt"
    )
    seconds, digests = {setting: [] for setting in settings}, {}
    with torch.inference_mode():
        for round_number in range(args.calls + 1):
            shift = round_number % len(settings)
            for setting in settings[shift:] + settings[:shift]:
                start = time.perf_counter()
                layers = models[setting](**batch, output_hidden_states=True).hidden_states
                if round_number:  # the first round is the untimed warm-up
                    seconds[setting].append(time.perf_counter() - start)
                digests[setting] = _digest(layers)
    first = settings[0]  # per round, each setting's time over the first one's: steadier than the medians under load
    return {
        setting: {
            "steady_s": round(statistics.median(values), 3),
            f"over_{first}": round(statistics.median(a / b for a, b in zip(values, seconds[first], strict=True)), 3),
            "digest": digests[setting],
        }
        for setting, values in seconds.items()
    } | {"peak_rss_mib": round(_peak_rss_mib()), "load_average": os.getloadavg()}


def _versus_model(folder: Path, model_dir: Path):
    """`ElmoModel` of the package in `folder` (imported under the folder's name, without registering its Auto classes
    over this version's: as a light-start command does) loaded from `model_dir`, in eval mode."""
    import importlib

    if folder.name == "modeling_elmo":  # that name is this version's package, already imported
        raise SystemExit(f"--versus {folder}: copy that package to a folder of another name (such as elmo_base)")
    sys.path.insert(0, str(folder.parent))
    argv0, sys.argv[0] = sys.argv[0], "elmo-embed"
    try:
        package = importlib.import_module(f"{folder.name}.modeling_elmo")
        if (folder / "engine").is_dir():  # its implementations, registered in its own registry
            importlib.import_module(f"{folder.name}.engine")
    finally:
        sys.argv[0] = argv0
    return package.ElmoModel.from_pretrained(model_dir).eval()


def _digest(layers) -> str:
    return hashlib.sha256(b"".join(layer.numpy().tobytes() for layer in layers)).hexdigest()[:16]


def _concurrent_digests(model, batch) -> list[str]:
    """The digests of 4 calls of `model` on `batch` from 4 Python threads started together."""
    import torch

    digests = [None] * 4

    def call(index: int) -> None:
        with torch.inference_mode():
            digests[index] = _digest(model(**batch, output_hidden_states=True).hidden_states)

    workers = [threading.Thread(target=call, args=(index,)) for index in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return digests


def spawn(args: argparse.Namespace, model_dir: Path, setting: str, busy: bool, passive: bool) -> dict:
    command = [sys.executable, __file__, "--worker", "--model-dir", str(model_dir), f"--setting={setting}"]
    command += ["--interleave"] * args.interleave + ([f"--versus={args.versus}"] if args.versus else [])
    command += ["--batch-size", str(args.batch_size), "--calls", str(args.calls), "--conll", str(args.conll)]
    command += ["--concurrent"] * (args.concurrent and not busy)
    environment = dict(os.environ)
    if args.code:
        environment["PYTHONPATH"] = str(args.code)
    if passive:
        environment["OMP_WAIT_POLICY"] = "PASSIVE"
    competitor = busy_process() if busy else None
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=environment)
    finally:
        if competitor is not None:
            competitor.kill()
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        return {"failed": result.stderr[-1500:]}
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="original")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--settings", default="-")
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--omp-passive", action="store_true")
    parser.add_argument("--concurrent", action="store_true")
    parser.add_argument("--interleave", action="store_true")
    parser.add_argument("--versus", type=Path)
    parser.add_argument("--code", type=Path)
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL)
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-bench")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--setting", default="-", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps((interleaved_worker if args.interleave else worker)(args)), flush=True)
        return
    states = [(False, False)] + [(True, False)] * args.busy + [(True, True)] * args.omp_passive
    for name in args.models.split(","):
        model_dir = ensure_model(args.work_dir, name)
        for busy, passive in states:
            for setting in [args.settings.replace(",", "+")] if args.interleave else args.settings.split(","):
                row = spawn(args, model_dir, setting, busy, passive)
                label = {"model": name, "setting": setting, "busy": busy, "omp_passive": passive}
                print(json.dumps(label | row), flush=True)


if __name__ == "__main__":
    main()
