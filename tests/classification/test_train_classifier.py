"""elmo-train-classifier end to end on tiny files with the fixture biLM: training learns a separable task (the default
L-BFGS fit as well as scikit-learn's logistic regression on the same pooled layers), the outputs (results,
predictions with label names, card, reloadable model) are written, the activation cache skips the biLM after the first
epoch of the Trainer's fit."""

import json
from pathlib import Path

import pytest
import torch
from separable_sentences import separable_sentences
from trainer_runs import trainer_flags
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

from modeling_elmo.classification import train as run_classifier
from modeling_elmo.classification.defaults import NEW_HEAD_DEFAULTS
from modeling_elmo.foundation.folder_record import read_record

POSITIVE = ["good", "great", "fine", "superb", "lovely", "wonderful"]
NEGATIVE = ["bad", "awful", "poor", "dreadful", "boring", "terrible"]


def _sentences(words: list[str], label: str) -> list[dict]:
    """Every two-word text of distinct `words` (15 for six words): the two classes share no word."""
    return [{"text": f"{a} {b}", "label": label} for i, a in enumerate(words) for b in words[i + 1 :]]


def _common(model: Path, output: Path) -> list[str]:
    return trainer_flags(
        model_name_or_path=model,
        output_dir=output,
        classifier_dropout=0.0,
        classifier_pooling="mean",
        learning_rate=0.1,
        per_device_train_batch_size=6,
        seed=0,
    )


@pytest.fixture(scope="module")
def single_text_run(converted_fixture, tmp_path_factory):
    folder = tmp_path_factory.mktemp("classifier")
    records = _sentences(POSITIVE, "pos") + _sentences(NEGATIVE, "neg")
    train = folder / "train.jsonl"
    train.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    test = folder / "test.csv"  # another format for the test file, and no labels: predictions only
    test.write_text("text\ngreat lovely fine\nawful boring\n", encoding="utf-8")
    output = folder / "out"
    results = run_classifier.main(
        [
            *_common(converted_fixture, output),
            f"--train_file={train}",
            f"--validation_file={train}",
            f"--test_file={test}",
            "--text_column_names=text",
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--elmo_cache=True",
            "--head_fit=trainer",
            "--num_train_epochs=10",
            "--eval_strategy=epoch",
            "--save_strategy=epoch",
            "--save_total_limit=1",
            "--load_best_model_at_end=True",
            "--metric_for_best_model=accuracy",
            "--logging_steps=5",
        ]
    )
    return output, results


def test_learns_and_keeps_the_best_checkpoint(single_text_run):
    output, results = single_text_run
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    accuracies = [entry["eval_accuracy"] for entry in history if "eval_accuracy" in entry]
    assert len(accuracies) == 10 and losses[-1] < 0.5 * losses[0]
    assert results["eval"]["eval_accuracy"] == pytest.approx(max(accuracies))
    assert max(accuracies) >= 0.9 > accuracies[0]
    assert json.loads((output / "eval_results.json").read_text())["eval_f1"] == results["eval"]["eval_f1"]
    assert not (output / "test_results.json").exists()  # the test file has no labels


def test_cache_skips_the_bilm_after_the_first_epoch(single_text_run):
    _, results = single_text_run
    sentences = 30
    assert results["train"]["train_cache_misses"] == sentences  # the first epoch only
    assert results["train"]["train_cache_hits"] >= 9 * sentences  # later epochs (and evaluations) hit


