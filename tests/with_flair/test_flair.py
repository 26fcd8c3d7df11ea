"""flair on ELMo folders, in flair's own environment (the `flair` extra, Transformers 4.x): flair's
`TransformerWordEmbeddings` and `modeling_elmo.flair.ELMoEmbeddings` give `ElmoModel`'s vectors, and a
`SequenceTagger` trains on a slice of CoNLL-2003 and predicts the same after save and load.

Skipped where flair is not installed, unless `ELMO_REQUIRE_FLAIR` is set (CI's flair job sets it)."""

import os
from pathlib import Path

import pytest
import torch

if os.environ.get("ELMO_REQUIRE_FLAIR"):
    import flair  # noqa: F401  (fails the run where flair should be installed and is not)
flair = pytest.importorskip("flair", reason="flair is not installed: pip install -e '.[flair]'")

from flair.data import Sentence  # noqa: E402
from flair.datasets import ColumnCorpus  # noqa: E402
from flair.embeddings import TransformerWordEmbeddings  # noqa: E402
from flair.models import SequenceTagger  # noqa: E402
from flair.trainers import ModelTrainer  # noqa: E402

from modeling_elmo import ElmoModel, ElmoTokenizer  # noqa: E402
from modeling_elmo.flair import ELMoEmbeddings  # noqa: E402
from modeling_elmo.foundation.model_location import NO_SUCH_FOLDER, NOT_A_MODEL_FOLDER  # noqa: E402

TOLERANCE = 1e-6
TEXTS = ["The U.S. didn't say .", "Ünïcödé 👍🏽 words", "a"]


def elmo_layers(folder: Path, sentences: list[Sentence]) -> torch.Tensor:
    """`(layers, batch, words, dim)`: every layer of `ElmoModel` on the sentences' words."""
    tokenizer, model = ElmoTokenizer.from_pretrained(folder), ElmoModel.from_pretrained(folder).eval()
    words = [[token.text for token in sentence] for sentence in sentences]
    batch = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return torch.stack(model(**batch, output_hidden_states=True).hidden_states)


def embedded(embeddings, texts: list[str] = TEXTS) -> tuple[list[Sentence], list[torch.Tensor]]:
    sentences = [Sentence(text) for text in texts]
    embeddings.embed(sentences)
    return sentences, [torch.stack([token.get_embedding().cpu() for token in sentence]) for sentence in sentences]


def assert_vectors(found: list[torch.Tensor], expected: torch.Tensor) -> None:
    """`found[i]` (words_i, dim) against `expected` (batch, words, dim), padding excluded."""
    for index, vectors in enumerate(found):
        assert vectors.shape == expected[index, : len(vectors)].shape
        assert float((vectors - expected[index, : len(vectors)]).abs().max()) <= TOLERANCE


def test_transformer_word_embeddings_with_flairs_defaults_give_the_top_layer(converted_fixture):
    embeddings = TransformerWordEmbeddings(str(converted_fixture))
    sentences, vectors = embedded(embeddings)
    assert_vectors(vectors, elmo_layers(converted_fixture, sentences)[-1])


def test_transformer_word_embeddings_with_every_layer(converted_fixture):
    """`layers="all"` probes the model with 2-D ids (flair's transformer.py, `transformer_model(torch.tensor([1],
    ...).unsqueeze(0))`), which ELMo's character ids cannot be; the same layers named by index work."""
    embeddings = TransformerWordEmbeddings(str(converted_fixture), layers="0,1,2", layer_mean=False)
    sentences, vectors = embedded(embeddings)
    layers = elmo_layers(converted_fixture, sentences)
    assert_vectors(vectors, torch.cat(layers.unbind(0), dim=-1))


@pytest.mark.parametrize("mode", ["all", "top", "average"])
def test_elmo_embeddings_modes(converted_fixture, mode):
    embeddings = ELMoEmbeddings(str(converted_fixture), embedding_mode=mode)
    sentences, vectors = embedded(embeddings)
    layers = elmo_layers(converted_fixture, sentences)
    expected = {"all": torch.cat(layers.unbind(0), dim=-1), "top": layers[-1], "average": layers.mean(0)}[mode]
    assert embeddings.embedding_length == expected.shape[-1]
    assert_vectors(vectors, expected)


