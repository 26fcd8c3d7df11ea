"""`ElmoBatchEmbedder` in `datasets.Dataset.map(batched=True)`: a corpus with empty lines, Unicode and a very long
line, every line once with the Arrow layout's fixed-size lists, equal to `elmo-embed` at 1 thread within
1e-6 x max(1, |value|), and the same through Parquet."""

import datasets
import pyarrow.parquet as pq
import torch
from scale_out_checks import LAYER_WIDTH, assert_close, corpus_lines, elmo_embed_vectors, vectors_by_id

from modeling_elmo.embed import ElmoBatchEmbedder
from modeling_elmo.embed.arrow_layout import arrow_schema


def test_dataset_map_keeps_every_line_and_the_fixed_size_lists(fixture_dir, converted_fixture, tmp_path):
    lines = corpus_lines(fixture_dir)
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = elmo_embed_vectors(path, tmp_path / "corpus.hdf5", converted_fixture, "top", None)
        rows = datasets.Dataset.from_dict({"id": list(range(len(lines))), "text": lines})
        embedder = ElmoBatchEmbedder(str(converted_fixture), "top")
        vectors = rows.map(embedder, batched=True, batch_size=16, remove_columns=["text"])
    finally:
        torch.set_num_threads(threads)
    assert vectors["id"] == list(range(len(lines)))
    schema = arrow_schema("top", "none", 3, LAYER_WIDTH)
    assert vectors.features.arrow_schema.field("embedding").type == schema.field("embedding").type
    assert_close(vectors_by_id(vectors.data.table, "top", None), reference)
    vectors.to_parquet(tmp_path / "vectors.parquet")
    assert pq.read_schema(tmp_path / "vectors.parquet").field("embedding").type == schema.field("embedding").type
