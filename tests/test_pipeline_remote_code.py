"""pipeline() on a saved ELMo folder through remote code alone: an interpreter without this package
(`load_without_package.py`) tags raw text and extracts features with the code and declarations that save_pretrained
wrote, and gets what the package's own code gives."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch
from shared_paths import PACKAGE_DIR
from test_ner_pipeline import LABELS, TRICKY, elmo_pipeline, tagger_folder
from test_sequence_classification import PIPELINE_INPUTS, classifier_folder
from transformers import pipeline

from modeling_elmo import (
    ElmoConfig,
    ElmoFeatureExtractionPipeline,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
    ElmoTokenizer,
)
from modeling_elmo.configuration_elmo import CUSTOM_PIPELINES
from modeling_elmo.hub.remote_code import CONFIG_AUTO_MAP, remote_code_problems

SCRIPT = Path(__file__).resolve().parent / "load_without_package.py"
STRATEGIES = ["none", "simple", "first", "max", "average"]
# the pipelines that the interpreter without the package runs, each compared with the package's own code
RUNS = [
    *({"task": "token-classification", "kwargs": {"aggregation_strategy": s}, "inputs": TRICKY} for s in STRATEGIES),
    {"task": "ner", "kwargs": {}, "inputs": TRICKY[1]},
    {"task": "feature-extraction", "kwargs": {}, "inputs": TRICKY},
    {"task": "feature-extraction", "kwargs": {"batch_size": 3}, "inputs": ["Hello", *TRICKY]},
    {"task": "feature-extraction", "kwargs": {}, "inputs": []},
]


def run_without_package(tmp_path: Path, folder: Path, runs: list[dict]) -> list[dict]:
    """Run `runs` through `pipeline(..., model=folder, trust_remote_code=True)` where `modeling_elmo` is missing."""
    request = {"repo_id": str(folder), "pipelines": runs, "output": str(tmp_path / "outputs.pt")}
    (tmp_path / "request.json").write_text(json.dumps(request))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    site_packages = sysconfig.get_paths()["purelib"]
    command = [sys.executable, "-I", "-S", str(SCRIPT), site_packages, str(tmp_path / "request.json")]
    completed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = torch.load(tmp_path / "outputs.pt")
    assert not result["modeling_elmo_in_sys_modules"]
    return result["pipelines"]


@pytest.fixture(scope="module")
def remote_runs(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A tagger saved with the package, and `RUNS` on it in an interpreter without the package."""
    tmp_path = tmp_path_factory.mktemp("remote")
    folder = tagger_folder(tmp_path, "B-PER")
    return folder, run_without_package(tmp_path, folder, RUNS)


def _entities(outputs: list) -> list[tuple]:
    """Entities of one text, or of each text of a list, without their scores."""
    if outputs and isinstance(outputs[0], list):
        return [_entities(text_outputs) for text_outputs in outputs]
    return [(e["word"], e["start"], e["end"], e.get("entity", e.get("entity_group"))) for e in outputs]


def _scores(outputs: list) -> list[float]:
    if outputs and isinstance(outputs[0], list):
        return [score for text_outputs in outputs for score in _scores(text_outputs)]
    return [float(entity["score"]) for entity in outputs]


@pytest.mark.integration
def test_tagging_raw_text_through_remote_code_only(remote_runs):
    folder, results = remote_runs
    for run, result in zip(RUNS, results, strict=True):
        if run["task"] == "feature-extraction":
            continue
        assert "error" not in result, result["error"]
        # the repo's own copies of the pipeline and the model, not the stock pipeline (which reads one id per token)
        assert result["class"].startswith("transformers_modules.")
        assert result["class"].endswith(".pipeline_elmo.ElmoTokenClassificationPipeline")
        assert result["model_class"].endswith(".modeling_elmo.ElmoForTokenClassification")
        expected = elmo_pipeline(run["task"], folder, **run["kwargs"])(run["inputs"])
        assert _entities(result["outputs"]) == _entities(expected)
        assert _scores(result["outputs"]) == pytest.approx(_scores(expected), abs=1e-6)
    # every word of the raw text, at its offsets, is its own B-PER entity
    none_strategy = results[STRATEGIES.index("none")]["outputs"]
    for text, entities in zip(TRICKY, none_strategy, strict=True):
        assert [(e["word"], e["start"], e["end"]) for e in entities] == ElmoTokenizer().split_words(text)
        assert {e["entity"] for e in entities} == ({"B-PER"} if text.strip() else set())


@pytest.mark.integration
def test_feature_extraction_through_remote_code_only(remote_runs):
    folder, results = remote_runs
    runs = [(run, result) for run, result in zip(RUNS, results, strict=True) if run["task"] == "feature-extraction"]
    assert len(runs) == 3
    for run, result in runs:
        assert "error" not in result, result["error"]
        # the repo's own copy of the pipeline (one vector per word, batched or not) and of the biLM, without its head
        assert result["class"].startswith("transformers_modules.")
        assert result["class"].endswith(".pipeline_elmo.ElmoFeatureExtractionPipeline")
        assert result["model_class"].endswith(".modeling_elmo.ElmoModel")
        # the package's classes, one text at a time
        single = pipeline("feature-extraction", model=str(folder), pipeline_class=ElmoFeatureExtractionPipeline)
        assert len(result["outputs"]) == len(run["inputs"])
        for text, found in zip(run["inputs"], result["outputs"], strict=True):
            words = len(ElmoTokenizer().split_words(text))
            assert torch.tensor(found).shape == ((1, words, 8) if words else (1, 0))  # nested lists: [[]] for none
            torch.testing.assert_close(torch.tensor(found), torch.tensor(single(text)), rtol=0, atol=1e-6)


