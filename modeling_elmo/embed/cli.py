"""`elmo-embed`: a corpus (one sentence per line) in, an HDF5 file of ELMo layers out, like `allennlp elmo`.

    elmo-embed INPUT OUTPUT.hdf5 --model PATH_OR_REPO_ID [--layers all|top|average] [--pooling none|mean]
               [--batch-size N | --max-tokens-per-batch N] [--raw] [--dtype float32|bfloat16|float16]
               [--word-cache N] [--window N] [--device cpu] [--overwrite] [--no-progress]
    elmo-embed merge OUTPUT.hdf5 SHARD.hdf5 [SHARD.hdf5 ...] [--overwrite]

Output: one float32 dataset per line, named by its 0-based line index, shaped (num_layers + 1, num_words, 2 *
projection_dim) for `all`, (num_words, 2 * projection_dim) for `top` and `average` (mean of all layers); an empty line
gives an entry with 0 words. `--pooling mean` writes one vector per sentence instead, the mean over its words
((num_layers + 1, 2 * projection_dim) for `all`, (2 * projection_dim,) otherwise; zeros for an empty line).
`sentence_to_index` maps each sentence to its line index (JSON). Resumable after any interruption (see `store.py`),
with results identical to an uninterrupted run. Under `accelerate launch` (or
torchrun) process RANK of WORLD embeds batches RANK, RANK + WORLD, ... into `OUTPUT.shard-RANK-of-WORLD.hdf5`;
`elmo-embed merge` checks and joins them into the file a single process would have written. Every error is one line
on stderr: exit status 2 for bad arguments, 1 for other errors, 130 when interrupted.
"""

