"""Which class `pipeline()` builds with this package imported: ELMo folders get the pipeline their config declares
(only with `trust_remote_code=True`, or when `pipeline_class` names it), every other model the stock class."""

import json

import pytest
from test_ner_pipeline import tagger_folder
from transformers import (
    BertConfig,
    BertForTokenClassification,
    BertTokenizer,
    FeatureExtractionPipeline,
    TokenClassificationPipeline,
    pipeline,
)

import modeling_elmo
from modeling_elmo import ElmoFeatureExtractionPipeline, ElmoTokenClassificationPipeline
from modeling_elmo.configuration_elmo import CUSTOM_PIPELINES

BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "anna", "met", "bob", "."]


@pytest.fixture
def bert_folder(tmp_path):
    """A tiny BERT tagger and its tokenizer, built locally."""
    config = BertConfig(
        vocab_size=len(BERT_VOCAB),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        id2label={0: "O", 1: "B-PER"},
        label2id={"O": 0, "B-PER": 1},
    )
    folder = tmp_path / "bert"
    BertForTokenClassification(config).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(BERT_VOCAB) + "\n", encoding="utf-8")
    BertTokenizer.from_pretrained(folder).save_pretrained(folder)  # (Transformers 4.x reads a vocabulary file only)
    return folder


@pytest.mark.parametrize("task", ["token-classification", "ner"])
def test_other_models_keep_the_stock_pipeline(bert_folder, task):
    tagger = pipeline(task, model=str(bert_folder), ignore_labels=[])
    assert type(tagger) is TokenClassificationPipeline
    assert [entity["word"] for entity in tagger("anna met bob .")] == ["anna", "met", "bob", "."]


def test_elmo_folder_with_the_package_installed(tmp_path):
    folder = str(tagger_folder(tmp_path, "B-PER"))
    # Transformers runs a pipeline that a config declares only when told to
    with pytest.raises(ValueError, match="set the option `trust_remote_code=True`"):
        pipeline("token-classification", model=folder)
    with pytest.raises(RuntimeError, match="Pick one in"):  # two declared names: no task is guessed
        pipeline(model=folder, trust_remote_code=True)

    remote = pipeline("token-classification", model=folder, trust_remote_code=True)
    assert type(remote).__name__ == "ElmoTokenClassificationPipeline"
    assert type(remote).__module__.startswith("transformers_modules.")  # the folder's copy of the code
    local = pipeline("token-classification", model=folder, pipeline_class=ElmoTokenClassificationPipeline)
    assert type(local) is ElmoTokenClassificationPipeline
    assert type(local.model) is modeling_elmo.ElmoForTokenClassification
    assert type(local.tokenizer) is modeling_elmo.ElmoTokenizer
    text = "Anna  Karenina met Bob"
    assert remote(text) == local(text)
    assert [(e["word"], e["start"]) for e in local(text)] == [("Anna", 0), ("Karenina", 6), ("met", 15), ("Bob", 19)]

    # pipeline() rewrites the declaration in the config it reads, not in the model's: a saved pipeline tags again
    remote.save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["custom_pipelines"] == CUSTOM_PIPELINES
    assert pipeline("ner", model=str(tmp_path / "again"), trust_remote_code=True)(text) == local(text)

    # feature extraction is declared too: the flag or the class, and every other model keeps the stock class
    with pytest.raises(ValueError, match="set the option `trust_remote_code=True`"):
        pipeline("feature-extraction", model=folder)
    extractor = pipeline("feature-extraction", model=folder, pipeline_class=ElmoFeatureExtractionPipeline)
    assert type(extractor) is ElmoFeatureExtractionPipeline
    assert type(extractor.model) is modeling_elmo.ElmoModel


def test_other_models_keep_the_stock_feature_extraction(bert_folder):
    assert type(pipeline("feature-extraction", model=str(bert_folder))) is FeatureExtractionPipeline
