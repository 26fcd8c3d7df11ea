"""
`ElmoBatchEmbedder`: ELMo vectors for batches of rows, one callable class for every engine that maps a function
over batches (Ray Data's `map_batches`, Spark's `mapInPandas`, `datasets.Dataset.map(batched=True)`), computed by
`elmo-embed`'s own code (the inference core's `embed_batch`), in the Arrow layout of `arrow_layout`.

A batch holds an `id` column (integers, passed through) and a `text` column (split on whitespace, as `elmo-embed`
splits a line: `str.split()`) or a `words` column (lists of strings). The rows of a batch are sorted by (number of
words, position) and cut into inner batches of `batch_size` sentences (or `max_tokens` words), as `elmo-embed` cuts
a window of its input, so one large engine batch never runs as one forward pass; the rows come back in the order
given. Fed the sentences of `elmo-embed`'s batches, in its order and through one embedder (its character-CNN word
cache then holds what `elmo-embed`'s held), the vectors equal `elmo-embed`'s bit for bit at the same thread count;
batched otherwise, a value may move by a float32 step or two (the products' summation order depends on the batch).

What comes back is the kind that came in:

- a `pyarrow.Table` -> a `pyarrow.Table` in `arrow_layout.arrow_schema` (`list<fixed_size_list<float, width>>` per
  word, `fixed_size_list<float, width>` pooled);
- a pandas `DataFrame` -> `pyarrow.Table.to_pandas()` of that table: each vector column an object column holding,
  per word, an array of `num_words` float arrays of shape (width,) per row, pooled one float array of shape (width,)
  (`pyarrow.Table.from_pandas(frame, schema=arrow_schema(...))` gives the fixed-size lists back);
- a dict of columns (`datasets` gives lists, Ray's `batch_format="numpy"` numpy arrays) -> a `pyarrow.Table`, the
  mapping of columns that both `datasets.Dataset.map` and Ray's `map_batches` accept and store with its Arrow types
  (`datasets` refuses Arrow arrays inside a dict, and lists or numpy arrays would lose the fixed-size lists).

Rows whose ids repeat are embedded like any others and kept in place (the embedder is a map; ids are passed through).
ELMo has no window: a sentence of any length runs (its memory grows with its length); with `max_tokens`, a sentence
longer than the bound runs alone.

What a call leaves behind in the caller's process: nothing it did not find. torch's thread count is `threads` during
the call and the caller's again after it (`engine.thread_setting.num_threads`; calls that set it take turns). The
models loaded are kept for the next calls, at most `MODEL_CACHE_SIZE` of them (the least recently used goes first):
a worker serves one model, and a notebook comparing two keeps both, while a process that goes through many models
holds no more than two in memory (the 'original' model, 93.6M float32 parameters, takes about 375 MB). Each embedder
has its own word cache (a call's results depend on the words it has seen, not on another embedder's), used on the
shared model for the length of its call; calls of one model take turns.
"""

from __future__ import annotations  # torch, numpy, pandas and pyarrow types in annotations: imported on first use

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.thread_setting import num_threads
from ..foundation.checks import check_choice, check_count
from ..inference.batches import Sentence, embed_batch
from ..inference.loading import checked_device, load_model
from ..quantization.methods import METHODS
from ..word_embedding_store import WordEmbeddingCache
from .arrow_layout import LAYERS, VALUE_TYPES, vectors_table
from .batching import bucketed_batches

COUNT_WORDING = "{name}: an int >= {minimum}, got {value!r}"  # an argument named first, as every refusal here

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

POOLINGS = (None, "mean")
DEFAULT_BATCH_SIZE = 64  # sentences per forward pass, as `elmo-embed`'s default
DEFAULT_WORD_CACHE = 20_000  # words in the character-CNN cache, as `elmo-embed`'s default
MODEL_CACHE_SIZE = 2  # models kept loaded in a process (module docstring)


@dataclass
class _LoadedModel:
    """A model kept in `_LOADED`, its tokenizer, and the lock its calls hold (one call at a time uses a model)."""

    tokenizer: Any
    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


_LOADED: dict[tuple[str, str, str | None], _LoadedModel] = {}  # (model, device, quantization) -> loaded, LRU first
_LOADING = threading.Lock()  # held while `_LOADED` is read or changed


