"""pipeline("token-classification") on raw text: character offsets index the input, every aggregation strategy."""

import pytest
import torch
from transformers import pipeline

from modeling_elmo import ElmoConfig, ElmoForTokenClassification, ElmoTokenClassificationPipeline, ElmoTokenizer

LABELS = ["O", "B-PER", "I-PER"]
TRICKY = [
    "  Zürich's   café,\tnaïve —  日本語!  ",
    "Mr. O'Neil met  Dr. Smith...  in São Paulo (Brazil) at 3.5 p.m.\n\nThen left.",
    "emoji 👍🏽 and ﬁ ligatures",
]


def _model_dir(tmp_path, favourite: str, use_crf: bool = False):
    """A tiny model whose classifier ignores its input and always prefers the label `favourite`."""
    torch.manual_seed(0)
    config = ElmoConfig(
        char_filters=[[1, 4], [2, 4]],
        char_embedding_dim=4,
        num_highway_layers=1,
        lstm_cell_size=8,
        projection_dim=4,
        id2label=dict(enumerate(LABELS)),
        label2id={label: index for index, label in enumerate(LABELS)},
        use_crf=use_crf,
    )
    model = ElmoForTokenClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([2.0 if label == favourite else 0.0 for label in LABELS]))
    folder = tmp_path / f"model-{favourite}-{use_crf}"
    model.save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("strategy", ["none", "simple", "first", "max", "average"])
def test_offsets_index_the_raw_text(tmp_path, text, strategy):
    ner = pipeline("token-classification", model=str(_model_dir(tmp_path, "B-PER")), aggregation_strategy=strategy)
    assert isinstance(ner, ElmoTokenClassificationPipeline)
    entities = ner(text)
    words = ElmoTokenizer().split_words(text)
    # every word is its own B-PER entity, whatever the strategy
    assert [(e["word"], e["start"], e["end"]) for e in entities] == words
    assert all(text[e["start"] : e["end"]] == e["word"] for e in entities)
    key = "entity" if strategy == "none" else "entity_group"
    assert {e[key] for e in entities} == ({"B-PER"} if strategy == "none" else {"PER"})


@pytest.mark.parametrize("use_crf", [False, True])
def test_simple_grouping_spans_the_original_text(tmp_path, use_crf):
    # I-PER everywhere (the CRF's BIO constraint turns the first word into B-PER): one entity over all words
    ner = pipeline("ner", model=str(_model_dir(tmp_path, "I-PER", use_crf=use_crf)), aggregation_strategy="simple")
    text = TRICKY[1]
    (entity,) = ner(text)
    words = ElmoTokenizer().split_words(text)
    assert (entity["start"], entity["end"]) == (words[0][1], words[-1][2])
    assert entity["word"] == text[words[0][1] : words[-1][2]] and entity["entity_group"] == "PER"


def test_batch_and_pre_split_input(tmp_path):
    ner = pipeline("token-classification", model=str(_model_dir(tmp_path, "B-PER")))
    first, second = ner(["Anna  Karenina", "Bob"])
    assert [(e["word"], e["start"], e["end"]) for e in first] == [("Anna", 0, 4), ("Karenina", 6, 14)]
    assert [e["index"] for e in second] == [0]
    (pre_split,) = ner(["New York", "!"], is_split_into_words=True)
    assert [(e["word"], e["start"], e["end"]) for e in pre_split] == [("New York", 0, 8), ("!", 9, 10)]


def test_ignored_labels_and_empty_text(tmp_path):
    ner = pipeline("token-classification", model=str(_model_dir(tmp_path, "O")))
    assert ner("Nothing to see here .") == []
    assert ner("   ") == []
