"""`ElmoBatchEmbedder` in Spark (`local[2]`): `mapInPandas` writes every line of a corpus with empty lines, Unicode
and a very long line once, as Parquet (Spark SQL has no fixed-size list: `array<array<float>>`), equal to
`elmo-embed` at 1 thread within 1e-6 x max(1, |value|); `spark_predict_batch_fn` gives the pooled vectors through
`predict_batch_udf`. Skipped where pyspark or Java is missing (a failure with `ELMO_REQUIRE_SCALE_OUT=1`)."""

import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from scale_out_checks import assert_close, corpus_lines, elmo_embed_vectors, require_engine, vectors_by_id

from modeling_elmo.embed import ElmoBatchEmbedder, spark_predict_batch_fn

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """One local Spark session of 2 cores for this module; its workers run this environment's Python."""
    require_engine("pyspark")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("elmo-batch-embedder-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark")))
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def corpus(fixture_dir, tmp_path_factory, converted_fixture):
    """The corpus' lines, and elmo-embed's vectors at 1 thread: per word (all layers) and pooled (top layer)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = corpus_lines(fixture_dir)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        per_word = elmo_embed_vectors(path, path.with_suffix(".all.hdf5"), converted_fixture, "all", None)
        pooled = elmo_embed_vectors(path, path.with_suffix(".top.hdf5"), converted_fixture, "top", "mean")
    finally:
        torch.set_num_threads(threads)
    return lines, per_word, pooled


def test_map_in_pandas_writes_every_line_once_equal_to_elmo_embed(spark, corpus, converted_fixture, tmp_path):
    lines, per_word, _ = corpus
    rows = spark.createDataFrame(list(enumerate(lines)), "id long, text string").repartition(2)
    embedder = ElmoBatchEmbedder(str(converted_fixture), "all", threads=1)
    schema = "id long, num_words int, " + ", ".join(f"layer_{k} array<array<float>>" for k in range(3))
    vectors = rows.mapInPandas(lambda frames: map(embedder, frames), schema)
    vectors.write.mode("overwrite").parquet(str(tmp_path / "vectors"))
    table = pq.read_table(tmp_path / "vectors")
    assert sorted(table.column("id").to_pylist()) == list(range(len(lines)))  # every line once
    assert table.schema.field("layer_0").type.equals(pa.list_(pa.list_(pa.float32())), check_metadata=False)
    assert_close(vectors_by_id(table, "all", None), per_word)


def test_predict_batch_udf_gives_pooled_vectors(spark, corpus, converted_fixture):
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql.types import ArrayType, FloatType, StructField, StructType

    lines, per_word, pooled = corpus
    rows = spark.createDataFrame(list(enumerate(lines)), "id long, text string")
    top = predict_batch_udf(
        spark_predict_batch_fn(str(converted_fixture), layers="top"), return_type=ArrayType(FloatType()), batch_size=8
    )
    layers = StructType([StructField(f"layer_{k}", ArrayType(FloatType())) for k in range(3)])
    every = predict_batch_udf(spark_predict_batch_fn(str(converted_fixture), "all"), return_type=layers, batch_size=8)
    found = rows.select("id", top("text").alias("top"), every("text").alias("all")).collect()
    assert_close({row.id: np.array(row.top, np.float32) for row in found}, pooled)
    means = {
        key: value.mean(axis=1) if value.shape[1] else np.zeros((3, 32), np.float32) for key, value in per_word.items()
    }
    assert_close({row.id: np.array(list(row["all"]), np.float32) for row in found}, means)
