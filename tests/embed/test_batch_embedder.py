"""`ElmoBatchEmbedder` against `elmo-embed` at 1 thread: bit for bit fed `elmo-embed`'s own batches, within 1e-6 x
max(1, |value|) batched otherwise, for every kind of batch and every layers/pooling; the original's references; the
Parquet round trip of each kind; bad input; `import modeling_elmo.embed` stays light."""

import json
import pickle
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from scale_out_checks import (
    COMBINATIONS,
    LAYER_WIDTH,
    assert_close,
    corpus_lines,
    elmo_embed_vectors,
    vectors_by_id,
)

from modeling_elmo.embed import ElmoBatchEmbedder, batch_embedder
from modeling_elmo.embed.arrow_layout import arrow_schema
from modeling_elmo.embed.batching import bucketed_batches, read_sentences

ORIGINAL_TOLERANCE = 2e-6
KINDS = ("arrow", "pandas", "dict-lists", "dict-numpy")
SMALL_BATCHES = 4  # elmo-embed --batch-size 4: several batches of the corpus


@pytest.fixture(autouse=True)
def one_thread():
    """Both sides at 1 thread (the embedder sets torch's threads; the test process gets its count back)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus_file(fixture_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(corpus_lines(fixture_dir)) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def references(corpus_file, converted_fixture, tmp_path_factory):
    """elmo-embed's vectors at 1 thread, batches of 4, no word cache, for each (layers, pooling)."""
    folder, threads = tmp_path_factory.mktemp("elmo-embed"), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {
            (layers, pooling): elmo_embed_vectors(
                corpus_file,
                folder / f"{layers}-{pooling}.hdf5",
                converted_fixture,
                layers,
                pooling,
                "--batch-size",
                str(SMALL_BATCHES),
                "--word-cache",
                "0",
            )
            for layers, pooling in COMBINATIONS
        }
    finally:
        torch.set_num_threads(threads)


def batch_of_kind(kind: str, ids: list[int], texts: list[str]):
    if kind == "arrow":
        return pa.table({"id": pa.array(ids, pa.int64()), "text": texts})
    if kind == "pandas":
        return pd.DataFrame({"id": ids, "text": texts})
    if kind == "dict-lists":  # what datasets.Dataset.map(batched=True) passes
        return {"id": list(ids), "text": list(texts)}
    return {"id": np.asarray(ids, np.int64), "text": np.asarray(texts, dtype=object)}  # Ray's batch_format="numpy"


def result_kind(result) -> str:
    return "arrow" if isinstance(result, pa.Table) else "pandas" if isinstance(result, pd.DataFrame) else "other"


@pytest.mark.parametrize(("layers", "pooling"), COMBINATIONS)
def test_elmo_embeds_own_batches_give_its_bits_for_every_kind(
    layers, pooling, references, corpus_file, converted_fixture
):
    embedder = ElmoBatchEmbedder(converted_fixture, layers, pooling, batch_size=SMALL_BATCHES, word_cache=0)
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    batches = list(bucketed_batches(read_sentences(corpus_file), batch_size=SMALL_BATCHES))
    assert len(batches) > 5
    for kind in KINDS:
        found = {}
        for batch in batches:
            ids = sorted(sentence.index for sentence in batch.sentences)  # given in line order, sorted inside
            result = embedder(batch_of_kind(kind, ids, [lines[index] for index in ids]))
            assert result_kind(result) == ("pandas" if kind == "pandas" else "arrow")
            assert list(vectors_by_id(result, layers, pooling)) == ids  # rows come back in the order given
            found.update(vectors_by_id(result, layers, pooling))
        assert_close(found, references[layers, pooling], bits=True)


@pytest.mark.parametrize(("layers", "pooling", "kind"), [(*pair, KINDS[k % 4]) for k, pair in enumerate(COMBINATIONS)])
def test_one_engine_batch_of_the_whole_corpus_is_within_a_float32_step(
    layers, pooling, kind, references, corpus_file, converted_fixture
):
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    order = list(reversed(range(len(lines))))  # another order than the file's: the result keeps it
    embedder = ElmoBatchEmbedder(converted_fixture, layers, pooling)  # inner batches of 64, the word cache on
    result = embedder(batch_of_kind(kind, order, [lines[index] for index in order]))
    found = vectors_by_id(result, layers, pooling)
    assert list(found) == order
    assert_close(found, references[layers, pooling])


