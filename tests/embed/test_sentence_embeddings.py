"""Sentence embeddings: `elmo-embed --pooling mean` (one vector per sentence) and `SentenceTransformer(ELMO_DIR)`."""

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from modeling_elmo.embed import cli as embed
from modeling_elmo.embed.cli import main

SENTENCES = ["The bank closed its doors .", "", "River banks flood", "Zürich 's café ."]
NUM_LAYERS, WIDTH = 3, 32  # the fixture model: 2 biLSTM layers + the token layer, 2 * projection_dim 16


def _embed(tmp_path: Path, model_dir: Path, name: str, *extra: str) -> dict[str, np.ndarray]:
    input_path = tmp_path / "in.txt"
    input_path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    output = tmp_path / f"{name}.hdf5"
    assert main([str(input_path), str(output), "--model", str(model_dir), "--no-progress", *extra]) == 0
    with h5py.File(output, "r") as handle:
        return {key: handle[key][...] for key in handle if key != "sentence_to_index"}


@pytest.mark.parametrize(
    ("layers", "pooled_shape"), [("all", (NUM_LAYERS, WIDTH)), ("top", (WIDTH,)), ("average", (WIDTH,))]
)
def test_mean_pooling_is_the_mean_of_the_word_vectors(tmp_path, converted_fixture, layers, pooled_shape):
    words = _embed(tmp_path, converted_fixture, "words", "--layers", layers)
    pooled = _embed(tmp_path, converted_fixture, "pooled", "--layers", layers, "--pooling", "mean")
    assert pooled.keys() == words.keys() == {str(index) for index in range(len(SENTENCES))}
    for index, sentence in enumerate(SENTENCES):
        vector = pooled[str(index)]
        assert vector.shape == pooled_shape and vector.dtype == np.float32
        if sentence:
            expected = words[str(index)].astype(np.float64).mean(axis=-2)
            assert np.abs(vector - expected).max() <= 1e-6
        else:  # no words: a zero vector (as a masked mean with nothing to average gives)
            assert not vector.any()


def test_resuming_with_another_pooling_is_refused(tmp_path, converted_fixture, capsys, monkeypatch):
    original = embed.embed_batch

    def interrupted_after_one_batch(*args):
        monkeypatch.setattr(embed, "embed_batch", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
        return original(*args)

    monkeypatch.setattr(embed, "embed_batch", interrupted_after_one_batch)
    input_path = tmp_path / "in.txt"
    input_path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    args = [str(input_path), str(tmp_path / "out.hdf5"), "--model", str(converted_fixture), "--no-progress"]
    assert main([*args, "--batch-size", "1"]) == 130
    capsys.readouterr()
    assert main([*args, "--batch-size", "1", "--pooling", "mean"]) == 1
    assert "other arguments (differs in: pooling 'none' vs 'mean')" in capsys.readouterr().err


def test_sentence_transformer_is_the_masked_mean_of_the_top_layer(converted_fixture):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    import modeling_elmo  # noqa: F401  (registers the Auto classes)

    encoder = SentenceTransformer(str(converted_fixture), device="cpu")
    texts = [sentence for sentence in SENTENCES if sentence]
    embeddings = encoder.encode(texts, convert_to_tensor=True, batch_size=2)

    tokenizer, model = AutoTokenizer.from_pretrained(converted_fixture), AutoModel.from_pretrained(converted_fixture)
    for text, embedding in zip(texts, embeddings, strict=True):
        with torch.no_grad():
            top = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]  # (words, width)
        assert embedding.shape == (WIDTH,)
        assert (embedding - top.mean(dim=0)).abs().max() <= 1e-6
