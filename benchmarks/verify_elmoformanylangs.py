"""
Cross-check `modeling_elmo.elmoformanylangs.Embedder` against ELMoForManyLangs itself (never a test, never a
dependency): the original `Embedder.sents2elmo` runs in its own venv (elmoformanylangs 0.0.4.post2 + overrides 3.1.0,
built by ../shared/peers/setup_legacy_oracles.sh efml) and ours in this one, on the same model folders and sentences;
every output array is compared, and the default call is timed side by side.

    python benchmarks/verify_elmoformanylangs.py [--oracle-python ORACLES/efml/bin/python]

Models (ELMoForManyLangs' exact folder format, written as tests/efml_numpy.py writes them): the small test model with
a word embedding, the same without one, and one of the released size (the packaged architecture: 2048 filters, LSTM
4096 / projection 512, word embedding 100), all with random weights scaled by fan-in. Scenarios, for each:
- "fresh": for every output_layer (-2, -1, 0, 1, 2), the original with `model.encoder.reset_states()` and all the
  sentences in one batch (so that neither its carried states nor its random batch order come in), ours with its
  default (stateless, batches of 64).
- "stateful": the original with its shuffle of the batch order made a no-op (`elmoformanylangs.elmo.random`
  replaced), batch_size 16, two calls in a row after a reset; ours `Embedder(..., batch_size=16, stateful=True)`.
- timing (released size): `sents2elmo(sents)` with every default, best of --repeats, on both.
Exit status 1 when any output differs by more than --tolerance (1e-5) or in shape or dtype.
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from efml_numpy import NON_LATIN_CHARS, NON_LATIN_WORDS, write_efml_model  # noqa: E402

from modeling_elmo.elmoformanylangs import Embedder  # noqa: E402
from modeling_elmo.formats.efml import PACKAGED_ARCHITECTURE  # noqa: E402

# where ../shared/peers/setup_legacy_oracles.sh builds its venvs: $LEGACY_ORACLES, or legacy-oracles in the temp dir
ORACLES = Path(os.environ.get("LEGACY_ORACLES") or Path(tempfile.gettempdir()) / "legacy-oracles")
OUTPUT_LAYERS = (-2, -1, 0, 1, 2)
STATEFUL_BATCH_SIZE = 16

# Runs in the oracle's venv: reads a job (JSON), writes the outputs (npz) and timings (JSON).
ORACLE = r"""
import json, sys, time, types
import numpy as np, torch
import elmoformanylangs.elmo as efml_elmo
from elmoformanylangs import Embedder

job = json.load(open(sys.argv[1], encoding="utf-8"))
torch.set_num_threads(job["threads"])
embedder = Embedder(job["model_dir"])
sentences, arrays, timings = job["sentences"], {}, {}
for layer in job["output_layers"]:
    embedder.model.encoder.reset_states()
    embedder.batch_size = len(sentences)
    for index, array in enumerate(embedder.sents2elmo(sentences, output_layer=layer)):
        arrays[f"fresh/{layer}/{index}"] = array
if job["stateful"]:
    shuffle = efml_elmo.random
    efml_elmo.random = types.SimpleNamespace(shuffle=lambda items: None)  # batches in their sorted order
    embedder.model.encoder.reset_states()
    embedder.batch_size = job["stateful_batch_size"]
    for call in range(2):
        for index, array in enumerate(embedder.sents2elmo(sentences, output_layer=-2)):
            arrays[f"stateful/{call}/{index}"] = array
    efml_elmo.random = shuffle
if job["timing_repeats"]:
    embedder.batch_size = 64
    times = []
    for _ in range(job["timing_repeats"]):
        start = time.perf_counter()
        embedder.sents2elmo(sentences)
        times.append(time.perf_counter() - start)
    timings["default"] = min(times)
