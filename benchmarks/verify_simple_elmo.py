"""
Cross-check `modeling_elmo.simple_elmo` against simple_elmo 0.9.2 itself (never a test, never a dependency): the same
scenarios run once on simple_elmo (TensorFlow 2.21 with tf-keras, in the venv that
`../shared/peers/setup_legacy_oracles.sh simple_elmo` builds) and once on this project, in separate processes, and
every output is compared; then both time the same job side by side.

    bash ../shared/peers/setup_legacy_oracles.sh simple_elmo
    python benchmarks/verify_simple_elmo.py --oracle-python ORACLES/simple_elmo/bin/python

(ORACLES: where that script builds its venvs, `$LEGACY_ORACLES` or `legacy-oracles` in the temp dir.)

Models: the fixture biLM as NLPL ships models (`options.json` + `model.hdf5` + a `vocab.txt` of `<S>`, `</S>`,
`<UNK>` and the fixture's words), as a folder and as a ZIP; the fixture without a vocabulary and with its weights
under another `*.hdf5` name; the fixture with a gzipped vocabulary that does not start with `<S>` / `</S>` (so
`limit` decides which words read as sentence boundaries); a random biLM with 3 LSTM layers and tight clips.
Scenarios: `get_elmo_vectors` and `get_elmo_vector_average` with every `layers` value, warm-up on and off,
`max_batch_size` smaller than the number of texts (states carried from chunk to chunk, a smaller last chunk), texts of
different lengths (empty ones, an all-empty chunk, long and non-ASCII words, `<S>` as a token), a call repeated
(each call starts from zero states). Exit status 1 when an output differs by more than --tolerance (1e-5) or its
NaNs are elsewhere. The timing: `get_elmo_vectors` on CoNLL-2003 dev sentences with a random biLM of the 'small'
preset (--timing-preset), load and two calls, each side in a fresh process, the sides alternating.
"""

import argparse
import gzip
import json
import os
import pickle
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FIXTURE = SHARED / "fixtures" / "elmo"
CONLL_DEV = SHARED / "data" / "conll2003" / "dev.txt"
EXTRA_TEXTS = [
    [],
    ["Ünïcödé", "naïve", "日本語", "x" * 70],
    ["<S>", "</S>", "<UNK>", "", "a"],
    ["A"],
]


def fixture_texts() -> list[list[str]]:
    """The fixture's 30 sentences in the order of its reference batches: batch i = sentence i of each list."""
    rows = json.loads((FIXTURE / "sentences.json").read_text(encoding="utf-8"))
    return [rows[k][i].split() for i in range(10) for k in range(3)]


def conll_sentences(count: int) -> list[list[str]]:
    sentences, words = [], []
    for line in CONLL_DEV.read_text(encoding="utf-8").splitlines():
        if line.strip():
            words.append(line.split()[0])
        elif words:
            sentences.append(words)
            words = []
    return (sentences + [words] if words else sentences)[:count]


# ---- the models, in the layouts simple_elmo reads ------------------------------------------------------------------


