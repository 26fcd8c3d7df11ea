"""Throughput of `elmo-embed` (HDF5 and Parquet) and of the Ray Data pipeline (`examples/ray_embed.py`:
`ElmoBatchEmbedder` in an actor pool of 2 actors x 1 thread) on the same sentences and the same CPUs, side by side in
one run, for the "Scale out" page (docs/scale-out.md).

The corpus: the first `--sentences` sentences of CoNLL-2003 (`--conll`, default ../shared/data/conll2003/dev.txt),
one per line with their words joined by spaces. Models: random-weight 'original' (the original architecture, converted
like `elmo-convert`) and the fixture biLM (`bench_inference.ensure_model`). Each command runs end to end in its own
process (loading, start-up and writing included), `--repeats` times in alternating order; the table gives the median
seconds, sentences/s, and the Ray pipeline's time over `elmo-embed`'s (the issue's bar: at most 1.25). `elmo-embed`
runs with `OMP_NUM_THREADS` = the CPUs given to Ray (`--cpus`), so both use the same cores. The load average before and
after is printed: on a shared machine, rerun where it is low.

    python benchmarks/bench_scale_out.py [--models original,fixture] [--sentences 2000] [--repeats 1] [--cpus 2]

`--models` also takes model folders (e.g. the 'original' of `../shared/peers/make_random_elmo.py --preset original`
converted with `elmo-convert`).
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_inference import DEFAULT_CONLL, ensure_model  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def conll_lines(path: Path, count: int) -> list[str]:
    """The first `count` sentences of a CoNLL file (word first on each line, blank lines between sentences)."""
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip():
            words.append(line.split()[0])
        elif words:
            sentences.append(" ".join(words))
            words = []
        if len(sentences) == count:
            break
    return sentences


def cpu_model() -> str:
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def timed(command: list[str], environment: dict[str, str]) -> float:
    """Seconds `command` takes to run to a zero exit status."""
    start = time.perf_counter()
    result = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return time.perf_counter() - start


def commands(model: Path, corpus: Path, work: Path, cpus: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The commands compared, each with its environment."""
    base = dict(os.environ, RAY_AUTH_MODE="disabled")
    base.pop("OMP_NUM_THREADS", None)
    elmo_embed = [sys.executable, "-m", "modeling_elmo.embed", str(corpus), str(work / "vectors.hdf5")]
    parquet = [sys.executable, "-m", "modeling_elmo.embed", str(corpus), str(work / "vectors-parquet")]
    ray = [sys.executable, "examples/ray_embed.py", str(corpus), str(work / "vectors-ray"), "--model", str(model)]
    return {
        "elmo-embed HDF5": (
            [*elmo_embed, "--model", str(model), "--overwrite", "--no-progress"],
            dict(base, OMP_NUM_THREADS=str(cpus)),
        ),
        "elmo-embed Parquet": (
            [*parquet, "--format", "parquet", "--model", str(model), "--overwrite", "--no-progress"],
            dict(base, OMP_NUM_THREADS=str(cpus)),
        ),
        f"Ray ({cpus} actors x 1 thread)": ([*ray, "--actors", str(cpus), "--threads", "1"], base),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL)
    parser.add_argument("--models", default="original,fixture")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs for each command (elmo-embed threads, Ray actors)")
    parser.add_argument("--work", type=Path, help="folder for models and outputs (default: a temporary one)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scale-out-"))
    lines = conll_lines(args.conll, args.sentences)
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    words = sum(len(line.split()) for line in lines)
    print(f"CPU: {cpu_model()} ({os.cpu_count()} CPUs; {args.cpus} used by each command)")
    print(f"Corpus: {len(lines)} sentences, {words} words of {args.conll}")
    print(f"Load average before: {os.getloadavg()}")
    print("\n| model | command | seconds (median) | sentences/s | time / elmo-embed HDF5 |")
    print("|---|---|---:|---:|---:|")
    for name in args.models.split(","):
        model = ensure_model(work, name)
        runs = commands(model, corpus, work, args.cpus)
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        for repeat in range(args.repeats):
            order = list(runs) if repeat % 2 == 0 else list(reversed(runs))
            for label in order:
                seconds[label].append(timed(*runs[label]))
        baseline, model_name = statistics.median(seconds["elmo-embed HDF5"]), Path(name).name
        for label, values in seconds.items():
            median = statistics.median(values)
            print(f"| {model_name} | {label} | {median:.1f} | {len(lines) / median:.0f} | {median / baseline:.2f} |")
    print(f"\nLoad average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