np.savez(job["output"], **arrays)
json.dump(timings, open(job["output"] + ".json", "w"))
"""


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    return "unknown CPU"


def fan_in_scaled_model(folder: Path, seed: int, words: list[str] | None, architecture: dict | None) -> Path:
    """tests/efml_numpy.py's model folder with its random weights scaled by 2/sqrt(fan-in), which gives layers of a
    trained model's scale (the unscaled N(0, 0.5) weights of the tests give large values, on which float32 rounding
    in ELMoForManyLangs itself reaches 2e-5)."""
    write_efml_model(folder, words=words, architecture=architecture, seed=seed)
    for name in ("token_embedder.pkl", "encoder.pkl"):
        state = torch.load(folder / name, weights_only=True)
        for key, tensor in state.items():
            if tensor.dim() >= 2 and "embedding" not in key:
                state[key] = tensor / math.sqrt(tensor[0].numel()) * 2
        torch.save(state, folder / name, _use_new_zipfile_serialization=False)
    return folder


def sentences_for(count: int, seed: int) -> list[list[str]]:
    """Sentences of 1..25 tokens: lexicon words, words of lexicon characters (some longer than the limit), and
    characters missing from the lexicon."""
    rng = random.Random(seed)
    chars = [char for char in NON_LATIN_CHARS if char != "\u3000"]

    def token() -> str:
        kind = rng.random()
        if kind < 0.5:
            return rng.choice(NON_LATIN_WORDS)
        if kind < 0.9:
            return "".join(rng.choice(chars) for _ in range(rng.randint(1, 12)))
        return rng.choice(["xyz", "😀", "Привет", "北🙂京", "<bos>"])

    return [[token() for _ in range(rng.randint(1, 25))] for _ in range(count)]


def run_oracle(python: str, job: dict, work: Path) -> tuple[dict[str, np.ndarray], dict]:
    (work / "oracle.py").write_text(ORACLE, encoding="utf-8")
    (work / "job.json").write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
    subprocess.run([python, str(work / "oracle.py"), str(work / "job.json")], check=True, capture_output=True)
    with np.load(job["output"] + ".npz") as arrays:
        found = {key: arrays[key] for key in arrays.files}
    return found, json.loads(Path(job["output"] + ".json").read_text())


def run_ours(model_dir: str, sentences, stateful: bool, repeats: int) -> tuple[dict[str, np.ndarray], dict]:
    arrays, timings = {}, {}
    embedder = Embedder(model_dir)
    for layer in OUTPUT_LAYERS:
        for index, array in enumerate(embedder.sents2elmo(sentences, output_layer=layer)):
            arrays[f"fresh/{layer}/{index}"] = array
    if stateful:
        carried = Embedder(model_dir, batch_size=STATEFUL_BATCH_SIZE, stateful=True)
        for call in range(2):
            for index, array in enumerate(carried.sents2elmo(sentences, output_layer=-2)):
                arrays[f"stateful/{call}/{index}"] = array
    if repeats:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            embedder.sents2elmo(sentences)
            times.append(time.perf_counter() - start)
        timings["default"] = min(times)
    return arrays, timings


def compare(theirs: dict[str, np.ndarray], ours: dict[str, np.ndarray]) -> tuple[dict[str, float], list[str]]:
    """Max abs difference per scenario ("fresh/-2", "stateful", ...) and the problems (keys, shapes, dtypes)."""
    problems = [f"{key}: missing on one side" for key in sorted(set(theirs) ^ set(ours))]
    differences: dict[str, float] = {}
    for key in sorted(set(theirs) & set(ours)):
        a, b = theirs[key], ours[key]
        if a.shape != b.shape or a.dtype != b.dtype:
            problems.append(f"{key}: {a.shape} {a.dtype} (original) vs {b.shape} {b.dtype} (ours)")
            continue
        scenario = "/".join(key.split("/")[:2]) if key.startswith("fresh") else "stateful"
        difference = float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0
        differences[scenario] = max(differences.get(scenario, 0.0), difference)
    return differences, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle-python", default=str(ORACLES / "efml" / "bin" / "python"))
    parser.add_argument("--sentences", type=int, default=100, help="sentences per small model (default 100)")
    parser.add_argument("--released-sentences", type=int, default=8, help="sentences compared on the released size")
    parser.add_argument("--timing-sentences", type=int, default=64, help="sentences timed on the released size")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    failed = False
    with tempfile.TemporaryDirectory(prefix="verify-efml-") as temporary:
        work = Path(temporary)
        released = {**PACKAGED_ARCHITECTURE, "dropout": 0.1}  # the packaged architecture JSON
        models = {
            "small, word embedding": fan_in_scaled_model(work / "small-words", 1, NON_LATIN_WORDS, None),
            "small, characters only": fan_in_scaled_model(work / "small-chars", 2, None, None),
            "released size": fan_in_scaled_model(work / "released", 3, NON_LATIN_WORDS, released),
        }
        print(f"CPU: {cpu_name()}; torch threads {args.threads}; tolerance {args.tolerance:g}\n")
        print("| model | scenario | sentences | max abs difference |\n|---|---|---|---|")
        for name, folder in models.items():
            count = args.released_sentences if name == "released size" else args.sentences
            sentences = sentences_for(count, seed=len(name))
            job = {
                "model_dir": str(folder),
                "sentences": sentences,
                "output_layers": list(OUTPUT_LAYERS),
                "stateful": True,
                "stateful_batch_size": STATEFUL_BATCH_SIZE,
                "timing_repeats": 0,
                "threads": args.threads,
                "output": str(work / f"oracle-{folder.name}"),
            }
            theirs, _ = run_oracle(args.oracle_python, job, work)
            ours, _ = run_ours(str(folder), sentences, stateful=True, repeats=0)
            differences, problems = compare(theirs, ours)
            for scenario, difference in differences.items():
                print(f"| {name} | {scenario} | {len(sentences)} | {difference:.2e} |")
                failed |= not difference <= args.tolerance
            for problem in problems:
                print(f"| {name} | PROBLEM | | {problem} |")
            failed |= bool(problems)

        timing_sentences = sentences_for(args.timing_sentences, seed=99)
        job = {
            "model_dir": str(models["released size"]),
            "sentences": timing_sentences,
            "output_layers": [],
            "stateful": False,
            "stateful_batch_size": STATEFUL_BATCH_SIZE,
            "timing_repeats": args.repeats,
            "threads": args.threads,
            "output": str(work / "oracle-timing"),
        }
        _, their_timing = run_oracle(args.oracle_python, job, work)
        _, our_timing = run_ours(str(models["released size"]), timing_sentences, stateful=False, repeats=args.repeats)
        words = sum(len(sentence) for sentence in timing_sentences)
        print(f"\nTiming, released size, `sents2elmo(sents)` defaults, {len(timing_sentences)} sentences", end="")
        print(f" ({words} words),")
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        print(f"best of {args.repeats}, {cpu_name()}, {args.threads} torch threads, load average {load}:\n")
        print("| | seconds | sentences/s |\n|---|---|---|")
        for label, timing in (("elmoformanylangs 0.0.4.post2", their_timing), ("modeling_elmo", our_timing)):
            seconds = timing["default"]
            print(f"| {label} | {seconds:.2f} | {len(timing_sentences) / seconds:.1f} |")
    print("\nFAILED" if failed else "\nOK: every output within the tolerance")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