def test_words_column_equals_text_column(converted_fixture, fixture_dir):
    lines = corpus_lines(fixture_dir)
    embedder = ElmoBatchEmbedder(converted_fixture, "top", word_cache=0)
    by_text = embedder(pa.table({"id": range(len(lines)), "text": lines}))
    by_words = embedder({"id": list(range(len(lines))), "words": [line.split() for line in lines]})
    assert by_text.column("embedding").equals(by_words.column("embedding"))
    assert by_text.column("num_words").to_pylist() == [len(line.split()) for line in lines]


def test_top_layer_equals_the_original_for_its_batch_0(converted_fixture, fixture_dir):
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    first = [group[0] for group in groups]  # the original's batch 0 starts from zero states, as every call here
    result = ElmoBatchEmbedder(converted_fixture, "top")({"id": [0, 1, 2], "text": first})
    for k, text in enumerate(first):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
            expected = np.concatenate(list(reference["0"][...]), axis=-1)
        found = np.array(result["embedding"][k].as_py(), np.float32)
        assert found.shape == (len(text.split()), LAYER_WIDTH)
        assert np.abs(found - expected).max() <= ORIGINAL_TOLERANCE  # NaN fails


def test_the_layout_empty_text_duplicates_and_float16(converted_fixture):
    texts = ["The cat sat .", "", "The cat sat ."]
    full = ElmoBatchEmbedder(converted_fixture, "all")(pa.table({"id": [7, 7, 3], "text": texts}))
    assert full.schema == arrow_schema("all", "none", 3, LAYER_WIDTH)
    assert full.column("id").to_pylist() == [7, 7, 3] and full.column("num_words").to_pylist() == [4, 0, 4]
    assert full.column("layer_2")[0] == full.column("layer_2")[2]  # a repeated id is embedded and kept in place
    pooled = ElmoBatchEmbedder(converted_fixture, "average", "mean", "float16")({"id": [7, 7, 3], "text": texts})
    assert pooled.schema.field("embedding").type == pa.list_(pa.float16(), LAYER_WIDTH)
    assert pooled["embedding"][1].as_py() == [0.0] * LAYER_WIDTH  # zeros for an empty text
    single = ElmoBatchEmbedder(converted_fixture, "average", "mean")({"id": [7], "text": texts[:1]})["embedding"]
    rounded_once = np.array(single[0].as_py(), np.float32).astype(np.float16)
    assert np.array(pooled["embedding"][0].as_py(), np.float16).tobytes() == rounded_once.tobytes()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pooling", [None, "mean"])
def test_each_kind_round_trips_through_parquet_with_fixed_size_lists(kind, pooling, converted_fixture, tmp_path):
    texts = ["The cat sat .", "", "Zürich 's café ."]
    embedder = ElmoBatchEmbedder(converted_fixture, "all", pooling)
    result = embedder(batch_of_kind(kind, [0, 1, 2], texts))
    schema = arrow_schema("all", pooling or "none", 3, LAYER_WIDTH)
    if kind == "pandas":
        table = pa.Table.from_pandas(result, schema=schema, preserve_index=False)
    else:
        table = result
    pq.write_table(table, tmp_path / "vectors.parquet")
    read = pq.read_table(tmp_path / "vectors.parquet")
    assert [(field.name, field.type) for field in read.schema] == [(field.name, field.type) for field in schema]
    assert_close(vectors_by_id(read, "all", pooling), vectors_by_id(result, "all", pooling), bits=True)