def test_predictions_card_and_reload(single_text_run):
    output, results = single_text_run
    assert (output / "predict_results.txt").read_text() == "index\tprediction\n0\tpos\n1\tneg\n"
    card = (output / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card and f"{results['eval']['eval_accuracy']:.4f}" in card
    assert "`" + str(output.parent / "train.jsonl") + "`" in card
    model = AutoModelForSequenceClassification.from_pretrained(output)
    assert model.config.classifier_concat_layers and model.scalar_mix is None  # the new head: no mix to report
    assert "| `scalar_mix` |" not in card
    assert model.config.id2label == {0: "neg", 1: "pos"} and model.config.problem_type == "single_label_classification"
    record = read_record(output, AssertionError)
    assert record.tool == "elmo-train-classifier" and record.complete and "README.md" in record.files


def test_a_finished_run_folder_can_be_reused_and_evaluation_only_uses_the_model_labels(single_text_run, tmp_path):
    output, _ = single_text_run
    test = tmp_path / "test.jsonl"
    test.write_text('{"text": "superb lovely", "label": "pos"}\n', encoding="utf-8")
    results = run_classifier.main(
        [*_common(output, output), f"--test_file={test}", "--text_column_names=text", "--do_predict"]
    )
    assert results["test"]["test_accuracy"] == 1.0
    assert json.loads((output / "test_results.json").read_text())["test_accuracy"] == 1.0


def test_sentence_pairs_from_two_csv_columns(converted_fixture, tmp_path):
    """Label = polarity of the second text; the first text is noise. The pair model learns it, and the pipeline on
    {"text", "text_pair"} agrees with the predictions file."""
    rows = [
        (first["text"], second["text"], second["label"])
        for first, second in zip(
            _sentences(NEGATIVE, "neg") + _sentences(POSITIVE, "pos"),
            _sentences(POSITIVE, "pos") + _sentences(NEGATIVE, "neg"),
            strict=True,
        )
    ]
    train = tmp_path / "train.csv"
    train.write_text("premise,hypothesis,label\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows), encoding="utf-8")
    output = tmp_path / "out"
    results = run_classifier.main(
        [
            *_common(converted_fixture, output),
            f"--train_file={train}",
            f"--validation_file={train}",
            f"--test_file={train}",
            "--text_column_names=premise,hypothesis",
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--num_train_epochs=10",
            "--classifier_batch_norm=False",  # the head this recipe (learning rate 0.1, 5 steps an epoch) was set for
        ]
    )
    assert results["eval"]["eval_accuracy"] >= 0.9
    assert json.loads((output / "test_results.json").read_text())["test_accuracy"] == results["test"]["test_accuracy"]
    assert AutoModelForSequenceClassification.from_pretrained(output).config.classifier_sentence_pairs
    predicted = (output / "predict_results.txt").read_text().splitlines()[1:3]
    classifier = pipeline("text-classification", model=str(output))
    for (premise, hypothesis, _), line in zip(rows[:2], predicted, strict=True):
        assert classifier({"text": premise, "text_pair": hypothesis})["label"] == line.split("\t")[1]
    assert "Text columns: premise, hypothesis." in (output / "README.md").read_text()


def test_float_labels_train_a_regression_on_word_lists(converted_fixture, tmp_path):
    records = [{"words": record["text"].split(), "score": 4.5} for record in _sentences(POSITIVE, "")]
    records += [{"words": record["text"].split(), "score": 0.5} for record in _sentences(NEGATIVE, "")]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    output = tmp_path / "out"
    results = run_classifier.main(
        [
            *_common(converted_fixture, output),
            f"--train_file={train}",
            f"--validation_file={train}",
            "--text_column_names=words",
            "--label_column_name=score",
            "--do_train",
            "--do_eval",
            "--num_train_epochs=10",
            "--classifier_batch_norm=False",  # the head this recipe (learning rate 0.1, 5 steps an epoch) was set for
        ]
    )
    config = AutoModelForSequenceClassification.from_pretrained(output).config
    assert config.num_labels == 1 and config.problem_type == "regression"
    assert results["eval"]["eval_mse"] < 2.0  # half the MSE of always predicting the mean (4.0)


def _write_separable_sets(folder: Path) -> dict[str, list[dict]]:
    sets = {name: separable_sentences(200, seed) for name, seed in (("train", 0), ("dev", 1), ("test", 2))}
    for name, records in sets.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return sets


@torch.no_grad()
def _pooled_layers(model_dir: Path, records: list[dict]) -> torch.Tensor:
    """Every biLM layer mean-pooled over each sentence's words, concatenated: (sentences, layers * dim), from the
    biLM's layers alone (not through the classifier's head)."""
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2).eval()
    encoding = AutoTokenizer.from_pretrained(model_dir)(
        [record["sentence"] for record in records], is_split_into_words=True, padding=True, return_tensors="pt"
    )
    layers = model.elmo_layers(encoding["input_ids"], encoding["attention_mask"])
    words = encoding["attention_mask"].unsqueeze(-1).float()
    return torch.cat([(layer * words).sum(dim=1) / words.sum(dim=1) for layer in layers], dim=-1)


@pytest.fixture(scope="module")
def separable_run(converted_fixture, tmp_path_factory):
    """The command with its defaults on the separable set: only the files, the cache and the outputs are given."""
    folder = tmp_path_factory.mktemp("separable")
    sets = _write_separable_sets(folder)
    output = folder / "out"
    results = run_classifier.main(
        [
            *trainer_flags(
                model_name_or_path=converted_fixture,
                output_dir=output,
                train_file=folder / "train.jsonl",
                validation_file=folder / "dev.jsonl",
                test_file=folder / "test.jsonl",
                elmo_cache=True,
                save_strategy="no",
            ),
            "--do_train",
            "--do_eval",
            "--do_predict",
        ]
    )
    return output, results, sets


def test_the_defaults_learn_a_small_separable_set_as_well_as_logistic_regression(converted_fixture, separable_run):
    """200 training sentences whose classes share no class word (issue 31: the Trainer's own defaults stayed at
    chance on such a set). The defaults (a new head, fitted by L-BFGS) score on dev what scikit-learn's logistic
    regression (L2, C picked on dev from the same grid) scores on the same biLM's pooled layers, with the same C."""
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    linear_model = pytest.importorskip("sklearn.linear_model")
    output, results, sets = separable_run
    features = {name: _pooled_layers(converted_fixture, records).numpy() for name, records in sets.items()}
    labels = {name: [record["label"] for record in records] for name, records in sets.items()}
    scaler = preprocessing.StandardScaler().fit(features["train"])
    dev_scores = {}
    for strength in (0.001, 0.01, 0.1, 1.0):
        regression = linear_model.LogisticRegression(C=strength, max_iter=1000)
        regression.fit(scaler.transform(features["train"]), labels["train"])
        dev_scores[strength] = regression.score(scaler.transform(features["dev"]), labels["dev"])
    best = max(dev_scores, key=lambda strength: (dev_scores[strength], -strength))
    assert dev_scores[best] >= 0.95  # the set is separable for the regression (0.98)
    assert results["eval"]["eval_accuracy"] >= dev_scores[best] - 1 / 200  # one sentence
    assert results["train"]["head_fit"] == "lbfgs" and results["train"]["l2_strength_C"] == best
    assert results["test"]["test_accuracy"] >= 0.9
    config = AutoModelForSequenceClassification.from_pretrained(output).config
    assert {name: getattr(config, name) for name in NEW_HEAD_DEFAULTS} == NEW_HEAD_DEFAULTS


def test_the_lbfgs_fit_reports_what_ran_and_the_saved_folder_predicts_the_same(separable_run):
    output, results, sets = separable_run
    assert "epoch" not in results["train"] and "learning_rate" not in results["train"]
    assert set(results["train"]) >= {f"pick_accuracy_C={strength:g}" for strength in (0.001, 0.01, 0.1, 1)}
    card = (output / "README.md").read_text()
    assert "L-BFGS logistic regression" in card and "learning rate" not in card
    classifier = pipeline("text-classification", model=str(output))
    predicted = [line.split("\t")[1] for line in (output / "predict_results.txt").read_text().splitlines()[1:]]
    reloaded = [result["label"] for result in classifier([" ".join(record["sentence"]) for record in sets["test"]])]
    assert reloaded == predicted and len(predicted) == 200
    gold = [record["label"] for record in sets["test"]]
    accuracy = sum(label == truth for label, truth in zip(reloaded, gold, strict=True)) / len(gold)
    assert accuracy == pytest.approx(results["test"]["test_accuracy"])


def test_without_a_validation_file_c_is_picked_on_held_out_training_texts(converted_fixture, tmp_path):
    _write_separable_sets(tmp_path)
    results = run_classifier.main(
        [
            *trainer_flags(
                model_name_or_path=converted_fixture,
                output_dir=tmp_path / "out",
                train_file=tmp_path / "train.jsonl",
                seed=3,
            ),
            "--do_train",
        ]
    )
    assert results["train"]["C_picked_on"] == "20 training texts held out (seed 3)"
    assert results["train"]["train_samples"] == 200 and results["train"]["train_accuracy"] >= 0.95


def test_a_new_bilstm_head_keeps_the_scalar_mix(converted_fixture, tmp_path):
    """The new-head defaults concatenate the pooled layers for the linear head only: the BiLSTM reads mixed vectors."""
    train = tmp_path / "train.jsonl"
    records = _sentences(POSITIVE, "pos") + _sentences(NEGATIVE, "neg")
    train.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    output = tmp_path / "out"
    run_classifier.main(
        [
            *_common(converted_fixture, output),
            f"--train_file={train}",
            "--text_column_names=text",
            "--do_train",
            "--num_train_epochs=1",
            "--classifier_head=bilstm",
        ]
    )
    model = AutoModelForSequenceClassification.from_pretrained(output)
    assert model.config.classifier_head == "bilstm" and not model.config.classifier_concat_layers
    assert model.scalar_mix is not None
