"""`elmo-embed` into HDF5 and into Parquet, side by side, and the size of each Parquet layout.

Throughput: the first `--sentences` sentences of a CoNLL file (default: 2,000 of the shared dev set, one per line),
each model (`--models`: model folders) embedded by `elmo-embed` in a fresh process per run, the HDF5 and Parquet runs
alternating `--repeats` times so that a machine whose load changes weighs on both alike; the median seconds of each
and their ratio (the bar: Parquet within 1.1x of HDF5). Sizes (`--sizes MODEL`): the Parquet folder of every
`--layers` / `--pooling` / `--vector-dtype` combination on that model, measured, beside the bytes of its values
computed from the corpus' word count (`words x layers x width x bytes`), so that the table for 'original' (width 1024,
3 layers) per million sentences is a computation checked here. Prints one JSON object; names the CPU and the load.

    python benchmarks/bench_parquet.py --models FIXTURE_DIR ORIGINAL_DIR [--sentences 2000] [--repeats 2]
        [--sizes FIXTURE_DIR]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

DEFAULT_CONLL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "conll2003" / "dev.txt"
SIZE_SETTINGS = [  # (layers, pooling, vector dtype)
    (layers, pooling, dtype)
    for layers in ("all", "top")
    for pooling in ("none", "mean")
    for dtype in ("float32", "float16")
]


def conll_sentences(path: Path, count: int) -> list[str]:
    """The first `count` sentences of a CoNLL file (the first column of each block), `-DOCSTART-` left out."""
    sentences, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip():
            words.append(line.split()[0])
        elif words:
            if words != ["-DOCSTART-"]:
                sentences.append(" ".join(words))
            words = []
    return sentences[:count]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def embed(input_path: Path, output: Path, model: Path, *options: str) -> float:
    """Seconds of one `elmo-embed` run in a fresh process (model loading included, as a user runs it)."""
    command = [sys.executable, "-m", "modeling_elmo.embed", str(input_path), str(output), "--model", str(model)]
    start = time.perf_counter()
    subprocess.run([*command, "--no-progress", *options], check=True, capture_output=True)
    return time.perf_counter() - start


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("part-*.parquet"))


def throughput(work: Path, input_path: Path, model: Path, repeats: int) -> dict:
    seconds: dict[str, list[float]] = {"hdf5": [], "parquet": []}
    for repeat in range(repeats):
        for output_format in ("hdf5", "parquet") if repeat % 2 == 0 else ("parquet", "hdf5"):
            output = work / f"{model.name}-{repeat}.{output_format}"
            seconds[output_format].append(embed(input_path, output, model, "--format", output_format))
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    return {"seconds": seconds, "median": medians, "parquet_over_hdf5": medians["parquet"] / medians["hdf5"]}


def sizes(work: Path, input_path: Path, model: Path, words: int, sentences: int) -> list[dict]:
    rows = []
    for layers, pooling, dtype in SIZE_SETTINGS:
        output = work / f"size-{layers}-{pooling}-{dtype}"
        options = ["--format", "parquet", "--layers", layers, "--pooling", pooling, "--vector-dtype", dtype]
        embed(input_path, output, model, *options)
        schema = pq.read_schema(next(output.glob("part-*.parquet")))
        vector_columns = schema.names[2:]
        vector = schema.field(vector_columns[0]).type
        width = (vector if pooling == "mean" else vector.value_type).list_size
        vectors = len(vector_columns) * (sentences if pooling == "mean" else words)
        computed = vectors * width * (4 if dtype == "float32" else 2)
        measured = folder_bytes(output)
        rows.append(
            {
                "layers": layers,
                "pooling": pooling,
                "dtype": dtype,
                "values_bytes": computed,
                "parquet_bytes": measured,
                "overhead": measured / computed - 1,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", type=Path, required=True, help="converted model folders")
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sizes", type=Path, help="a model folder: measure the Parquet size of every layout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-parquet-") as folder:
        work = Path(folder)
        sentences = conll_sentences(args.conll, args.sentences)
        input_path = work / "corpus.txt"
        input_path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        words = sum(len(sentence.split()) for sentence in sentences)
        result = {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "load_average_before": os.getloadavg(),
            "sentences": len(sentences),
            "words": words,
            "mean_words": words / len(sentences),
            "throughput": {str(model): throughput(work, input_path, model, args.repeats) for model in args.models},
        }
        if args.sizes:
            result["sizes"] = sizes(work, input_path, args.sizes, words, len(sentences))
        result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