@pytest.mark.integration
def test_text_pair_classification_through_remote_code_only(tmp_path):
    folder = classifier_folder(tmp_path, classifier_sentence_pairs=True)
    runs = [
        {"task": "text-classification", "kwargs": {"top_k": None}, "inputs": PIPELINE_INPUTS},
        {"task": "text-classification", "kwargs": {}, "inputs": PIPELINE_INPUTS[0]},
    ]
    for run, result in zip(runs, run_without_package(tmp_path, folder, runs), strict=True):
        assert "error" not in result, result["error"]
        assert result["class"] == "transformers.pipelines.text_classification.TextClassificationPipeline"
        assert result["model_class"].startswith("transformers_modules.")
        assert result["model_class"].endswith(".modeling_elmo.ElmoForSequenceClassification")
        expected = pipeline("text-classification", model=str(folder), **run["kwargs"])(run["inputs"])
        found = result["outputs"]
        if isinstance(found, dict):  # one input, top label only
            found, expected = [[found]], [[expected]]
        for found_labels, expected_labels in zip(found, expected, strict=True):
            assert [r["label"] for r in found_labels] == [r["label"] for r in expected_labels]
            assert [r["score"] for r in found_labels] == pytest.approx([r["score"] for r in expected_labels], abs=1e-6)


@pytest.mark.parametrize("model_class", [ElmoModel, ElmoForTokenClassification, ElmoForSequenceClassification])
def test_every_saved_folder_declares_the_pipeline(tmp_path, model_class):
    # whatever class saved it, a folder answers to every Auto class and declares the pipeline, whose code it holds
    sizes = {"char_embedding_dim": 4, "num_highway_layers": 0, "lstm_cell_size": 8, "projection_dim": 4}
    config = ElmoConfig(char_filters=[[1, 4]], num_hidden_layers=1, id2label=dict(enumerate(LABELS)), **sizes)
    model_class(config).save_pretrained(tmp_path)
    ElmoTokenizer().save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["auto_map"] == CONFIG_AUTO_MAP
    assert saved["custom_pipelines"] == CUSTOM_PIPELINES
    assert (tmp_path / "pipeline_elmo.py").read_bytes() == (PACKAGE_DIR / "pipeline_elmo.py").read_bytes()
    assert remote_code_problems(tmp_path) == []


@pytest.mark.integration
def test_importing_the_package_or_a_config_leaves_transformers_pipelines_unimported():
    # the pipeline class comes on first use; the package and a config alone (as remote code) need no pipeline code
    code = (
        "import sys; import modeling_elmo; print('transformers.pipelines' in sys.modules); "
        "print(modeling_elmo.ElmoTokenClassificationPipeline.__module__, 'transformers.pipelines' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert found == ["False", "modeling_elmo.pipeline_elmo", "True"]


def test_declared_pipeline_must_ship_its_code(tmp_path):
    folder = tagger_folder(tmp_path, "O")
    config = json.loads((folder / "config.json").read_text())
    config["custom_pipelines"] = {
        "token-classification": {"impl": "pipeline_elmo.ElmoTagger"},
        "ner": {"pt": ["AutoModelForTokenClassification"]},
        "summarization": {"impl": "summarize.Summarizer"},
    }
    (folder / "config.json").write_text(json.dumps(config))
    assert remote_code_problems(folder) == [
        "config.json: custom_pipelines['token-classification']['impl'] = 'pipeline_elmo.ElmoTagger', but "
        "pipeline_elmo.py defines no ElmoTagger",
        "config.json: custom_pipelines['ner'] has no 'impl' entry",
        "config.json: custom_pipelines['summarization']['impl'] = 'summarize.Summarizer', but summarize.py is "
        "missing or unreadable",
    ]


def test_damaged_declarations_and_code_files_are_named(tmp_path):
    """Before: a `custom_pipelines` list passed as complete, and a `.py` entry that is a folder raised
    IsADirectoryError out of the check."""
    folder = tagger_folder(tmp_path, "O")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "custom_pipelines": ["token-classification"]}))
    (folder / "notes.py").mkdir()
    (folder / "latin1.py").write_bytes(b"# caf\xe9\n")
    assert remote_code_problems(folder) == [
        "latin1.py: not a readable Python file ('utf-8' codec can't decode byte 0xe9 in position 5: invalid "
        "continuation byte)",
        "notes.py: not a readable Python file (Is a directory)",
        "config.json: custom_pipelines must map each task to its pipeline, got ['token-classification']",
    ]
    config["custom_pipelines"] = {"ner": {"impl": 5, "pt": ["AutoModelForTokenClassification"]}}
    (folder / "config.json").write_text(json.dumps(config))
    assert "config.json: custom_pipelines['ner']['impl'] must be a 'module.Class' string, got 5" in (
        remote_code_problems(folder)
    )
