"""`ElmoBatchEmbedder` in Ray Data's `map_batches` (a local cluster of 2 CPUs, 2 actors of 1 thread): a corpus with
empty lines, Unicode and a very long line, read with explicit ids, written as Parquet; every line once, each equal to
`elmo-embed` at 1 thread within 1e-6 x max(1, |value|). Skipped where ray is missing (a failure with
`ELMO_REQUIRE_SCALE_OUT=1`)."""

import os
import shutil
import tempfile

import pyarrow.parquet as pq
import pytest
import torch
from scale_out_checks import assert_close, corpus_lines, elmo_embed_vectors, require_engine, vectors_by_id

from modeling_elmo.embed import ElmoBatchEmbedder
from modeling_elmo.embed.arrow_layout import arrow_schema

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray cluster of 2 CPUs for this module; its temp dir short (Ray's sockets live there) and removed."""
    require_engine("ray")
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp_dir = tempfile.mkdtemp(prefix="ray")
    try:
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def corpus(fixture_dir, tmp_path_factory, converted_fixture):
    """The corpus file, and elmo-embed's per-word vectors of all layers at 1 thread (the default batches)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(corpus_lines(fixture_dir)) + "\n", encoding="utf-8")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = elmo_embed_vectors(path, path.with_suffix(".hdf5"), converted_fixture, "all", None)
    finally:
        torch.set_num_threads(threads)
    return path, reference


@pytest.mark.parametrize("batch_format", ["pyarrow", "numpy"])  # pandas: the Spark test
def test_ray_actor_pool_writes_every_line_once_equal_to_elmo_embed(
    batch_format, ray_session, corpus, converted_fixture, tmp_path
):
    ray = ray_session
    path, reference = corpus
    lines = path.read_text(encoding="utf-8").splitlines()  # read_text would drop empty lines and the order
    dataset = ray.data.from_items(
        [{"id": index, "text": line} for index, line in enumerate(lines)], override_num_blocks=4
    )
    vectors = dataset.map_batches(
        ElmoBatchEmbedder,
        fn_constructor_kwargs={"model": str(converted_fixture), "layers": "all", "threads": 1},
        compute=ray.data.ActorPoolStrategy(size=2),
        num_cpus=1,
        batch_size=8,
        batch_format=batch_format,
    )
    vectors.write_parquet(str(tmp_path / "vectors"), mode="overwrite")
    table = pq.read_table(tmp_path / "vectors")
    ids = table.column("id").to_pylist()
    assert sorted(ids) == list(range(len(lines)))  # every line once
    if batch_format == "pyarrow":  # Ray keeps the fixed-size lists of an Arrow batch
        assert table.schema.remove_metadata() == arrow_schema("all", "none", 3, 32)
    assert_close(vectors_by_id(table, "all", None), reference)
