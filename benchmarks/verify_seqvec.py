"""
Cross-check `elmo run-legacy` on SeqVec's and bio_embeddings' calls against AllenNLP 0.9.0 + seqvec 0.4.1 themselves
(never a test, never a dependency): the same unchanged programs run in the oracle environment (Python 3.7, torch
1.12.1, AllenNLP 0.9.0, seqvec 0.4.1) and here through `elmo run-legacy`, on the same inputs; every output is compared
and the times are printed side by side, with the CPU's name.

    bash ../shared/peers/setup_legacy_oracles.sh allennlp09-py37    # once (~10 min)
    pip install --no-deps seqvec==0.4.1                              # seqvec's console script, here
    python benchmarks/verify_seqvec.py [--threads 2] [--proteins 8] [--report benchmarks/RESULTS-seqvec.md]

In the model layout seqvec expects (`weights.hdf5`, `options.json`), on random protein sequences:
1. seqvec's console script on the fixture biLM, with `--layer all` and a small `--batchsize` (several batches, so
   the LSTM states carried from batch to batch count), with `--protein` (per-protein vectors, .npz) and with the
   default `--layer sum` written as HDF5 (.h5): every dataset's names, shapes, dtypes and values.
2. A program making bio_embeddings' SeqVecEmbedder calls (`from allennlp.commands.elmo import ElmoEmbedder`; four
   warm-up `embed_sentence` of its fixed sequence, `embed_batch` over batches of proteins, `embed_sentence`,
   `embed_sentences`, `sum(0).mean(0)` per protein) and, on a second embedder, the first protein without the warm-up
   (the warm-up's effect on the stateful outputs), on the fixture biLM and on a random biLM of the 'original' ELMo
   architecture (1024-dimensional layers, like SeqVec's), where it times its own embedding calls (wall time and the
   process's CPU time: on a shared machine the CPU time is the steadier figure).
Exit status 1 when an output differs by more than --tolerance (1e-5), 2 when an environment is missing.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT.parent / "shared" / "fixtures" / "elmo"
DEFAULT_ORACLE = Path(tempfile.gettempdir()) / "legacy-oracles" / "allennlp09-py37"
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
# bio_embeddings 0.2.3's warm-up sequence (embed/seqvec_embedder.py: T0922 from CASP)
WARMUP_SEQUENCE = "MGSSHHHHHHSSGLVPRGSHMASVQKFPGDANCDGIVDISDAVLIMQTMANPSKYQMTDKGRINADVTGNSDGVTVLDAQFIQSYCLGLVELPPVE"

# bio_embeddings' SeqVecEmbedder calls, written for Python 3.7 too (the oracle's).
BIO_EMBEDDINGS_CALLS = """
import json
import sys
import time

import numpy as np
import torch
from allennlp.commands.elmo import ElmoEmbedder

model_dir, fasta, output, warmup_sequence = sys.argv[1:5]
names, sequences = [], []
for line in open(fasta):
    if line.startswith(">"):
        names.append(line[1:].strip())
        sequences.append("")
    else:
        sequences[-1] += line.strip()
files = dict(weight_file=model_dir + "/weights.hdf5", options_file=model_dir + "/options.json", cuda_device=-1)
embedder = ElmoEmbedder(**files)
started, started_cpu = time.perf_counter(), time.process_time()
arrays = {}
with torch.no_grad():
    for _ in range(4):
        embedder.embed_sentence(list(warmup_sequence))
    for start in range(0, len(sequences), 4):
        batch = sequences[start : start + 4]
        for name, embedding in zip(names[start : start + 4], embedder.embed_batch([list(s) for s in batch])):
            arrays["batch/" + name] = embedding
            arrays["per-protein/" + name] = embedding.sum(0).mean(0)
    arrays["sentence"] = embedder.embed_sentence(list(sequences[0]))
    for name, embedding in zip(names, embedder.embed_sentences([list(s) for s in sequences], batch_size=3)):
        arrays["sentences/" + name] = embedding
    embedded, embedded_cpu = time.perf_counter(), time.process_time()
    arrays["cold-first-protein"] = ElmoEmbedder(**files).embed_sentence(list(sequences[0]))