def test_elmo_embeddings_refuse_a_folder_that_is_not_elmo(tmp_path):
    from transformers import BertConfig

    BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8).save_pretrained(
        tmp_path
    )
    with pytest.raises(ValueError, match=r"^ELMoEmbeddings: .*: a 'bert' model, not an ELMo model$"):
        ELMoEmbeddings(str(tmp_path))
    with pytest.raises(ValueError, match="embedding_mode must be one of"):
        ELMoEmbeddings(str(tmp_path), embedding_mode="last")


def test_elmo_embeddings_load_folders_through_the_one_loader(fixture_dir, tmp_path):
    """A folder is refused as `elmo-embed --model` refuses it (`inference.pretrained`), in one line naming it: an
    original checkpoint's folder (options JSON + HDF5, no config.json) and a folder that is not there."""
    with pytest.raises(ValueError) as caught:
        ELMoEmbeddings(str(fixture_dir))
    assert str(caught.value) == f"ELMoEmbeddings: {fixture_dir}: {NOT_A_MODEL_FOLDER}"
    with pytest.raises(ValueError) as caught:
        ELMoEmbeddings(str(tmp_path / "nowhere"))
    assert str(caught.value) == f"ELMoEmbeddings: {tmp_path / 'nowhere'}: {NO_SUCH_FOLDER}"


def conll_slice(conll_dir: Path, folder: Path, sentences: int) -> ColumnCorpus:
    """The first `sentences` sentences of each CoNLL-2003 split, as a flair corpus (columns: word, NER tag)."""
    folder.mkdir()
    for split in ("train", "dev", "test"):
        blocks = (conll_dir / f"{split}.txt").read_text(encoding="utf-8").split("\n\n")
        kept = [block for block in blocks if block.strip() and not block.startswith("-DOCSTART-")][:sentences]
        (folder / f"{split}.txt").write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    return ColumnCorpus(
        folder, {0: "text", 3: "ner"}, train_file="train.txt", dev_file="dev.txt", test_file="test.txt"
    )


@pytest.mark.parametrize("kind", ["ELMoEmbeddings", "TransformerWordEmbeddings"])
def test_a_tagger_trains_and_predicts_the_same_after_save_and_load(converted_fixture, conll_dir, tmp_path, kind):
    """Two epochs on 300 sentences: the loss on the dev slice goes down; the reloaded tagger gives the same loss,
    predictions and vectors. (The fixture biLM is a tiny test model: its tagger still predicts no entity.)"""
    flair.set_seed(0)
    corpus = conll_slice(conll_dir, tmp_path / "conll", 300)
    if kind == "ELMoEmbeddings":
        embeddings = ELMoEmbeddings(str(converted_fixture))
    else:
        embeddings = TransformerWordEmbeddings(str(converted_fixture), fine_tune=False)
    tagger = SequenceTagger(
        hidden_size=32,
        embeddings=embeddings,
        tag_dictionary=corpus.make_label_dictionary("ner", add_unk=False),
        tag_type="ner",
        use_crf=False,
    )
    loss_before = tagger.evaluate(corpus.dev, gold_label_type="ner").loss
    result = ModelTrainer(tagger, corpus).train(
        tmp_path / "run", max_epochs=2, mini_batch_size=8, learning_rate=0.1, save_final_model=False
    )
    dev = tagger.evaluate(corpus.dev, gold_label_type="ner")
    print(f"{kind}: dev loss {loss_before:.4f} -> {dev.loss:.4f}, test micro F1 {result['test_score']:.4f}")
    assert dev.loss < loss_before
    tagger.save(tmp_path / "tagger.pt")
    loaded = SequenceTagger.load(tmp_path / "tagger.pt")
    assert loaded.evaluate(corpus.dev, gold_label_type="ner").loss == dev.loss
    texts = [" ".join(token.text for token in sentence) for sentence in list(corpus.test)[:20]]
    before, after = [Sentence(text) for text in texts], [Sentence(text) for text in texts]
    tagger.predict(before)
    loaded.predict(after)
    assert [[(s.text, s.tag) for s in x.get_spans("ner")] for x in before] == [
        [(s.text, s.tag) for s in x.get_spans("ner")] for x in after
    ]
    for first, second in zip(before, after, strict=True):
        assert torch.equal(
            torch.stack([t.get_embedding() for t in first]), torch.stack([t.get_embedding() for t in second])
        )
