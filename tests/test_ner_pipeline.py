"""pipeline("token-classification") on raw text with the package's `ElmoTokenClassificationPipeline`: character
offsets index the input, every aggregation strategy. How `pipeline()` picks the class: test_pipeline_*.py."""

from pathlib import Path

import pytest
import torch
from transformers import pipeline

from modeling_elmo import ElmoConfig, ElmoForTokenClassification, ElmoTokenClassificationPipeline, ElmoTokenizer

LABELS = ["O", "B-PER", "I-PER"]
TRICKY = [
    "  Zürich's   café,\tnaïve —  日本語!  ",
    "Mr. O'Neil met  Dr. Smith...  in São Paulo (Brazil) at 3.5 p.m.\n\nThen left.",
    "emoji 👍🏽 and ﬁ ligatures",
    # combining marks, right-to-left scripts, NUL and a zero-width space, a lone surrogate
    "cafe\u0301 na\u0308ive שלום עולם مرحبا a\x00b\u200bc \ud800 \u0301",
    "",
]


def tagger_folder(tmp_path: Path, favourite: str, use_crf: bool = False) -> Path:
    """A saved tiny tagger (and tokenizer) whose classifier ignores its input and always prefers `favourite`."""
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


def elmo_pipeline(task: str, folder: Path, **kwargs) -> ElmoTokenClassificationPipeline:
    """The pipeline for `folder`, run by this package's code (no remote code)."""
    return pipeline(task, model=str(folder), pipeline_class=ElmoTokenClassificationPipeline, **kwargs)


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("strategy", ["none", "simple", "first", "max", "average"])
def test_offsets_index_the_raw_text(tmp_path, text, strategy):
    ner = elmo_pipeline("token-classification", tagger_folder(tmp_path, "B-PER"), aggregation_strategy=strategy)
    entities = ner(text)
    words = ElmoTokenizer().split_words(text)
    # every word is its own B-PER entity, whatever the strategy
    assert [(e["word"], e["start"], e["end"]) for e in entities] == words
    assert all(text[e["start"] : e["end"]] == e["word"] for e in entities)
    key = "entity" if strategy == "none" else "entity_group"
    expected = {"B-PER"} if strategy == "none" else {"PER"}
    assert {e[key] for e in entities} == (expected if words else set())


@pytest.mark.parametrize("use_crf", [False, True])
def test_simple_grouping_spans_the_original_text(tmp_path, use_crf):
    # I-PER everywhere (the CRF's BIO constraint turns the first word into B-PER): one entity over all words
    ner = elmo_pipeline("ner", tagger_folder(tmp_path, "I-PER", use_crf=use_crf), aggregation_strategy="simple")
    text = TRICKY[1]
    (entity,) = ner(text)
    words = ElmoTokenizer().split_words(text)
    assert (entity["start"], entity["end"]) == (words[0][1], words[-1][2])
    assert entity["word"] == text[words[0][1] : words[-1][2]] and entity["entity_group"] == "PER"


def test_batch_and_pre_split_input(tmp_path):
    ner = elmo_pipeline("token-classification", tagger_folder(tmp_path, "B-PER"))
    first, second = ner(["Anna  Karenina", "Bob"])
    assert [(e["word"], e["start"], e["end"]) for e in first] == [("Anna", 0, 4), ("Karenina", 6, 14)]
    assert [e["index"] for e in second] == [0]
    (pre_split,) = ner(["New York", "!"], is_split_into_words=True)
    assert [(e["word"], e["start"], e["end"]) for e in pre_split] == [("New York", 0, 8), ("!", 9, 10)]


def test_ignored_labels_and_empty_text(tmp_path):
    ner = elmo_pipeline("token-classification", tagger_folder(tmp_path, "O"))
    assert ner("Nothing to see here .") == []
    assert ner("   ") == []


def test_model_object_and_stride(tmp_path):
    # a model object gives pipeline() no config to read the declared pipeline from: `pipeline_class` names it
    folder = tagger_folder(tmp_path, "B-PER")
    model, tokenizer = ElmoForTokenClassification.from_pretrained(folder), ElmoTokenizer.from_pretrained(folder)
    ner = pipeline("ner", model=model, tokenizer=tokenizer, pipeline_class=ElmoTokenClassificationPipeline)
    assert [(e["word"], e["start"]) for e in ner("Anna  Karenina")] == [("Anna", 0), ("Karenina", 6)]
    with pytest.raises(ValueError, match="does not support `stride`"):
        ner("Anna", stride=2)


BAD_CALLS = {
    "unknown-strategy": ("Anna", {"aggregation_strategy": "longest"}, "aggregation_strategy must be one of 'none'"),
    "bytes": (b"Anna", {}, "takes a string, a list of strings, a dataset or a generator, got bytes"),
    "number": (3, {}, "got int"),
    "none": (None, {}, "got NoneType"),
    "empty-word": (["Anna", "", "K"], {"is_split_into_words": True}, "word 1 is ''"),
    "blank-word": (["Anna", " \t"], {"is_split_into_words": True}, "word 1 is ' \\t'"),
    "word-not-a-string": ([["Anna", 3]], {"is_split_into_words": True}, "word 1 is 3"),
}


@pytest.mark.parametrize("case", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_inputs_are_refused_by_name(tmp_path, case):
    """Before: a KeyError 'LONGEST', "At least one input is required" for bytes or a number, a TypeError for a
    non-string word, and an entity of no text for a blank word."""
    inputs, kwargs, message = case
    ner = elmo_pipeline("token-classification", tagger_folder(tmp_path, "B-PER"))
    with pytest.raises(ValueError) as raised:
        ner(inputs, **kwargs)
    assert message in str(raised.value)