class ElmoBatchEmbedder:
    """
    ELMo vectors of a batch of rows (see the module docstring for the columns and the kinds of batch).

    Args:
        model: a model folder or a Hub repo id; loaded once per process, on the first call (so the object pickles
            small and travels to Ray actors and Spark workers before any loading), and kept among the
            `MODEL_CACHE_SIZE` most recently used.
        layers: `"all"` (`layer_0` ... `layer_N`: the character CNN, then each biLM layer), `"top"` or `"average"`
            (one `embedding` column: the top layer, or the mean of all layers).
        pooling: `None` (a vector per word) or `"mean"` (one vector per row: the mean over its words, zeros for an
            empty text).
        dtype: the type of the vectors returned: `"float32"`, or `"float16"` (half the size). The model always
            computes in float32; the values are rounded once, on output.
        threads: torch's intra-op threads during each call, the caller's count restored after (Ray actors
            otherwise run with `OMP_NUM_THREADS=1`).
        device: a torch device (`"cpu"`, `"cuda"`, `"cuda:1"`); `None` is the CPU.
        batch_size: sentences per forward pass (`elmo-embed --batch-size`); give this or `max_tokens`.
        max_tokens: words per forward pass instead (`elmo-embed --max-tokens-per-batch`).
        word_cache: words kept in this embedder's own character-CNN cache (`elmo-embed --word-cache`; 0: none).
        quantization: `None` (the exact float32 model) or an `ElmoQuantizationConfig` method, `"int8"`,
            `"int8_weight_only"` or `"bf16"` (`elmo-embed --quantization`; CPU only; not exact: docs/speed.md).
    """

    def __init__(
        self,
        model: str | os.PathLike,
        layers: str = "all",
        pooling: str | None = None,
        dtype: str = "float32",
        threads: int = 1,
        device: str | None = None,
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        word_cache: int = DEFAULT_WORD_CACHE,
        quantization: str | None = None,
    ):
        if not isinstance(model, (str, os.PathLike)):
            raise ValueError(f"model: a model folder or Hub repo id, got {type(model).__name__}")
        check_choice("layers", layers, LAYERS)
        check_choice("pooling", pooling, POOLINGS)
        check_choice("dtype", dtype, tuple(VALUE_TYPES))
        check_count("threads", threads, 1, wording=COUNT_WORDING)
        if device is not None and not isinstance(device, str):
            raise ValueError(f"device: a torch device name such as 'cpu' or 'cuda', got {device!r}")
        if batch_size is not None and max_tokens is not None:
            raise ValueError("batch_size, max_tokens: give one of them, not both")
        if batch_size is None and max_tokens is None:
            batch_size = DEFAULT_BATCH_SIZE
        for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
            if value is not None:
                check_count(name, value, 1, wording=COUNT_WORDING)
        check_count("word_cache", word_cache, 0, wording=COUNT_WORDING)
        check_choice("quantization", quantization, (None, *METHODS))
        if quantization is not None and (device or "cpu").split(":")[0] != "cpu":
            raise ValueError(f"quantization: {quantization!r} runs on the CPU, got device {device!r}")
        self.model, self.layers, self.pooling, self.dtype = os.fspath(model), layers, pooling, dtype
        self.threads, self.device = threads, device or "cpu"
        self.batch_size, self.max_tokens, self.word_cache = batch_size, max_tokens, word_cache
        self.quantization = quantization
        self._word_cache: WordEmbeddingCache | None = None  # this embedder's own, made on first use

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_word_cache": None}  # travels small; the copy fills a cache of its own

    def __call__(self, batch):
        """The vectors of `batch`: a DataFrame for a pandas DataFrame, a pyarrow Table for a Table or a dict."""
        ids, sentences = _read_rows(batch)
        table = self.embed(ids, sentences)
        return _as_kind_of(batch, table)

    def embed(self, ids: Sequence[int], sentences: Sequence[list[str]]) -> pa.Table:
        """The `arrow_layout` table of `sentences` (lists of words), row `k` with id `ids[k]`, in the order given."""
        rows = [Sentence(position, "", list(words)) for position, words in enumerate(sentences)]
        arrays: dict[int, np.ndarray] = {}
        pooling = self.pooling or "none"
        window = max(len(rows), 1)  # the whole engine batch is sorted by length, then cut
        with num_threads(self.threads), self._using_model() as (tokenizer, model):  # the thread setting first
            for inner in bucketed_batches(
                iter(rows), batch_size=self.batch_size, max_tokens=self.max_tokens, window=window
            ):
                arrays.update(embed_batch(model, tokenizer, inner, self.layers, pooling))
        import numpy as np

        bad = [ids[row.index] for row in rows if not np.isfinite(arrays[row.index]).all()]
        if bad:
            raise ValueError(f"ElmoBatchEmbedder: the model gave NaN or infinite values for row id {bad[0]}")
        config = model.config
        return vectors_table(
            ids,
            [len(row.words) for row in rows],
            [arrays[row.index] for row in rows],
            self.layers,
            pooling,
            config.num_hidden_layers + 1,
            config.hidden_size,
            self.dtype,
        )

    def loaded(self):
        """(tokenizer, model) of this process, loaded on first use and shared by the embedders of the same model;
        the `MODEL_CACHE_SIZE` most recently used models stay loaded."""
        loaded = self._loaded_model()
        return loaded.tokenizer, loaded.model

    def _loaded_model(self) -> _LoadedModel:
        key = (self.model, self.device, self.quantization)
        with _LOADING:
            loaded = _LOADED.pop(key, None)
            if loaded is None:
                import torch

                loaded = _LoadedModel(
                    *load_model(
                        self.model,
                        torch.float32,
                        checked_device(self.device),
                        progress=False,
                        quantization=self.quantization,
                    )
                )
            _LOADED[key] = loaded  # the most recently used last
            while len(_LOADED) > MODEL_CACHE_SIZE:
                del _LOADED[next(iter(_LOADED))]
        return loaded

    @contextlib.contextmanager
    def _using_model(self) -> Iterator[tuple[Any, Any]]:
        """(tokenizer, model) for one call, holding the model's lock, with this embedder's word cache on it. Locks
        are taken in one order: the thread setting (`num_threads`), the model, its word cache."""
        loaded = self._loaded_model()
        encoder = loaded.model.char_encoder
        with loaded.lock:
            if self._word_cache is None and self.word_cache:
                self._word_cache = WordEmbeddingCache(self.word_cache)
            encoder.word_cache = self._word_cache
            try:
                yield loaded.tokenizer, loaded.model
            finally:
                encoder.word_cache = None


