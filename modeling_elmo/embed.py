"""`elmo-embed`: a corpus (one sentence per line) in, an HDF5 file of ELMo layers out, like `allennlp elmo`.

    elmo-embed INPUT OUTPUT.hdf5 --model PATH_OR_REPO_ID [--layers all|top|average]
               [--batch-size N | --max-tokens-per-batch N] [--raw] [--dtype float32|bfloat16|float16]
    elmo-embed merge OUTPUT.hdf5 SHARD.hdf5 [SHARD.hdf5 ...]

Output: one float32 dataset per line, named by its 0-based line index, shaped (num_layers + 1, num_words, 2 *
projection_dim) for `all`, (num_words, 2 * projection_dim) for `top` and `average` (mean of all layers); an empty line
gives an entry with 0 words. `sentence_to_index` maps each sentence to its line index (JSON). Resumable after any
interruption (see `embed_store.py`). Under `accelerate launch` (or torchrun) every process embeds its share of the
input into `OUTPUT.shard-RANK-of-WORLD.hdf5`; `elmo-embed merge` joins them.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from .embed_batching import Batch, EmbedInputError, bucketed_batches, read_sentences
from .embed_store import EmbedOutputError, PartStore, merge_files

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
LAYERS = ("all", "top", "average")


class EmbedModelError(RuntimeError):
    """A model or tokenizer that cannot be loaded."""


def shard_from_environment() -> tuple[int, int]:
    """`(rank, world_size)` set by `accelerate launch` / torchrun; `(0, 1)` for a plain run."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def shard_output(output: Path, rank: int, world: int) -> Path:
    """The file one process writes: `output` itself, or `OUTPUT.shard-RANK-of-WORLD.hdf5` in a multi-process run."""
    if world == 1:
        return output
    return output.with_name(f"{output.stem}.shard-{rank:05d}-of-{world:05d}{output.suffix}")


def load_model(model_id: str, dtype: torch.dtype, device: str):
    """Load tokenizer and model (a folder or Hub repo id), in eval mode on `device`."""
    from transformers import AutoModel, AutoTokenizer

    from . import ElmoModel  # noqa: F401  (registers the Auto classes)

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_id)
        model = AutoModel.from_pretrained(model_id, dtype=dtype)
    except (OSError, ValueError) as error:
        raise EmbedModelError(f"Cannot load model '{model_id}': {error}") from error
    return tokenizer, model.to(device).eval()


def embed_batch(model, tokenizer, batch: Batch, layers: str) -> dict[int, np.ndarray]:
    """Float32 arrays of every sentence of `batch` by line index, shaped as in the module docstring."""
    num_layers, width = model.config.num_hidden_layers + 1, model.config.hidden_size
    empty_shape = (num_layers, 0, width) if layers == "all" else (0, width)
    arrays = {sentence.index: np.zeros(empty_shape, np.float32) for sentence in batch.sentences if not sentence.words}
    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return arrays
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.inference_mode():
        output = model(
            input_ids=encoded["input_ids"].to(model.device),
            attention_mask=encoded["attention_mask"].to(model.device),
            output_hidden_states=layers != "top",
        )
        if layers == "top":
            values = output.last_hidden_state  # (batch, words, width)
        else:
            values = torch.stack(output.hidden_states, dim=1).float()  # (batch, layers, words, width)
            if layers == "average":
                values = values.mean(dim=1)
        values = values.float().cpu().numpy()
    for row, sentence in enumerate(sentences):
        arrays[sentence.index] = np.ascontiguousarray(values[row, ..., : len(sentence.words), :])
    return arrays