def write_models(work: Path, python: str) -> dict[str, str]:
    """name -> folder or ZIP path of each model of the module docstring."""
    texts = fixture_texts()
    words = list(dict.fromkeys(word for text in texts for word in text))
    folder = work / "fixture"
    folder.mkdir()
    shutil.copy(FIXTURE / "options.json", folder / "options.json")
    shutil.copy(FIXTURE / "lm_weights.hdf5", folder / "model.hdf5")
    (folder / "vocab.txt").write_text("\n".join(["<S>", "</S>", "<UNK>", *words]) + "\n", encoding="utf-8")
    archive = work / "fixture.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("options.json", "model.hdf5", "vocab.txt"):
            zipped.write(folder / name, name)
    no_vocabulary = work / "fixture-no-vocab"
    no_vocabulary.mkdir()
    shutil.copy(FIXTURE / "options.json", no_vocabulary / "options.json")
    shutil.copy(FIXTURE / "lm_weights.hdf5", no_vocabulary / "weights.hdf5")
    late_boundaries = work / "fixture-late-boundaries"
    shutil.copytree(no_vocabulary, late_boundaries)
    with gzip.open(late_boundaries / "vocab.txt.gz", "wt", encoding="utf-8") as vocabulary:
        vocabulary.write("\n".join(["the", "<S>", "bank", "!!!MAXTERMID", "</S>", "<UNK>", *words]) + "\n")
    random_model = work / "random-3-layers"
    subprocess.run(
        [python, str(SHARED / "peers" / "make_random_elmo.py"), "--preset", "fixture", "--n-layers", "3",
         "--cell-clip", "0.5", "--proj-clip", "0.25", "--seed", "1", "--out-dir", str(random_model),
         "--weights-name", "model.hdf5"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return {
        "fixture": str(folder),
        "fixture.zip": str(archive),
        "fixture-no-vocab": str(no_vocabulary),
        "fixture-late-boundaries": str(late_boundaries),
        "random-3-layers": str(random_model),
    }


def scenarios() -> list[dict]:
    """Each: a model, `load`'s keyword arguments and the calls made on it, in order (method, texts, kwargs)."""
    texts = fixture_texts()
    mixed = texts + EXTRA_TEXTS
    every_method = [
        (method, texts, {"layers": layers, "warmup": warmup})
        for method in ("get_elmo_vectors", "get_elmo_vector_average")
        for layers in ("average", "top", "all")
        for warmup in (False, True)
    ]
    boundaries = [["the", "bank", "<S>", "</S>", "banks"], ["<S>"], ["bank", "the"]]
    return [
        {"model": "fixture", "load": {"max_batch_size": 3}, "calls": every_method + [every_method[2]]},
        {"model": "fixture", "load": {"max_batch_size": 4}, "calls": every_method[1::2]},  # last chunk of 2
        {"model": "fixture", "load": {}, "calls": [
            ("get_elmo_vectors", mixed, {}), ("get_elmo_vector_average", mixed, {})]},
        {"model": "fixture", "load": {"max_batch_size": 5}, "calls": [
            (method, mixed, {"layers": layers}) for method in ("get_elmo_vectors", "get_elmo_vector_average")
            for layers in ("average", "top", "all")]},
        {"model": "fixture", "load": {"max_batch_size": 2}, "calls": [
            (method, [[], [], ["a", "b"], [], ["c"]], {"layers": layers})
            for method in ("get_elmo_vectors", "get_elmo_vector_average") for layers in ("average", "top", "all")]},
        {"model": "fixture.zip", "load": {"max_batch_size": 5}, "calls": [
            ("get_elmo_vectors", mixed, {"layers": "all"}), ("get_elmo_vector_average", mixed, {})]},
        {"model": "fixture-no-vocab", "load": {"max_batch_size": 4}, "calls": [
            ("get_elmo_vectors", mixed, {"layers": "all"})]},
        *[{"model": "fixture-late-boundaries", "load": {"max_batch_size": 2, "limit": limit}, "calls": [
            ("get_elmo_vectors", boundaries, {"layers": "all"})]} for limit in (2, 3, 4, 0)],
        {"model": "random-3-layers", "load": {"max_batch_size": 3}, "calls": [
            (method, mixed, {"layers": layers}) for method in ("get_elmo_vectors", "get_elmo_vector_average")
            for layers in ("average", "top", "all")]},
    ]  # fmt: skip


# ---- one side -----------------------------------------------------------------------------------------------------


def new_model(side: str):
    """A fresh `ElmoModel` of `side` (simple_elmo's in a new default graph, so that a model can be loaded again)."""
    if side == "simple_elmo":
        import tensorflow as tf
        from simple_elmo import ElmoModel

        tf.compat.v1.reset_default_graph()
        return ElmoModel()
    from modeling_elmo.simple_elmo import ElmoModel

    return ElmoModel()


def run_scenarios(side: str, models: dict[str, str]) -> dict[str, np.ndarray]:
    results = {}
    for number, scenario in enumerate(scenarios()):
        model = new_model(side)
        model.load(models[scenario["model"]], **scenario["load"])
        for call, (method, texts, kwargs) in enumerate(scenario["calls"]):
            name = f"{number:02d} {scenario['model']} {scenario['load']} call {call}: {method} {kwargs}"
            results[name] = getattr(model, method)(texts, **kwargs)
    return results


def run_timing(side: str, model_dir: str, count: int) -> dict[str, float]:
    """Wall-clock and CPU seconds (all threads of the process) of the import and `load`, and of two calls."""
    texts = conll_sentences(count)
    wall, cpu = time.perf_counter(), time.process_time()
    model = new_model(side)
    model.load(model_dir)
    timings = {"load": time.perf_counter() - wall, "load cpu": time.process_time() - cpu}
    for call in ("call 1", "call 2"):
        wall, cpu = time.perf_counter(), time.process_time()
        model.get_elmo_vectors(texts)
        timings[call], timings[f"{call} cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    timings["tokens"] = sum(len(text) for text in texts)
    return timings


def side_main(args: argparse.Namespace) -> None:
    work = Path(args.work)
    if args.side == "ours":
        import torch

        torch.set_num_threads(args.threads)
    if args.timing:
        result = run_timing(args.side, args.timing, args.timing_texts)
    else:
        result = run_scenarios(args.side, json.loads((work / "models.json").read_text()))
    (work / args.output).write_bytes(pickle.dumps(result))


# ---- the comparison -----------------------------------------------------------------------------------------------


def compare(ours: dict, theirs: dict, tolerance: float) -> tuple[list[str], float]:
    problems, worst = [], 0.0
    for name, expected in theirs.items():
        found = ours[name]
        if found.shape != expected.shape or found.dtype != expected.dtype:
            problems.append(f"{name}: {found.shape} {found.dtype} here, {expected.shape} {expected.dtype} there")
            continue
        if not np.array_equal(np.isnan(found), np.isnan(expected)):
            problems.append(f"{name}: NaNs at other places")
            continue
        difference = float(np.nan_to_num(np.abs(found - expected)).max(initial=0.0))
        worst = max(worst, difference)
        if difference > tolerance:
            problems.append(f"{name}: max abs difference {difference:.3g}")
    return problems, worst


def reference_difference(results: dict) -> float:
    """The first scenario's top layer without warm-up against bilm-tf's reference outputs of the fixture."""
    import h5py

    name = next(name for name in results if name.startswith("00 ") and "'top', 'warmup': False" in name)
    vectors, worst = results[name], 0.0
    for index, text in enumerate(fixture_texts()):
        batch, row = divmod(index, 3)
        with h5py.File(FIXTURE / f"lm_embeddings_{row}.hdf5", "r") as reference:
            expected = np.concatenate([reference[str(batch)][0], reference[str(batch)][1]], axis=-1)
        worst = max(worst, float(np.abs(vectors[index, : len(text)] - expected).max()))
    return worst


def run_side(python: str, side: str, work: str, output: str, args: argparse.Namespace, timing: str = "") -> dict:
    command = [python, __file__, "--side", side, "--work", work, "--output", output, "--threads", str(args.threads)]
    if timing:
        command += ["--timing", timing, "--timing-texts", str(args.timing_texts)]
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TF_USE_LEGACY_KERAS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "OMP_NUM_THREADS": str(args.threads),
        "OMP_WAIT_POLICY": "PASSIVE",  # idle OpenMP threads sleep (the machine may be shared)
    }
    run = subprocess.run(command, env=environment, stderr=subprocess.PIPE, text=True)
    if run.returncode:
        sys.exit(f"the {side} side failed:\n{run.stderr[-3000:]}")
    return pickle.loads((Path(work) / output).read_bytes())


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def report_timing(args: argparse.Namespace, work: Path) -> None:
    model = work / "timing-small"
    subprocess.run(
        [sys.executable, str(SHARED / "peers" / "make_random_elmo.py"), "--preset", args.timing_preset,
         "--out-dir", str(model), "--weights-name", "model.hdf5"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    runs = {"simple_elmo": [], "ours": []}
    for round_number in range(args.timing_rounds):
        for side, python in (("simple_elmo", args.oracle_python), ("ours", sys.executable)):
            runs[side].append(
                run_side(python, side, str(work), f"timing-{side}-{round_number}.pickle", args, str(model))
            )
    tokens = runs["ours"][0]["tokens"]
    print(
        f"\nTiming: get_elmo_vectors on {args.timing_texts} CoNLL-2003 dev sentences ({tokens} tokens), random "
        f"'{args.timing_preset}' biLM, max_batch_size=32, warmup=True, layers='average'; {cpu_name()}, "
        f"{args.threads} threads; median of {args.timing_rounds} fresh processes per side, sides alternating"
    )
    keys = ("load", "call 1", "call 2")
    print(
        f"  {'seconds: wall (CPU)':22}"
        + "".join(f"{name:>20}" for name in ("import + load", *keys[1:]))
        + " tok/s call 2"
    )
    for side, timings in runs.items():
        median = {key: statistics.median(run[key] for run in timings) for key in timings[0] if key != "tokens"}
        cells = "".join(format(f"{median[key]:.2f} ({median[key + ' cpu']:.2f})", ">20") for key in keys)
        print(f"  {side:22}{cells} {tokens / median['call 2']:12.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--oracle-python", help="python of the simple_elmo 0.9.2 venv (setup_legacy_oracles.sh)")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of each side (default 2)")
    parser.add_argument("--timing-texts", type=int, default=320, help="sentences of the timing (0: no timing)")
    parser.add_argument("--timing-preset", default="small", help="make_random_elmo.py preset of the timing model")
    parser.add_argument("--timing-rounds", type=int, default=2)
    parser.add_argument("--timing-only", action="store_true", help="skip the comparison")
    parser.add_argument("--side", choices=["ours", "simple_elmo"], help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--timing", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side_main(args)
        return 0
    if not args.oracle_python:
        parser.error("--oracle-python is required")
    problems = []
    with tempfile.TemporaryDirectory() as work:
        if not args.timing_only:
            models = write_models(Path(work), sys.executable)
            (Path(work) / "models.json").write_text(json.dumps(models))
            theirs = run_side(args.oracle_python, "simple_elmo", work, "simple_elmo.pickle", args)
            ours = run_side(sys.executable, "ours", work, "ours.pickle", args)
            problems, worst = compare(ours, theirs, args.tolerance)
            print(f"{len(theirs)} outputs compared (tolerance {args.tolerance:g}): largest difference {worst:.3g}")
            print("fixture, max_batch_size=3, warmup=False, top layer vs bilm-tf's references:")
            print(f"  simple_elmo {reference_difference(theirs):.3g}, ours {reference_difference(ours):.3g}")
            for problem in problems:
                print(f"DIFFERS {problem}")
        if args.timing_texts:
            report_timing(args, Path(work))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
