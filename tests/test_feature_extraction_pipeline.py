"""pipeline("feature-extraction") with the package's `ElmoFeatureExtractionPipeline`: one vector per word of every
text, batched or not, and `[]` for `[]`. Through remote code only: test_pipeline_remote_code.py."""

from pathlib import Path

import pytest
import torch
from test_ner_pipeline import TRICKY
from transformers import pipeline

from modeling_elmo import ElmoConfig, ElmoFeatureExtractionPipeline, ElmoModel, ElmoTokenizer

# a one-word text beside longer ones: batched, the stock pipeline gave it a vector per padding position too
TEXTS = ["Hello", "The bank closed its doors .", *TRICKY, "a b", "One more sentence with seven words ."]


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A saved tiny random biLM and its tokenizer."""
    torch.manual_seed(0)
    config = ElmoConfig(
        char_filters=[[1, 4], [2, 4]], char_embedding_dim=4, num_highway_layers=1, lstm_cell_size=8, projection_dim=4
    )
    folder = tmp_path_factory.mktemp("features") / "elmo"
    ElmoModel(config).save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


def extractor(folder: Path, **kwargs) -> ElmoFeatureExtractionPipeline:
    """The pipeline for `folder`, run by this package's code (no remote code)."""
    return pipeline("feature-extraction", model=str(folder), pipeline_class=ElmoFeatureExtractionPipeline, **kwargs)


def words_of(text: str) -> int:
    return len(ElmoTokenizer().split_words(text))


@pytest.mark.parametrize("batch_size", [2, 3, len(TEXTS)])
def test_batched_texts_get_their_single_vectors(model_folder, batch_size):
    single = extractor(model_folder)
    batched = extractor(model_folder, batch_size=batch_size)
    found = batched(TEXTS)
    assert len(found) == len(TEXTS)
    for text, vectors in zip(TEXTS, found, strict=True):
        alone = torch.tensor(single(text))
        assert alone.shape == ((1, words_of(text), 8) if words_of(text) else (1, 0))
        assert torch.tensor(vectors).shape == alone.shape  # "Hello" batched with longer texts: one vector
        torch.testing.assert_close(torch.tensor(vectors), alone, rtol=0, atol=1e-6)


def test_vectors_are_the_top_layer_of_the_words(model_folder):
    model, tokenizer = ElmoModel.from_pretrained(model_folder), ElmoTokenizer.from_pretrained(model_folder)
    text = "The bank closed its doors ."
    with torch.inference_mode():
        expected = model(**tokenizer([text], return_tensors="pt")).last_hidden_state
    found = extractor(model_folder, batch_size=2)([text, "Hi"], return_tensors=True)[0]
    assert found.shape == (1, 6, 8)
    torch.testing.assert_close(found, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("batch_size", [None, 4])
def test_no_texts_give_no_vectors(model_folder, batch_size):
    """Before: `[]` raised from inside the stock pipeline."""
    run = extractor(model_folder) if batch_size is None else extractor(model_folder, batch_size=batch_size)
    assert run([]) == []
    assert run(()) == []
    assert run([""]) == [[[]]]  # a text without words: no vector


@pytest.mark.parametrize(
    "inputs, named",
    [(5, "got int"), (b"text", "got bytes"), ({"text": "a"}, "got dict"), (["a", 5], "texts as strings, got int")],
)
def test_inputs_that_are_not_texts_are_refused_by_name(model_folder, inputs, named):
    with pytest.raises(ValueError, match=named):
        extractor(model_folder)(inputs)


def test_the_declared_pipeline_needs_the_flag_or_the_class(model_folder):
    with pytest.raises(ValueError, match="set the option `trust_remote_code=True`"):
        pipeline("feature-extraction", model=str(model_folder))
    remote = pipeline("feature-extraction", model=str(model_folder), trust_remote_code=True, batch_size=4)
    assert type(remote).__name__ == "ElmoFeatureExtractionPipeline"
    assert type(remote).__module__.startswith("transformers_modules.")  # the folder's copy of the code
    assert type(remote.model) is ElmoModel
    assert remote(TEXTS) == extractor(model_folder, batch_size=4)(TEXTS)