def test_the_embedder_pickles_small_and_loads_in_the_worker(converted_fixture, monkeypatch):
    monkeypatch.setattr(batch_embedder, "_LOADED", {})
    embedder = ElmoBatchEmbedder(converted_fixture, "top", "mean")
    copy = pickle.loads(pickle.dumps(embedder))
    assert len(pickle.dumps(embedder)) < 2000 and not batch_embedder._LOADED  # nothing loaded yet
    copy({"id": [0], "text": ["a b"]})
    embedder({"id": [0], "text": ["a b"]})
    assert len(batch_embedder._LOADED) == 1  # one model per process, for every embedder of it


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ({"id": [0], "sentence": ["a"]}, "no 'text' or 'words' column (columns: id, sentence)"),
        ({"text": ["a"]}, "no 'id' column"),
        ({"id": [0], "text": ["a"], "words": [["a"]]}, "both a 'text' and a 'words' column"),
        ({"id": [0, 5], "text": ["a", 3]}, "row id 5: column 'text' holds a int (3), not a string"),
        ({"id": [0, 5], "text": ["a", None]}, "row id 5: column 'text' holds None"),
        ({"id": [4], "words": [["a", 2]]}, "row id 4: column 'words' holds a int (2), not a string"),
        ({"id": [4], "words": ["a b"]}, "row id 4: column 'words' holds a str ('a b'), not a word list"),
        ({"id": ["x"], "text": ["a"]}, "row 0 of the batch: column 'id' holds 'x', not an integer"),
    ],
)
def test_bad_rows_are_one_line_naming_the_row_and_column(batch, message, converted_fixture):
    with pytest.raises(ValueError, match="ElmoBatchEmbedder: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        ElmoBatchEmbedder(converted_fixture)(batch)


def test_a_batch_of_another_type_is_refused(converted_fixture):
    with pytest.raises(TypeError, match="pandas DataFrame, a pyarrow Table or a dict of columns, got list"):
        ElmoBatchEmbedder(converted_fixture)([("a", 0)])


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ({"layers": "first"}, "layers"),
        ({"pooling": "max"}, "pooling"),
        ({"pooling": "none"}, "pooling"),
        ({"dtype": "bfloat16"}, "dtype"),
        ({"threads": 0}, "threads"),
        ({"threads": 1.5}, "threads"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 4, "max_tokens": 100}, "batch_size, max_tokens"),
        ({"word_cache": -1}, "word_cache"),
        ({"device": 0}, "device"),
    ],
)
def test_arguments_out_of_range_name_the_argument(arguments, name, converted_fixture):
    with pytest.raises(ValueError, match=f"^{name}: "):
        ElmoBatchEmbedder(converted_fixture, **arguments)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"quantization": "int4"}, "^quantization: one of None, 'int8', 'int8_weight_only', 'bf16', got 'int4'$"),
        ({"quantization": "none"}, "^quantization: one of None, "),
        ({"quantization": "bf16", "device": "cuda"}, "^quantization: 'bf16' runs on the CPU, got device 'cuda'$"),
    ],
)
def test_a_quantization_it_cannot_run_is_one_line(arguments, message, converted_fixture):
    with pytest.raises(ValueError, match=message):
        ElmoBatchEmbedder(converted_fixture, **arguments)


def test_a_quantized_embedder_gives_the_bits_of_elmo_embed_quantized(corpus_file, converted_fixture, tmp_path):
    """`quantization="int8"` is `elmo-embed --quantization int8` (fed its batches, bit for bit), and not exact."""
    options = ("--batch-size", str(SMALL_BATCHES), "--word-cache", "0")
    quantized = elmo_embed_vectors(
        corpus_file, tmp_path / "int8.hdf5", converted_fixture, "top", None, *options, "--quantization", "int8"
    )
    exact = elmo_embed_vectors(corpus_file, tmp_path / "exact.hdf5", converted_fixture, "top", None, *options)
    embedder = ElmoBatchEmbedder(converted_fixture, "top", batch_size=SMALL_BATCHES, word_cache=0, quantization="int8")
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    found = {}
    for batch in bucketed_batches(read_sentences(corpus_file), batch_size=SMALL_BATCHES):
        ids = sorted(sentence.index for sentence in batch.sentences)
        found.update(vectors_by_id(embedder(batch_of_kind("arrow", ids, [lines[i] for i in ids])), "top", None))
    assert_close(found, quantized, bits=True)
    assert any(not np.array_equal(quantized[index], exact[index]) for index in exact)  # the int8 model ran
    assert ElmoBatchEmbedder(converted_fixture).loaded()[1] is not embedder.loaded()[1]  # one model per choice


def test_an_unusable_device_names_it(converted_fixture):
    with pytest.raises(ValueError, match="Cannot use device 'nonsense'"):
        ElmoBatchEmbedder(converted_fixture, device="nonsense")({"id": [0], "text": ["a"]})


@pytest.mark.integration
def test_importing_the_package_stays_light():
    """`import modeling_elmo.embed` (as `elmo-embed` does) imports neither pyarrow and pandas nor the engines."""
    script = (
        "import sys, modeling_elmo.embed as embed; "
        "print(sorted(m for m in ('pyarrow', 'ray', 'pyspark', 'pandas') if m in sys.modules)); "
        "print(embed.ElmoBatchEmbedder.__name__, embed.spark_predict_batch_fn.__name__)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["[]", "ElmoBatchEmbedder spark_predict_batch_fn"], result.stderr