from __future__ import annotations  # torch and numpy types in annotations: imported when the work starts

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..commands import start_work
from ..commands.arguments import NO_SUCH_FOLDER, missing_model_folder, subcommands_epilog
from ..commands.errors import ToolError, ToolInputError, report
from ..runtime.cpu_threads import configure_cpu_threads
from .batching import Batch, EmbedInputError, Sentence, bucketed_batches, read_sentences
from .store import (
    PartStore,
    in_line_order,
    keep_last_index,
    merge_files,
    one_line,
    shard_output,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

DTYPES = ("bfloat16", "float16", "float32")  # torch dtypes
LAYERS = ("all", "top", "average")
POOLINGS = ("none", "mean")


class EmbedModelError(ToolError, RuntimeError):
    """A model or tokenizer that cannot be loaded or used."""


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


def load_model(model_id: str, dtype: torch.dtype, device: torch.device, progress: bool = True):
    """Load tokenizer and model (a folder or Hub repo id) of an ELMo model, in eval mode on `device`."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging

    start_work()  # registers the Auto classes

    if not progress:
        logging.disable_progress_bar()
    with _loading(model_id):
        model_type = AutoConfig.from_pretrained(model_id).model_type
    if model_type != "elmo":
        raise EmbedModelError(f"Model '{model_id}' is a '{model_type}' model, not an ELMo model.")
    with _loading(model_id):
        tokenizer = AutoTokenizer.from_pretrained(model_id)
        model = AutoModel.from_pretrained(model_id, dtype=dtype).to(device).eval()
    return tokenizer, model


@contextlib.contextmanager
def _loading(model_id: str) -> Iterator[None]:
    """Report any failure to load `model_id` (its files come from the user: anything can go wrong) on one line."""
    try:
        yield
    except Exception as error:
        raise EmbedModelError(f"Cannot load model '{model_id}': {type(error).__name__}: {one_line(error)}") from error


def _device(name: str) -> torch.device:
    """The torch device `name`, checked to be usable here."""
    import torch

    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:  # AssertionError: CUDA asked of a CPU-only build
        raise EmbedUsageError(f"Cannot use device '{name}': {one_line(error)}") from error
    if device.type == "meta":
        raise EmbedUsageError("Cannot use device 'meta': it holds no values; use cpu or cuda.")
    return device


def _encode(tokenizer, sentences: list[Sentence], device: torch.device) -> dict[str, torch.Tensor]:
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    return {key: encoded[key].to(device) for key in ("input_ids", "attention_mask")}


def embed_batch(model, tokenizer, batch: Batch, layers: str, pooling: str = "none") -> dict[int, np.ndarray]:
    """Float32 arrays of every sentence of `batch` by line index, shaped as in the module docstring: per word, or
    with `pooling="mean"` the mean over the sentence's words (the word axis removed)."""
    import numpy as np
    import torch

    num_layers, width = model.config.num_hidden_layers + 1, model.config.hidden_size
    empty_shape = (num_layers, 0, width) if layers == "all" else (0, width)
    if pooling == "mean":
        empty_shape = empty_shape[:-2] + empty_shape[-1:]
    arrays = {sentence.index: np.zeros(empty_shape, np.float32) for sentence in batch.sentences if not sentence.words}
    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return arrays
    from ..engine import tuned_call

    encoded = _encode(tokenizer, sentences, model.device)
    with torch.inference_mode():  # this command owns its process: fewer threads where the machine is busy, same bits
        output = tuned_call(
            model, lambda: model(**encoded, output_hidden_states=layers != "top"), encoded["attention_mask"]
        )
        if layers == "top":
            values = output.last_hidden_state  # (batch, words, width)
        else:
            values = torch.stack(output.hidden_states, dim=1).float()  # (batch, layers, words, width)
            if layers == "average":
                values = values.mean(dim=1)
        values = values.float().cpu().numpy()
    for row, sentence in enumerate(sentences):
        words = values[row, ..., : len(sentence.words), :]  # ([layers,] words, width)
        arrays[sentence.index] = np.ascontiguousarray(words.mean(axis=-2) if pooling == "mean" else words)
    return arrays


def replay_in_word_cache(model, tokenizer, batch: Batch) -> None:
    """
    Put the words of a batch computed elsewhere (before an interruption, or by another process) through the
    character-CNN word cache as the model's forward pass does. A word's CNN output depends in its last bits on the
    words computed alongside it, so only a cache that sees every batch in order holds the values of an uninterrupted
    single-process run, and gives later batches its exact results.
    """
    import torch

    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return
    encoded = _encode(tokenizer, sentences, model.device)
    words = encoded["input_ids"][encoded["attention_mask"].bool()]  # the forward pass's words, in another order
    with torch.inference_mode():
        model.char_encoder.embed_words(torch.cat([words, model.char_encoder.boundary_char_ids(model.device)]))


def _check_finite(arrays: dict[int, np.ndarray], input_path: Path, dtype: str) -> None:
    import numpy as np

    bad = [index for index, array in arrays.items() if not np.isfinite(array).all()]
    if bad:
        raise EmbedModelError(
            f"The model gave NaN or infinite values for line {min(bad) + 1} of {input_path} (--dtype {dtype}); "
            "finished batches are kept."
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


def _weights_state(model: Path) -> dict[str, list[int]]:
    """Size and modification time of a model folder's weight files, so that a folder converted again at the same
    path is a different run; empty for a Hub repo id (its revision is resolved when loading)."""
    if not model.is_dir():
        return {}
    return {path.name: [path.stat().st_size, path.stat().st_mtime_ns] for path in sorted(model.glob("*.safetensors"))}


def _manifest(args: argparse.Namespace, device: torch.device, rank: int, world: int) -> dict:
    """What makes a run: its input (as it is now), model and arguments, and the process's share."""
    input_path = Path(args.input)
    stat = input_path.stat()
    return {
        "input": str(input_path.resolve()),
        "input_size": stat.st_size,
        "input_mtime_ns": stat.st_mtime_ns,
        "model": str(Path(args.model).resolve()) if Path(args.model).is_dir() else args.model,
        "model_weights": _weights_state(Path(args.model)),
        "layers": args.layers,
        "pooling": args.pooling,
        "raw": args.raw,
        "batch_size": args.batch_size,
        "max_tokens_per_batch": args.max_tokens_per_batch,
        "window": args.window,
        "dtype": args.dtype,
        "word_cache": args.word_cache,
        "device": device.type,  # the index differs between the processes of one run (`process_device`)
        "rank": rank,
        "world": world,
    }


def run(args: argparse.Namespace) -> Path:
    """The embedding job for one process; returns the file it wrote."""
    rank, world = shard_from_environment()
    input_path, output = Path(args.input), shard_output(Path(args.output), rank, world)
    _check_input(input_path, output)
    lines = sum(1 for _ in read_sentences(input_path))  # a line that is not UTF-8 fails here, before any writing
    device = _device(args.device)
    manifest = _manifest(args, device, rank, world)
    device = process_device(device, world)
    store = PartStore(output, manifest, overwrite=args.overwrite)
    import torch
    from tqdm.auto import tqdm

    tokenizer, model = load_model(args.model, getattr(torch, args.dtype), device, progress=not args.no_progress)
    if args.word_cache:
        model.set_word_cache(args.word_cache)
    if device.type == "cpu":  # this command owns its process: fewer threads where the machine is busy, same bits
        model.set_implementation("cpu_threads")
    split = (lambda text: [word for word, _, _ in tokenizer.split_words(text)]) if args.raw else None
    batches = bucketed_batches(
        read_sentences(input_path, split),
        batch_size=args.batch_size,
        max_tokens=args.max_tokens_per_batch,
        window=args.window,
    )
    sentence_to_index: dict[str, str] = {}
    tokens, start = 0, time.perf_counter()
    with store, tqdm(desc=f"elmo-embed {output.name}", total=lines, unit=" sent", disable=args.no_progress) as bar:
        for batch in batches:
            mine = batch.number % world == rank
            if mine:
                for sentence in batch.sentences:
                    keep_last_index(sentence_to_index, sentence.text, sentence.index)
            if mine and not store.is_done(batch.name, [sentence.index for sentence in batch.sentences]):
                arrays = embed_batch(model, tokenizer, batch, args.layers, args.pooling)
                _check_finite(arrays, input_path, args.dtype)
                store.write(batch.name, arrays)
                tokens += sum(len(sentence.words) for sentence in batch.sentences)
                bar.set_postfix_str(f"{tokens / (time.perf_counter() - start):.0f} tok/s", refresh=False)
            elif args.word_cache:
                replay_in_word_cache(model, tokenizer, batch)
            bar.update(len(batch.sentences))
        if _manifest(args, device, rank, world) != manifest:
            raise EmbedInputError(f"{input_path} changed during the run: rerun with --overwrite.")
        store.finalize(in_line_order(sentence_to_index), lines)
    return output


def _integer(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum`."""

    def parse(value: str) -> int:
        with contextlib.suppress(ValueError):
            if int(value) >= minimum:
                return int(value)
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise argparse.ArgumentTypeError(f"must be {kind}, got {value!r}")

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elmo-embed",
        description="Embed a corpus (one sentence per line) with ELMo into an HDF5 file (the `allennlp elmo` layout).",
        epilog=subcommands_epilog("elmo-embed", {"merge OUTPUT SHARD...": "join the files of a multi-process run"}),
    )
    parser.add_argument("input", help="text file, one sentence per line (UTF-8)")
    parser.add_argument("output", help="HDF5 file to write")
    parser.add_argument(
        "--model", required=True, help="model folder, or Hub repo id 'namespace/name' (anything else is a folder)"
    )
    parser.add_argument("--layers", choices=LAYERS, default="all", help="all layers, the top one, or their mean")
    parser.add_argument(
        "--pooling", choices=POOLINGS, default="none", help="none: a vector per word; mean: one per sentence"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--batch-size", type=_integer(1), help="sentences per batch (default 64)")
    size.add_argument("--max-tokens-per-batch", type=_integer(1), help="words per batch instead of --batch-size")
    parser.add_argument("--raw", action="store_true", help="split raw text with the tokenizer (default: whitespace)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="model dtype (output is float32)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--word-cache", type=_integer(0), default=20_000, help="words in the char-CNN cache (0: off)")
    parser.add_argument("--window", type=_integer(1), default=4096, help="sentences sorted together by length")
    parser.add_argument("--overwrite", action="store_true", help="start over: replace the output, drop finished parts")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def build_merge_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="elmo-embed merge", description="Check and join the shard files of a multi-process run.")
    parser.add_argument("output", help="HDF5 file to write")
    parser.add_argument("shards", nargs="+", help="every OUTPUT.shard-*.hdf5 file of the run")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    return parser


def _merge(argv: list[str]) -> str:
    args = build_merge_parser().parse_args(argv)
    count = merge_files(Path(args.output), [Path(shard) for shard in args.shards], overwrite=args.overwrite)
    return f"{args.output} ({count} sentences)"


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command: this process is its own
        configure_cpu_threads()
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["merge"]:
            written = _merge(argv[1:])
        else:
            args = build_parser().parse_args(argv)
            if missing_model_folder(args.model):
                raise EmbedUsageError(f"Model folder not found: {args.model} ({NO_SUCH_FOLDER}).")
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