np.savez(output, **arrays)
residues = 4 * len(warmup_sequence) + 2 * sum(map(len, sequences)) + len(sequences[0])
print(json.dumps({"embed_s": embedded - started, "embed_cpu_s": embedded_cpu - started_cpu, "residues": residues}))
"""


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def proteins(count: int, shortest: int, longest: int, seed: int) -> dict[str, str]:
    """`count` random protein sequences, UniProt-style headers (`sp|ID|NAME`, so seqvec's default `--id 1` works)."""
    rng = np.random.default_rng(seed)
    return {
        f"sp|Q{index:05d}|PROT{index}": "".join(rng.choice(list(AMINO_ACIDS), size=rng.integers(shortest, longest)))
        for index in range(count)
    }


def write_fasta(path: Path, sequences: dict[str, str]) -> Path:
    path.write_text("".join(f">{name}\n{sequence[:60]}\n{sequence[60:]}\n" for name, sequence in sequences.items()))
    return path


def seqvec_model_folder(folder: Path, options: Path, weights: Path) -> Path:
    """A model folder as seqvec expects it: `weights.hdf5` and `options.json` (links to the original files)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in (("weights.hdf5", weights), ("options.json", options)):
        if not (folder / name).exists():
            (folder / name).symlink_to(target.resolve())
    return folder


def original_architecture_model(folder: Path) -> Path:
    """A random biLM of the 'original' ELMo architecture (2x4096_512_2048cnn_2xhighway), written once."""
    if not (folder / "lm_weights.hdf5").exists():
        sys.path.insert(0, str(ROOT))
        from modeling_elmo.conversion.testing_utils import OriginalArchitecture, write_random_original_checkpoint

        filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
        architecture = OriginalArchitecture(dim=4096, projection_dim=512, char_dim=16, filters=filters)
        write_random_original_checkpoint(folder / "original", architecture, seed=0)
        for name in ("options.json", "lm_weights.hdf5"):
            os.replace(folder / "original" / name, folder / name)
    return seqvec_model_folder(folder / "seqvec", folder / "options.json", folder / "lm_weights.hdf5")


def read_outputs(path: Path) -> dict[str, np.ndarray]:
    if path.suffix == ".h5":
        with h5py.File(path, "r") as handle:
            return {name: handle[name][...] for name in handle}
    with np.load(path) as arrays:
        return {name: arrays[name] for name in arrays.files}


def compare(expected_path: Path, found_path: Path) -> tuple[float, str | None]:
    """(max abs difference over every array, a problem with names/shapes/dtypes or None)."""
    expected, found = read_outputs(expected_path), read_outputs(found_path)
    if expected.keys() != found.keys():
        return float("inf"), f"keys differ: {sorted(expected.keys() ^ found.keys())[:5]}"
    worst = 0.0
    for name, array in expected.items():
        if array.shape != found[name].shape or array.dtype != found[name].dtype:
            return float("inf"), f"{name}: {array.shape} {array.dtype} vs {found[name].shape} {found[name].dtype}"
        if array.size:
            worst = max(worst, float(np.abs(array.astype(np.float64) - found[name]).max()))
    return worst, None


def run(command: list[str], environment: dict[str, str]) -> str:
    """The command's stdout (this script stops, showing its stderr, if it fails)."""
    result = subprocess.run(command, env=environment, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--oracle", type=Path, default=DEFAULT_ORACLE, help="the allennlp09-py37 environment")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of both sides")
    parser.add_argument("--proteins", type=int, default=8, help="proteins of the timed runs ('original' size)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side (alternating; median shown)")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--work", type=Path, help="keep inputs and outputs here (default: a temporary folder)")
    parser.add_argument("--report", type=Path, help="also write the Markdown report to this file")
    args = parser.parse_args()

    oracle_python, oracle_seqvec = args.oracle / "bin" / "python", args.oracle / "bin" / "seqvec"
    if not (args.oracle / ".ready").is_file():
        print(f"{args.oracle}: no ready oracle (bash ../shared/peers/setup_legacy_oracles.sh allennlp09-py37)")
        return 2
    scripts = Path(sysconfig.get_path("scripts"))
    elmo, our_seqvec = shutil.which("elmo", path=str(scripts)), scripts / "seqvec"
    if elmo is None or not our_seqvec.is_file():
        print(f"{scripts}: needs this project's `elmo` and seqvec's script (pip install --no-deps seqvec==0.4.1)")
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="verify-seqvec-"))
    work.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ, OMP_NUM_THREADS=str(args.threads), HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    environment.pop("PYTHONPATH", None)
    calls = work / "bio_embeddings_calls.py"
    calls.write_text(BIO_EMBEDDINGS_CALLS)

    fixture_model = seqvec_model_folder(work / "fixture", FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5")
    models = {"fixture": fixture_model, "original-size random": original_architecture_model(work / "original")}
    inputs = {
        "fixture": write_fasta(work / "fixture.fasta", proteins(12, 5, 90, seed=1)),
        "original-size random": write_fasta(work / "timed.fasta", proteins(args.proteins, 50, 300, seed=2)),
    }
    option_sets = {
        "--layer all --batchsize 300 (.npz)": (["--layer", "all", "--batchsize", "300"], ".npz"),
        "--protein (.npz)": (["--protein"], ".npz"),
        "--layer sum (.h5)": ([], ".h5"),
    }
    commands = {"09": [str(oracle_seqvec)], "ours": [elmo, "run-legacy", "seqvec"]}
    rows, timings, failed = [], [], False
    for model_name, model in models.items():
        fasta = inputs[model_name]
        for label, (options, suffix) in option_sets.items() if model_name == "fixture" else ():
            outputs = {side: work / f"{model_name.split()[0]}-{len(rows)}-{side}{suffix}" for side in ("09", "ours")}
            for side in ("09", "ours"):
                command = [*commands[side], "-i", str(fasta), "-o", str(outputs[side]), "--model", str(model)]
                run([*command, *options, "--cpu", "--silent"], environment)
            difference, problem = compare(outputs["09"], outputs["ours"])
            failed |= problem is not None or difference > args.tolerance
            rows.append((model_name, f"`seqvec {label}`", difference, problem))
        outputs = {side: work / f"{model_name.split()[0]}-calls-{side}.npz" for side in ("09", "ours")}
        runs = {"09": [], "ours": []}
        repeats = args.repeats if model_name != "fixture" else 1
        for _ in range(repeats):
            for side, prefix in (("09", [str(oracle_python)]), ("ours", [elmo, "run-legacy"])):
                printed = run(
                    [*prefix, str(calls), str(model), str(fasta), str(outputs[side]), WARMUP_SEQUENCE], environment
                )
                runs[side].append(json.loads(printed.strip().splitlines()[-1]))  # the program's own figures
        difference, problem = compare(outputs["09"], outputs["ours"])
        failed |= problem is not None or difference > args.tolerance
        rows.append((model_name, "bio_embeddings' SeqVecEmbedder calls", difference, problem))
        with np.load(outputs["09"]) as original:  # the first protein: first row of the batch after the warm-up
            first = next(name for name in original.files if name.startswith("batch/"))
            warmup_effect = float(np.abs(original[first] - original["cold-first-protein"]).max())
        rows.append((model_name, "(the warm-up's effect on a protein, AllenNLP 0.9 itself)", warmup_effect, None))
        if model_name != "fixture":
            for clock in ("embed_s", "embed_cpu_s"):
                seconds = {side: [figures[clock] for figures in runs[side]] for side in runs}
                what = "wall" if clock == "embed_s" else "CPU time of the process"
                timings.append((f"bio_embeddings' calls, embedding only ({what})", runs["09"][0]["residues"], seconds))

    report = [
        f"CPU: {cpu_name()}, {args.threads} threads (OMP_NUM_THREADS) on each side; AllenNLP 0.9.0 + seqvec 0.4.1 on "
        "torch 1.12.1 / Python 3.7 against `elmo run-legacy` here "
        f"(Python {platform.python_version()}).",
        "",
        "| model | run | max abs difference |",
        "|---|---|---|",
        *[f"| {model} | {what} | {problem or f'{difference:.2e}'} |" for model, what, difference, problem in rows],
        "",
        f"Times ('original'-size random biLM, {args.proteins} proteins, median of {args.repeats}):",
        "",
        "| run | residues | AllenNLP 0.9 | elmo run-legacy | speed-up |",
        "|---|---|---|---|---|",
    ]
    for label, residues, seconds in timings:
        old, new = statistics.median(seconds["09"]), statistics.median(seconds["ours"])
        report.append(f"| {label} | {residues} | {old:.1f} s | {new:.1f} s | {old / new:.2f}x |")
    text = "\n".join(report) + "\n"
    print(text)
    if args.report:
        args.report.write_text(text)
    print("FAILED: an output differs beyond the tolerance" if failed else f"all outputs within {args.tolerance:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
