"""`elmo-embed to-parquet`: an HDF5 output (elmo-embed's, or `allennlp elmo`'s) as a folder of Parquet files.

Streaming: `ROWS_PER_GROUP` lines are in memory at a time. The folder is the one `elmo-embed --format parquet` writes
(`parquet_store`: `arrow_layout`'s columns, a run record, parts written whole), its parts holding `rows_per_part` lines
each in line order, and resumable the same way. Checked: the datasets must be named `0` ... `N - 1` (every line once)
and share one layout. Pooled files (`--pooling mean`) are refused: they do not record each line's number of words.
"""

import json
from pathlib import Path

import h5py
import numpy as np

from ..foundation.output_folder import reason_of
from ..foundation.owned_files import output_claimed
from .arrow_layout import arrow_schema, vectors_table
from .parquet_store import ParquetFolder
from .store import RUN_RECORD, SENTENCE_TO_INDEX, EmbedOutputError

ROWS_PER_GROUP = 64


def _line_count(handle: h5py.File, path: Path) -> int:
    """The number of lines of an output whose datasets must be named `0` ... `N - 1`."""
    names = [name for name in handle if name != SENTENCE_TO_INDEX]
    lines = sorted(int(name) for name in names if name.isdigit() and str(int(name)) == name)
    if len(lines) != len(names) or lines != list(range(len(lines))):
        odd = sorted(set(names) - set(map(str, range(len(names)))))
        raise EmbedOutputError(f"{path} is not a per-line output: datasets {odd[:3]} are not the line indices 0..N-1.")
    if not lines:
        raise EmbedOutputError(f"{path} holds no line datasets.")
    return len(lines)


def _layout(handle: h5py.File, path: Path) -> tuple[str, int, int, dict]:
    """`(layers, num_layers, width, run record)` from the run record (or, for `allennlp elmo`'s files, the shape of
    line 0: `(layers, words, width)` for all layers, `(words, width)` for `--top` / `--average`)."""
    text = handle.attrs.get(RUN_RECORD)
    record = json.loads(text) if isinstance(text, str) else {"source": "allennlp elmo"}
    if record.get("pooling", "none") != "none":
        raise EmbedOutputError(
            f"{path} holds pooled vectors (--pooling mean), which do not record each line's number of words: "
            "run elmo-embed with --format parquet instead."
        )
    shape = handle["0"].shape
    if len(shape) not in (2, 3):
        raise EmbedOutputError(f"{path}: dataset 0 has shape {shape}, not (layers, words, width) or (words, width).")
    layers = record.get("layers", "all" if len(shape) == 3 else "top")
    return layers, shape[0] if len(shape) == 3 else 1, shape[-1], record


def hdf5_to_parquet(source: Path, output: Path, vector_dtype: str = "float32", rows_per_part: int = 4096) -> int:
    """Convert `source` into the Parquet folder `output` (new, empty, or an interrupted conversion's); returns the
    number of lines."""
    with output_claimed(output, "elmo-embed to-parquet", EmbedOutputError):
        if not source.is_file():
            raise EmbedOutputError(f"HDF5 file not found: {source}")
        try:
            handle = h5py.File(source, "r")
        except OSError as error:
            raise EmbedOutputError(f"Cannot read {source}: {reason_of(error, with_file=False)}") from error
        with handle:
            lines = _line_count(handle, source)
            layers, num_layers, width, hdf5_record = _layout(handle, source)
            expected = (num_layers, width) if layers == "all" else (width,)
            record = {
                "converted_from": hdf5_record,
                "input_lines": lines,
                "window": rows_per_part,
                "layers": layers,
                "pooling": "none",
                "vector_dtype": vector_dtype,
            }
            schema = arrow_schema(layers, "none", num_layers, width, vector_dtype)
            folder = ParquetFolder(output, record)
            with folder:
                for part in range(-(-lines // rows_per_part)):
                    ids = range(part * rows_per_part, min((part + 1) * rows_per_part, lines))
                    if folder.is_done(part):
                        continue
                    with folder.writing(part, schema) as writer:
                        for start in range(ids.start, ids.stop, ROWS_PER_GROUP):
                            group = range(start, min(start + ROWS_PER_GROUP, ids.stop))
                            arrays = [_read_line(handle, source, line, expected) for line in group]
                            counts = [array.shape[-2] for array in arrays]
                            layout = (layers, "none", num_layers, width, vector_dtype)
                            writer.write_table(vectors_table(list(group), counts, arrays, *layout))
        return lines


def _read_line(handle: h5py.File, source: Path, line: int, expected: tuple[int, ...]) -> np.ndarray:
    """Line `line`'s float32 array, checked to have the layout of line 0."""
    array = handle[str(line)][...]
    if array.ndim != len(expected) + 1 or array.shape[:-2] + array.shape[-1:] != expected:
        raise EmbedOutputError(f"{source}: dataset {line} has shape {array.shape}, unlike dataset 0.")
    return array.astype(np.float32, copy=False)