def _read_rows(batch) -> tuple[list[int], list[list[str]]]:
    """The ids and the words of each row of `batch`, checked: one line naming the column, and the row's id."""
    columns = _column_reader(batch)
    names = columns.names
    if "id" not in names:
        raise ValueError(f"ElmoBatchEmbedder: the batch has no 'id' column (columns: {', '.join(map(str, names))})")
    source = [name for name in ("text", "words") if name in names]
    if len(source) != 1:
        problem = "has both a 'text' and a 'words' column" if source else "has no 'text' or 'words' column"
        raise ValueError(f"ElmoBatchEmbedder: the batch {problem} (columns: {', '.join(map(str, names))})")
    ids = [_checked_id(position, value) for position, value in enumerate(columns.values("id"))]
    read = words_of_text if source[0] == "text" else _words_of_list
    return ids, [read(row_id, value) for row_id, value in zip(ids, columns.values(source[0]), strict=True)]


def _checked_id(position: int, value: Any) -> int:
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(
            f"ElmoBatchEmbedder: row {position} of the batch: column 'id' holds {value!r}, not an integer"
        )
    return int(value)


def words_of_text(row_id: int, text: Any) -> list[str]:
    """The words of a `text` value, split on whitespace as `elmo-embed` splits a line; a non-string is refused."""
    if not isinstance(text, str):
        raise ValueError(f"ElmoBatchEmbedder: row id {row_id}: column 'text' holds {_kind(text)}, not a string")
    return text.split()


def _words_of_list(row_id: int, words: Any) -> list[str]:
    import numpy as np

    if isinstance(words, str) or not isinstance(words, (list, tuple, np.ndarray)):
        raise ValueError(f"ElmoBatchEmbedder: row id {row_id}: column 'words' holds {_kind(words)}, not a word list")
    for word in words:
        if not isinstance(word, str):
            raise ValueError(f"ElmoBatchEmbedder: row id {row_id}: column 'words' holds {_kind(word)}, not a string")
    return [str(word) for word in words]


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__} ({value!r:.40})"


class _ColumnReader:
    """The column names of a batch and each column's values as a Python sequence."""

    def __init__(self, names: list, values):
        self.names, self.values = names, values


def _column_reader(batch) -> _ColumnReader:
    import pyarrow as pa

    if isinstance(batch, pa.Table):
        return _ColumnReader(batch.column_names, lambda name: batch.column(name).to_pylist())
    if _is_data_frame(batch):
        return _ColumnReader(list(batch.columns), lambda name: batch[name].tolist())
    if isinstance(batch, Mapping):
        return _ColumnReader(list(batch), lambda name: list(batch[name]))
    raise TypeError(
        f"ElmoBatchEmbedder: a batch is a pandas DataFrame, a pyarrow Table or a dict of columns, "
        f"got {type(batch).__name__}"
    )


def _is_data_frame(batch) -> bool:
    import sys

    pandas = sys.modules.get("pandas")  # a DataFrame exists only where pandas was imported
    return pandas is not None and isinstance(batch, pandas.DataFrame)


def _as_kind_of(batch, table: pa.Table):
    """`table` as the kind of `batch`: a DataFrame (`to_pandas`) for a DataFrame, else the Table itself."""
    return table.to_pandas() if _is_data_frame(batch) else table
