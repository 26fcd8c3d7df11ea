"""`elmo-embed`: a corpus (one sentence per line) in, the ELMo layers of every line out: an HDF5 file like
`allennlp elmo` (the default), or a folder of Parquet files that the data tools read as one dataset.

    elmo-embed INPUT OUTPUT.hdf5 --model PATH_OR_REPO_ID [--layers all|top|average] [--pooling none|mean]
               [--batch-size N | --max-tokens-per-batch N] [--raw] [--dtype float32|bfloat16|float16]
               [--vector-dtype float32|float16] [--quantization none|int8|int8_weight_only|bf16] [--word-cache N]
               [--window N] [--device cpu] [--overwrite] [--no-progress]
    elmo-embed INPUT OUTPUT_DIR --format parquet --model ... (the same options)
    elmo-embed merge OUTPUT.hdf5 SHARD.hdf5 [SHARD.hdf5 ...] [--overwrite]
    elmo-embed merge OUTPUT_DIR FOLDER [FOLDER ...]
    elmo-embed to-parquet OUTPUT.hdf5 OUTPUT_DIR [--vector-dtype float32|float16]

HDF5 output: one dataset per line, named by its 0-based line index, shaped (num_layers + 1, num_words, 2 *
projection_dim) for `all`, (num_words, 2 * projection_dim) for `top` and `average` (mean of all layers); an empty line
gives an entry with 0 words. `--pooling mean` writes one vector per sentence instead, the mean over its words
((num_layers + 1, 2 * projection_dim) for `all`, (2 * projection_dim,) otherwise; zeros for an empty line).
`sentence_to_index` maps each sentence to its line index (JSON). Parquet output: `arrow_layout`'s columns, one row per
line with `id` = the line index, one part file per window (`parquet_store`). Both are resumable after any
interruption, with results identical to an uninterrupted run's.

The input is embedded in windows of `--window` lines, the word cache emptied at the start of each, so a window's
vectors depend on nothing else. Under `accelerate launch` (or torchrun) process RANK of WORLD embeds a contiguous share
of the windows (it reads, tokenizes and embeds nothing else) into `OUTPUT.shard-RANK-of-WORLD.hdf5`, or into its
Parquet folder; `elmo-embed merge` checks and joins them into the output a single process would have written. A run
is identified by content (`run_identity`), so processes on machines with their own copies of the input and model
make shards that merge. Every error is one line on stderr: exit status 2 for bad arguments, 1 for other errors, 130
when interrupted.
"""