def run(args: argparse.Namespace) -> Path:
    """The embedding job for one process; returns the file it wrote."""
    rank, world = shard_from_environment()
    output = shard_output(Path(args.output), rank, world)
    input_path = Path(args.input)
    if not input_path.is_file():
        raise EmbedInputError(f"Input file not found: {input_path}")
    stat = input_path.stat()
    manifest = {
        "input": str(input_path.resolve()),
        "input_size": stat.st_size,
        "input_mtime_ns": stat.st_mtime_ns,
        "model": args.model,
        "layers": args.layers,
        "raw": args.raw,
        "batch_size": args.batch_size,
        "max_tokens_per_batch": args.max_tokens_per_batch,
        "window": args.window,
        "dtype": args.dtype,
        "shard": [rank, world],
    }
    tokenizer, model = load_model(args.model, DTYPES[args.dtype], args.device)
    store = PartStore(output, manifest, overwrite=args.overwrite)
    if args.word_cache:
        model.enable_word_cache(args.word_cache)
    split = (lambda text: [word for word, _, _ in tokenizer.split_words(text)]) if args.raw else None
    batches = bucketed_batches(
        read_sentences(input_path, split),
        batch_size=args.batch_size,
        max_tokens=args.max_tokens_per_batch,
        window=args.window,
        shard=(rank, world),
    )
    sentence_to_index: dict[str, str] = {}
    tokens, start = 0, time.perf_counter()
    total = _count_lines(input_path) if world == 1 else None
    with tqdm(desc=f"elmo-embed {output.name}", total=total, unit=" sent", disable=args.no_progress) as bar:
        for batch in batches:
            for sentence in sorted(batch.sentences, key=lambda s: s.index):
                sentence_to_index[sentence.text] = str(sentence.index)
            if not store.is_done(batch.name):
                store.write(batch.name, embed_batch(model, tokenizer, batch, args.layers))
                tokens += sum(len(sentence.words) for sentence in batch.sentences)
                bar.set_postfix_str(f"{tokens / (time.perf_counter() - start):.0f} tok/s", refresh=False)
            bar.update(len(batch.sentences))
    store.finalize(_in_line_order(sentence_to_index))
    return output


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def _in_line_order(sentence_to_index: dict[str, str]) -> dict[str, str]:
    """The map as `allennlp elmo` writes it: keys in the order of their line index."""
    return dict(sorted(sentence_to_index.items(), key=lambda item: int(item[1])))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-embed",
        description="Embed a corpus (one sentence per line) with ELMo into an HDF5 file (the `allennlp elmo` layout). "
        "`elmo-embed merge OUTPUT SHARD...` joins the files of a multi-process run.",
    )
    parser.add_argument("input", help="text file, one sentence per line (UTF-8)")
    parser.add_argument("output", help="HDF5 file to write")
    parser.add_argument("--model", required=True, help="model folder or Hub repo id")
    parser.add_argument("--layers", choices=LAYERS, default="all", help="all layers, the top one, or their mean")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--batch-size", type=_positive, help="sentences per batch (default 64)")
    size.add_argument("--max-tokens-per-batch", type=_positive, help="words per batch instead of --batch-size")
    parser.add_argument("--raw", action="store_true", help="split raw text with the tokenizer (default: whitespace)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="model dtype (output is float32)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--word-cache", type=int, default=20_000, help="words kept in the char-CNN cache (0: off)")
    parser.add_argument("--window", type=_positive, default=4096, help="sentences sorted together by length")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def build_merge_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-embed merge", description="Join the shard files of a multi-process run."
    )
    parser.add_argument("output", help="HDF5 file to write")
    parser.add_argument("shards", nargs="+", help="the OUTPUT.shard-*.hdf5 files")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["merge"]:
            args = build_merge_parser().parse_args(argv[1:])
            count = merge_files(Path(args.output), [Path(shard) for shard in args.shards], overwrite=args.overwrite)
            print(f"Wrote {args.output} ({count} sentences)")
            return 0
        args = build_parser().parse_args(argv)
        if args.max_tokens_per_batch is None and args.batch_size is None:
            args.batch_size = 64
        written = run(args)
    except (EmbedInputError, EmbedOutputError, EmbedModelError) as error:
        print(f"elmo-embed: error: {error}", file=sys.stderr)
        return 1
    print(f"Wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
