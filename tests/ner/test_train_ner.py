"""elmo-train-ner end to end on a slice of CoNLL-2003: the loss falls, dev F1 rises, reports are written."""

import json
from pathlib import Path

import pytest
from trainer_runs import trainer_flags
from transformers import AutoModelForTokenClassification, pipeline

from modeling_elmo.foundation.folder_record import read_record, unlisted_entries
from modeling_elmo.ner import train as run_ner


def _slice(source: Path, target: Path, sentences: int) -> Path:
    blocks = source.read_text(encoding="utf-8").split("\n\n")[:sentences]
    target.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def trained(converted_fixture, conll_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run_ner")
    train = _slice(conll_dir / "train.txt", folder / "train.txt", 48)
    output = folder / "out"
    results = run_ner.main(
        trainer_flags(
            model_name_or_path=converted_fixture,
            train_file=train,
            validation_file=train,
            test_file=_slice(conll_dir / "test.txt", folder / "test.txt", 40),
            output_dir=output,
            classifier_head="bilstm",
            use_crf=True,
            tagger_hidden_size=32,
            scalar_mix_layer_norm=True,
            classifier_dropout=0.0,
            elmo_cache=True,
            elmo_cache_dir=folder / "cache",
            num_train_epochs=12,
            learning_rate=0.03,
            per_device_train_batch_size=8,
            eval_strategy="epoch",
            save_strategy="epoch",
            save_total_limit=1,
            load_best_model_at_end=True,
            metric_for_best_model="f1",
            logging_steps=6,
            seed=0,
        )
    )
    return folder, output, results


def test_loss_falls_and_f1_rises(trained):
    _, output, results = trained
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    f1s = [entry["eval_f1"] for entry in history if "eval_f1" in entry]
    assert len(f1s) == 12 and losses[-1] < 0.5 * losses[0]
    assert max(f1s) > f1s[0] + 0.1
    assert results["dev"]["dev_f1"] == pytest.approx(max(f1s))  # the best checkpoint was kept


def test_reports_cache_and_reload(trained):
    folder, output, results = trained
    report = (output / "test_report.txt").read_text()
    assert "micro avg" in report and "PER" in report
    test = json.loads((output / "test_results.json").read_text())
    assert {"test_f1", "test_precision", "test_recall", "test_PER_f1"} <= set(test)
    assert results["train"]["train_words_per_second"] > 0
    assert len(list((folder / "cache").glob("*.safetensors"))) == 1
    card = (output / "README.md").read_text()
    assert f"{test['test_f1']:.4f}" in card and "pipeline_tag: token-classification" in card
    assert "base_model:" not in card  # the biLM was a local folder, not a Hub repo id

    model = AutoModelForTokenClassification.from_pretrained(output)
    assert model.config.use_crf and model.config.id2label[0] == "O"
    entities = pipeline(
        "token-classification", model=str(output), aggregation_strategy="simple", trust_remote_code=True
    )("Peter lives in Paris .")
    assert all("Peter lives in Paris ."[e["start"] : e["end"]] == e["word"] for e in entities)


def test_the_run_folder_keeps_the_record_of_what_it_wrote(trained):
    _, output, _ = trained
    record = read_record(output, AssertionError)
    assert record.tool == "elmo-train-ner" and record.complete and "README.md" in record.files
    assert unlisted_entries(output, record) == []


def test_an_output_folder_with_foreign_files_is_refused_like_elmo_train_classifier(tmp_path, capsys):
    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\n", encoding="utf-8")
    output = tmp_path / "out"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    arguments = [
        f"--model_name_or_path={tmp_path / 'never-loaded'}",
        f"--train_file={train}",
        f"--output_dir={output}",
    ]
    with pytest.raises(SystemExit) as exit_info:
        run_ner.main(arguments)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "holds files that elmo-train-ner did not write (notes.txt)" in error and "\n" not in error
    assert [path.name for path in output.iterdir()] == ["notes.txt"]


def test_evaluation_only_rejects_unknown_tags(trained, tmp_path):
    _, output, _ = trained
    test = tmp_path / "test.txt"
    test.write_text("Paris NNP B-NP B-CITY\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="elmo-train-ner: error: .*B-CITY"):
        run_ner.main([f"--model_name_or_path={output}", f"--test_file={test}", f"--output_dir={tmp_path / 'o'}"])


def test_malformed_file_names_the_line(converted_fixture, tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\nrejects VBZ\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"elmo-train-ner: error: .*train\.txt, line 2"):
        run_ner.main(
            [f"--model_name_or_path={converted_fixture}", f"--train_file={train}", f"--output_dir={tmp_path / 'o'}"]
        )


def test_missing_data_or_model_is_one_line(converted_fixture, tmp_path):
    missing_data = [f"--model_name_or_path={converted_fixture}", f"--data_dir={tmp_path / 'nowhere'}"]
    with pytest.raises(SystemExit, match=r"elmo-train-ner: error: .*nowhere/train\.txt"):
        run_ner.main([*missing_data, f"--output_dir={tmp_path / 'o'}"])
    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="elmo-train-ner: error: .*not-a-model"):
        run_ner.main(
            [
                f"--model_name_or_path={tmp_path / 'not-a-model'}",
                f"--train_file={train}",
                f"--output_dir={tmp_path / 'o'}",
            ]
        )


def test_the_command_exits_2_on_bad_input_like_elmo_train_classifier(tmp_path, capsys, monkeypatch):
    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\n", encoding="utf-8")
    arguments = [
        f"--model_name_or_path={tmp_path / 'not-a-model'}",
        f"--train_file={train}",
        f"--output_dir={tmp_path / 'o'}",
    ]
    monkeypatch.setattr("sys.argv", ["elmo-train-ner", *arguments])
    assert run_ner.cli() == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("elmo-train-ner: error: ") and "not-a-model" in error


def test_an_activation_cache_for_an_unfrozen_biLM_is_one_line(converted_fixture, tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\n", encoding="utf-8")
    arguments = [
        f"--model_name_or_path={converted_fixture}",
        f"--train_file={train}",
        f"--output_dir={tmp_path / 'o'}",
    ]
    with pytest.raises(SystemExit, match="elmo-train-ner: error: .*frozen"):
        run_ner.main([*arguments, "--freeze_elmo=False", "--elmo_cache=True"])