from __future__ import annotations  # torch and numpy types in annotations: imported when the work starts

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..commands.arguments import subcommands_epilog
from ..foundation.checks import integer_flag
from ..foundation.errors import ToolError, ToolInputError, report
from ..foundation.model_location import NO_SUCH_FOLDER, missing_model_folder
from ..foundation.owned_files import output_claimed
from ..inference.batches import Batch, embed_batch, replay_in_word_cache
from ..inference.loading import ModelError, checked_device, load_model
from ..quantization.methods import METHODS
from ..runtime.cpu_threads import configure_cpu_threads
from .batching import EmbedInputError, bucketed_batches, read_sentences
from .run_identity import InputScan, model_identity, rank_windows, run_quantization, scan_input, shared_window
from .store import (
    EmbedOutputError,
    PartStore,
    in_line_order,
    keep_last_index,
    merge_files,
    shard_output,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

DTYPES = ("bfloat16", "float16", "float32")  # torch dtypes
VECTOR_DTYPES = ("float32", "float16")  # numpy dtypes of the stored values
FORMATS = ("hdf5", "parquet")
LAYERS = ("all", "top", "average")
POOLINGS = ("none", "mean")


class EmbedUsageError(ToolInputError, ValueError):
    """Command-line arguments or environment variables that cannot work."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are raised (one line, printed by `main`) instead of printed with the usage."""

    def error(self, message: str) -> NoReturn:
        raise EmbedUsageError(f"{message} (see {self.prog} --help)")


def shard_from_environment() -> tuple[int, int]:
    """`(rank, world_size)` set by `accelerate launch` / torchrun; `(0, 1)` for a plain run."""
    rank, world = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    if not (rank.isdigit() and world.isdigit() and int(rank) < int(world)):
        raise EmbedUsageError(f"RANK={rank} and WORLD_SIZE={world} (environment) are not a process rank and count.")
    return int(rank), int(world)


def process_device(device: torch.device, world: int) -> torch.device:
    """The device of this process: with several processes, an accelerator named without an index (`cuda`) means
    the process's own one, `LOCAL_RANK` (set by `accelerate launch` / torchrun)."""
    if world > 1 and device.type != "cpu" and device.index is None:
        import torch

        return torch.device(device.type, int(os.environ.get("LOCAL_RANK", "0")))
    return device


def _check_finite(arrays: dict[int, np.ndarray], input_path: Path, dtype: str, vector_dtype: str) -> None:
    """Refuse values that are not finite, in the model's output or once rounded to `vector_dtype`."""
    import numpy as np

    bad = [index for index, array in arrays.items() if not np.isfinite(array.astype(vector_dtype)).all()]
    if bad:
        raise ModelError(
            f"The model gave NaN or infinite values for line {min(bad) + 1} of {input_path} (--dtype {dtype}, "
            f"--vector-dtype {vector_dtype}); finished batches are kept."
        )


def _check_input(input_path: Path, output: Path) -> None:
    if not input_path.exists():
        raise EmbedInputError(f"Input file not found: {input_path}")
    if not input_path.is_file():
        raise EmbedInputError(f"Input {input_path} is not a regular file.")
    if input_path.stat().st_size == 0:
        raise EmbedInputError(f"Input file {input_path} is empty: nothing to embed.")
    if output.exists() and os.path.samefile(input_path, output):
        raise EmbedInputError(f"Output {output} is the input file.")


def _run_record(args: argparse.Namespace, device: torch.device, scan: InputScan) -> dict:
    """What makes a run, by content (`run_identity`): its input, model and the options that change the vectors."""
    return {
        "input_sha256": scan.sha256,
        "input_bytes": scan.size,
        "input_lines": scan.lines,
        **model_identity(args.model),
        "layers": args.layers,
        "pooling": args.pooling,
        "raw": args.raw,
        "batch_size": args.batch_size,
        "max_tokens_per_batch": args.max_tokens_per_batch,
        "window": scan.window,
        "dtype": args.dtype,
        "vector_dtype": args.vector_dtype,
        "quantization": run_quantization(args.model, args.quantization),  # a folder saved quantized: its method
        "word_cache": args.word_cache,
        "device": device.type,  # the index differs between the processes of one run (`process_device`)
    }


def _input_state(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


class _Embedder:
    """The model of a run, loaded on first use (a finished share needs none), and its window-by-window state."""

    def __init__(self, args: argparse.Namespace, input_path: Path):
        self.args, self.input_path, self.device = args, input_path, None
        self.input_state = _input_state(input_path)
        self.model = self.tokenizer = None
        self.tokens, self.start = 0, None  # the tok/s clock starts with the first batch, not with the model's loading

    def check_input_unchanged(self) -> None:
        """Before an output takes its place: refuse an input that changed since the run began."""
        if _input_state(self.input_path) != self.input_state:
            raise EmbedInputError(f"{self.input_path} changed during the run: rerun with --overwrite.")

    def load(self) -> None:
        if self.model is not None:
            return
        import torch

        quantization = None if self.args.quantization == "none" else self.args.quantization
        self.tokenizer, self.model = load_model(
            self.args.model,
            getattr(torch, self.args.dtype),
            self.device,
            progress=not self.args.no_progress,
            quantization=quantization,
        )
        if self.device.type == "cpu":  # this command owns its process: fewer threads where the machine is busy
            self.model.set_implementation("cpu_threads")

    def window_batches(self, scan: InputScan, window: int) -> Iterator[Batch]:
        """The batches of input window `window`, with the word cache emptied: a window depends on nothing before."""
        args = self.args
        self.load()
        if args.word_cache:
            self.model.set_word_cache(args.word_cache)
        split = (lambda text: [word for word, _, _ in self.tokenizer.split_words(text)]) if args.raw else None
        lines = scan.window_lines(window)
        sentences = read_sentences(self.input_path, split, (lines.start, scan.window_starts[window]), lines.stop)
        return bucketed_batches(
            sentences,
            batch_size=args.batch_size,
            max_tokens=args.max_tokens_per_batch,
            window=scan.window,
            first_window=window,
        )

    def embed(self, batch: Batch) -> dict[int, np.ndarray]:
        """`embed_batch`, checked finite; counts the tokens for the progress bar."""
        if self.start is None:
            self.start = time.perf_counter()
        arrays = embed_batch(self.model, self.tokenizer, batch, self.args.layers, self.args.pooling)
        _check_finite(arrays, self.input_path, self.args.dtype, self.args.vector_dtype)
        self.tokens += sum(len(sentence.words) for sentence in batch.sentences)
        return arrays

    def replay(self, batch: Batch) -> None:
        if self.args.word_cache:
            replay_in_word_cache(self.model, self.tokenizer, batch)

    def rate(self) -> str:
        return f"{self.tokens / (time.perf_counter() - self.start):.0f} tok/s"


def _progress(args: argparse.Namespace, name: str, total: int):
    from tqdm.auto import tqdm

    return tqdm(desc=f"elmo-embed {name}", total=total, unit=" sent", disable=args.no_progress)


def _run_hdf5(args, embedder: _Embedder, scan: InputScan, record: dict, windows: range, rank: int, world: int) -> str:
    """Embed this process's windows into its HDF5 file, batch by batch through the part store."""
    output = shard_output(Path(args.output), rank, world)
    store = PartStore(output, {**record, "rank": rank, "world": world}, overwrite=args.overwrite)
    sentence_to_index: dict[str, str] = {}
    share = sum(len(scan.window_lines(window)) for window in windows)
    embedder.load()  # a model that cannot be loaded fails before anything is written
    reused = 0
    with store, _progress(args, output.name, share) as bar:
        for window in windows:
            batches = list(embedder.window_batches(scan, window))
            done = [store.is_done(batch.name, [sentence.index for sentence in batch.sentences]) for batch in batches]
            last_to_compute = max((number for number, finished in enumerate(done) if not finished), default=-1)
            reused += sum(done)
            for batch, finished in zip(batches, done, strict=True):
                for sentence in batch.sentences:
                    keep_last_index(sentence_to_index, sentence.text, sentence.index)
                if not finished:
                    store.write(batch.name, embedder.embed(batch), args.vector_dtype)
                    bar.set_postfix_str(embedder.rate(), refresh=False)
                elif batch.number < last_to_compute:  # the word cache as an uninterrupted run had it
                    embedder.replay(batch)
                bar.update(len(batch.sentences))
        embedder.check_input_unchanged()
        store.finalize(in_line_order(sentence_to_index), scan.lines)
    return f"{output}" + (f" (resumed: {reused} finished batch(es) of the interrupted run reused)" if reused else "")


def _run_parquet(args, embedder: _Embedder, scan: InputScan, record: dict, windows: range) -> str:
    """Embed this process's windows into the Parquet folder, a part per window, skipping the finished ones."""
    from .arrow_layout import arrow_schema, vectors_table
    from .parquet_store import ParquetFolder

    folder = ParquetFolder(Path(args.output), record, overwrite=args.overwrite)
    if args.overwrite or any(not folder.is_done(window, checksum=False) for window in windows):
        embedder.load()  # a model that cannot be loaded fails before anything is written
    with folder:
        todo = [window for window in windows if not folder.is_done(window)]
        if not todo:
            share = "every line" if len(windows) == len(scan.window_starts) else "this process's share"
            return f"nothing: {args.output} already holds {share} of {args.input} (complete)"
        share = sum(len(scan.window_lines(window)) for window in todo)
        with _progress(args, Path(args.output).name, share) as bar:
            for window in todo:
                batches = embedder.window_batches(scan, window)
                num_layers, width = embedder.model.config.num_hidden_layers + 1, embedder.model.config.hidden_size
                layout = (args.layers, args.pooling, num_layers, width, args.vector_dtype)
                with folder.writing(window, arrow_schema(*layout)) as writer:
                    for batch in batches:
                        arrays = embedder.embed(batch)
                        ids = [sentence.index for sentence in batch.sentences]
                        counts = [len(sentence.words) for sentence in batch.sentences]
                        table = vectors_table(ids, counts, [arrays[index] for index in ids], *layout)
                        writer.write_table(table)
                        bar.set_postfix_str(embedder.rate(), refresh=False)
                        bar.update(len(batch.sentences))
                    embedder.check_input_unchanged()
    reused = f"; {len(windows) - len(todo)} finished part(s) reused" if len(todo) < len(windows) else ""
    return f"{args.output} ({len(todo)} part(s){reused})"


def run(args: argparse.Namespace) -> str:
    """The embedding job for one process; returns what it wrote."""
    rank, world = shard_from_environment()
    output = Path(args.output) if args.format == "parquet" else shard_output(Path(args.output), rank, world)
    with output_claimed(output, "elmo-embed", EmbedOutputError):  # before any check: one run per output
        input_path = Path(args.input)
        _check_input(input_path, Path(args.output))
        embedder = _Embedder(args, input_path)
        scan = scan_input(input_path, args.window)  # a line that is not UTF-8 fails here, before any writing
        window = shared_window(args.window, scan.lines, world)
        if window != args.window:  # a small input: windows small enough that every process gets lines
            scan = scan_input(input_path, window)
        device = checked_device(args.device)
        record = _run_record(args, device, scan)
        embedder.device = process_device(device, world)
        windows = rank_windows(len(scan.window_starts), rank, world)
        if args.format == "parquet":
            return _run_parquet(args, embedder, scan, record, windows)
        return _run_hdf5(args, embedder, scan, record, windows, rank, world)


def check_quantization(quantization: str, dtype: str, device: str) -> None:
    """Refuse, in one line, a quantization with a compute dtype or device it does not run with."""
    if quantization == "none":
        return
    if dtype != "float32":
        raise EmbedUsageError(
            f"--quantization {quantization} computes in float32 around its quantized products: leave --dtype at "
            f"float32 (got --dtype {dtype})."
        )
    if device.split(":")[0] != "cpu":
        raise EmbedUsageError(f"--quantization {quantization} runs on the CPU: use --device cpu (got {device}).")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elmo-embed",
        description="Embed a corpus (one sentence per line) with ELMo into an HDF5 file (the `allennlp elmo` layout) "
        "or a folder of Parquet files.",
        epilog=subcommands_epilog(
            "elmo-embed",
            {
                "merge OUTPUT SHARD...": "join the files (or Parquet folders) of a multi-process run",
                "to-parquet OUTPUT.hdf5 OUTPUT_DIR": "convert an elmo-embed or allennlp HDF5 file to Parquet",
            },
        ),
    )
    parser.add_argument("input", help="text file, one sentence per line (UTF-8)")
    parser.add_argument("output", help="HDF5 file to write (--format parquet: a folder)")
    parser.add_argument("--format", choices=FORMATS, default="hdf5", help="hdf5 (allennlp's layout) or parquet")
    parser.add_argument(
        "--model", required=True, help="model folder, or Hub repo id 'namespace/name' (anything else is a folder)"
    )
    parser.add_argument("--layers", choices=LAYERS, default="all", help="all layers, the top one, or their mean")
    parser.add_argument(
        "--pooling", choices=POOLINGS, default="none", help="none: a vector per word; mean: one per sentence"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--batch-size", type=integer_flag(1), help="sentences per batch (default 64)")
    size.add_argument("--max-tokens-per-batch", type=integer_flag(1), help="words per batch instead of --batch-size")
    parser.add_argument("--raw", action="store_true", help="split raw text with the tokenizer (default: whitespace)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="the model's compute dtype")
    parser.add_argument(
        "--vector-dtype", choices=VECTOR_DTYPES, default="float32", help="the stored values (float16: half the size)"
    )
    parser.add_argument(
        "--quantization",
        choices=("none", *METHODS),
        default="none",
        help="the biLM's weights quantized (CPU, --dtype float32; not exact, see docs/speed.md); none: exact",
    )
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument(
        "--word-cache", type=integer_flag(0), default=20_000, help="words in the char-CNN cache (0: off)"
    )
    parser.add_argument(
        "--window",
        type=integer_flag(1),
        default=4096,
        help="lines sorted together by length; the word cache is emptied at each window, the unit of a "
        "process's share (smaller where a process would get none) and of a Parquet part (default 4096)",
    )
    parser.add_argument("--overwrite", action="store_true", help="start over: replace the output, drop finished parts")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def build_merge_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elmo-embed merge",
        description="Check and join the shard files (or Parquet folders) of a multi-process run.",
    )
    parser.add_argument("output", help="HDF5 file to write (Parquet: a new, empty or partly merged folder)")
    parser.add_argument("shards", nargs="+", help="every OUTPUT.shard-*.hdf5 file of the run, or every folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file (HDF5)")
    return parser


def _merge(argv: list[str]) -> str:
    args = build_merge_parser().parse_args(argv)
    shards = [Path(shard) for shard in args.shards]
    if all(shard.is_dir() for shard in shards):
        from .parquet_store import merge_folders

        count = merge_folders(Path(args.output), shards)
    else:
        count = merge_files(Path(args.output), shards, overwrite=args.overwrite)
    return f"{args.output} ({count} sentences)"


def build_to_parquet_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elmo-embed to-parquet",
        description="Convert an HDF5 output (elmo-embed's or allennlp elmo's) to a folder of Parquet files.",
    )
    parser.add_argument("hdf5", help="HDF5 file: one dataset per line, named by its 0-based index")
    parser.add_argument("output", help="folder to write (new or empty)")
    parser.add_argument("--vector-dtype", choices=VECTOR_DTYPES, default="float32", help="the stored values")
    parser.add_argument("--rows-per-part", type=integer_flag(1), default=4096, help="lines per Parquet file")
    return parser


def _to_parquet(argv: list[str]) -> str:
    from .hdf5_to_parquet import hdf5_to_parquet

    args = build_to_parquet_parser().parse_args(argv)
    count = hdf5_to_parquet(Path(args.hdf5), Path(args.output), args.vector_dtype, args.rows_per_part)
    return f"{args.output} ({count} sentences)"


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command: this process is its own
        configure_cpu_threads()
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["merge"]:
            written = _merge(argv[1:])
        elif argv[:1] == ["to-parquet"]:
            written = _to_parquet(argv[1:])
        else:
            args = build_parser().parse_args(argv)
            if missing_model_folder(args.model):
                raise EmbedUsageError(f"Model folder not found: {args.model} ({NO_SUCH_FOLDER}).")
            check_quantization(args.quantization, args.dtype, args.device)
            if args.max_tokens_per_batch is None and args.batch_size is None:
                args.batch_size = 64
            written = run(args)
    except ToolError as error:
        return report("elmo-embed", error)
    except KeyboardInterrupt:
        print("elmo-embed: interrupted; rerun the same command to resume.", file=sys.stderr)
        return 130
    print(f"Wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
