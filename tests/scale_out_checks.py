"""What the `ElmoBatchEmbedder` tests share: the corpus (empty lines, Unicode, a very long line), `elmo-embed`'s
vectors of it as the reference, a reader of every kind of result, the comparison, and the rule for the optional
engines (Ray, Spark): skipped with a reason where missing, a failure where `ELMO_REQUIRE_SCALE_OUT=1` says they must
be there (CI's scale-out job). A module of its own beside `shared_paths`."""

import importlib.util
import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pytest

RELATIVE_TOLERANCE = 1e-6  # another batching moves a value by a float32 step or two: |a - b| <= 1e-6 * max(1, |b|)
LONG_LINE_WORDS = 400
LAYER_WIDTH = 32  # the fixture model: 2 * projection_dim 16
COMBINATIONS = [(layers, pooling) for layers in ("all", "top", "average") for pooling in (None, "mean")]


def corpus_lines(fixture_dir: Path) -> list[str]:
    """The fixture's 30 sentences with an empty line, a blank one, Unicode and a line of 400 words among them."""
    sentences = [sentence for row in json.loads((fixture_dir / "sentences.json").read_text()) for sentence in row]
    long_line = " ".join(" ".join(sentences).split()[:LONG_LINE_WORDS])
    unicode = "Zürich 's café — naïve 東京 Ελλάδα ."
    return [*sentences[:5], "", *sentences[5:20], "   ", unicode, long_line, *sentences[20:]]


def require_engine(module: str) -> None:
    """Skip where `module` (ray, pyspark) is missing, fail where `ELMO_REQUIRE_SCALE_OUT=1` says it must run. Spark
    also needs Java, which no pip install brings: a machine without it skips Spark's tests, or fails them the same."""
    lacking = None
    if importlib.util.find_spec(module) is None:
        lacking = f"{module} is not installed (pip install -e '.[ray,spark]')"
    elif module == "pyspark" and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        lacking = "Spark needs Java: java is not on PATH and JAVA_HOME is unset"
    if lacking is None:
        return
    if os.environ.get("ELMO_REQUIRE_SCALE_OUT") == "1":
        pytest.fail(f"{lacking}, and ELMO_REQUIRE_SCALE_OUT=1", pytrace=False)
    pytest.skip(lacking)


def elmo_embed_vectors(input_path: Path, output: Path, model_dir: Path, layers: str, pooling, *extra: str):
    """`elmo-embed`'s arrays of every line, by line index (its own process's API, at the caller's thread count)."""
    from modeling_elmo.embed.cli import main

    argv = [str(input_path), str(output), "--model", str(model_dir), "--no-progress", "--layers", layers]
    assert main([*argv, "--pooling", pooling or "none", *extra]) == 0
    with h5py.File(output, "r") as handle:
        return {int(name): handle[name][...] for name in handle if name != "sentence_to_index"}


def _rows(column) -> list:
    """The Python values of a column of any kind: a pyarrow array, a pandas Series, a list or a numpy array."""
    if isinstance(column, (pa.Array, pa.ChunkedArray)):
        return column.to_pylist()
    return list(column)


def vectors_by_id(result, layers: str, pooling, width: int = LAYER_WIDTH) -> dict[int, np.ndarray]:
    """Each row's vectors of a result of any kind (Table, DataFrame, dict), shaped as `elmo-embed` stores them:
    (layers, words, width) for "all", (words, width) otherwise; pooled without the words axis."""
    if isinstance(result, pa.Table):
        result = {name: result.column(name) for name in result.column_names}
    names = [name for name in result if name.startswith("layer_")] if layers == "all" else ["embedding"]
    ids, counts = _rows(result["id"]), _rows(result["num_words"])
    columns = [_rows(result[name]) for name in names]
    vectors = {}
    for row, (row_id, count) in enumerate(zip(ids, counts, strict=True)):
        shape = (width,) if pooling == "mean" else (count, width)
        per_layer = [np.array([np.asarray(value) for value in column[row]], np.float32) for column in columns]
        per_layer = [array.reshape(shape) for array in per_layer]
        vectors[int(row_id)] = np.stack(per_layer) if layers == "all" else per_layer[0]
    return vectors


def assert_close(found: dict[int, np.ndarray], expected: dict[int, np.ndarray], bits: bool = False) -> None:
    """Every id present, same shapes, values bit for bit (`bits`) or within the relative tolerance."""
    assert sorted(found) == sorted(expected)
    for key, values in expected.items():
        assert found[key].shape == values.shape, (key, found[key].shape, values.shape)
        if bits:
            assert found[key].tobytes() == values.tobytes(), key
        else:
            bound = RELATIVE_TOLERANCE * np.maximum(1.0, np.abs(values))
            assert (np.abs(found[key] - values) <= bound).all(), (key, np.abs(found[key] - values).max())
