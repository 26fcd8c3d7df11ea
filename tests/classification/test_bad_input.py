"""Bad input to elmo-train-classifier: one line naming the problem, exit status 2, nothing written. Every input is
checked before the model is loaded, so these runs name a model folder that does not exist: a check that let the
input through would fail on the model instead, with another message."""

import json
from pathlib import Path

import pytest

from modeling_elmo.classification import train as run_classifier

TRAIN = [{"sentence": "a fine film", "label": "pos"}, {"sentence": "a dull film", "label": "neg"}]


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _refused(tmp_path: Path, capsys, arguments: list[str]) -> str:
    """Run the command, check exit 2 and that the output folder was not created; return the one error line."""
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        run_classifier.main(
            [f"--model_name_or_path={tmp_path / 'never-loaded'}", f"--output_dir={output}", "--report_to=none"]
            + arguments
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("elmo-train-classifier: error: ")
    assert not output.exists()
    return error[0]


def test_missing_text_column_names_the_columns(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", TRAIN)
    error = _refused(tmp_path, capsys, [f"--train_file={train}", "--do_train", "--text_column_names=text"])
    assert "train.jsonl: no column 'text'; its columns are: sentence, label." in error


def test_missing_label_column_names_the_columns(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", TRAIN)
    error = _refused(tmp_path, capsys, [f"--train_file={train}", "--do_train", "--label_column_name=sentiment"])
    assert "no column 'sentiment'; its columns are: sentence, label." in error


def test_validation_label_unseen_in_training(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", TRAIN)
    dev = _jsonl(tmp_path / "dev.jsonl", [TRAIN[0], {"sentence": "so-so", "label": "neutral"}])
    error = _refused(
        tmp_path, capsys, [f"--train_file={train}", f"--validation_file={dev}", "--do_train", "--do_eval"]
    )
    assert "dev.jsonl, record 2: label 'neutral' never seen in training (known: neg, pos)." in error


def test_test_label_unseen_in_training(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.csv", [])
    train.write_text("sentence,label\na fine film,1\na dull film,0\n", encoding="utf-8")
    test = tmp_path / "test.csv"
    test.write_text("sentence,label\ngood,1\nbad,7\n", encoding="utf-8")
    error = _refused(tmp_path, capsys, [f"--train_file={train}", f"--test_file={test}", "--do_train", "--do_predict"])
    assert "test.csv, record 2: label '7' never seen in training (known: 0, 1)." in error


def test_empty_text(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", [*TRAIN, {"sentence": "   ", "label": "pos"}])
    error = _refused(tmp_path, capsys, [f"--train_file={train}", "--do_train"])
    assert "train.jsonl, record 3: the text in column 'sentence' is empty." in error


def test_missing_text(tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("sentence,label\na fine film,pos\n,neg\n", encoding="utf-8")
    error = _refused(tmp_path, capsys, [f"--train_file={train}", "--do_train"])
    assert "train.csv, record 2: the text in column 'sentence' is missing." in error


def test_pair_column_missing_from_a_row(tmp_path, capsys):
    records = [
        {"premise": "A man plays.", "hypothesis": "Someone plays.", "label": "entailment"},
        {"premise": "A dog runs.", "label": "neutral"},
    ]
    train = _jsonl(tmp_path / "train.jsonl", records)
    error = _refused(
        tmp_path, capsys, [f"--train_file={train}", "--do_train", "--text_column_names=premise,hypothesis"]
    )
    assert "train.jsonl, record 2: the pair's second text (column 'hypothesis') is missing." in error


def test_regression_target_not_a_number(tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("sentence,score\ngood,4.5\nbad,unknown\n", encoding="utf-8")
    arguments = [f"--train_file={train}", "--do_train", "--label_column_name=score", "--regression=True"]
    error = _refused(tmp_path, capsys, arguments)
    assert "train.csv, record 2: the regression target 'unknown' (column 'score') is not a number." in error


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("train.csv", json.dumps(TRAIN[0]) + "\n", "train.csv: looks like JSON (it starts with '{'), yet named .csv."),
        ("train.jsonl", "sentence,label\ngood,pos\n", "train.jsonl: not JSON or JSON lines"),
        ("train.json", '{"sentence": "good", "label": \n', "train.json: not a valid .json file"),
        ("train.txt", "good\tpos\n", "train.txt: unknown extension '.txt'; use .csv, .json or .jsonl."),
    ],
)
def test_file_of_another_format_than_its_extension(tmp_path, capsys, name, content, expected):
    train = tmp_path / name
    train.write_text(content, encoding="utf-8")
    assert expected in _refused(tmp_path, capsys, [f"--train_file={train}", "--do_train"])


def test_output_folder_with_foreign_files(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", TRAIN)
    output = tmp_path / "out"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        run_classifier.main(
            [f"--model_name_or_path={tmp_path / 'never-loaded'}", f"--output_dir={output}", "--report_to=none"]
            + [f"--train_file={train}", "--do_train"]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "holds files that elmo-train-classifier did not write (notes.txt)" in error and "\n" not in error
    assert [path.name for path in output.iterdir()] == ["notes.txt"]


def test_unknown_head_fit(tmp_path, capsys):
    train = _jsonl(tmp_path / "train.jsonl", TRAIN)
    error = _refused(tmp_path, capsys, [f"--train_file={train}", "--do_train", "--head_fit=adamw"])
    assert "--head_fit" in error and "'adamw'" in error and "lbfgs" in error


def test_head_fit_lbfgs_on_a_head_it_cannot_fit(converted_fixture, tmp_path, capsys):
    """Checked once the model is known (before anything is written): L-BFGS fits a frozen biLM's head only."""
    train = _jsonl(tmp_path / "train.jsonl", TRAIN)
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        run_classifier.main(
            [f"--model_name_or_path={converted_fixture}", f"--output_dir={output}", "--report_to=none"]
            + [f"--train_file={train}", "--do_train", "--head_fit=lbfgs", "--freeze_elmo=False"]
        )
    assert exit_info.value.code == 2
    errors = [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.strip() and not line.startswith("Loading weights")
    ]
    assert errors == [
        "elmo-train-classifier: error: --head_fit lbfgs fits a frozen biLM's linear head on the concatenated layers, "
        "with batch norm and no dropout, for classification, in one process; this run has a biLM that is fine-tuned "
        "(--freeze_elmo False). Use --head_fit trainer."
    ]
    assert not output.exists()


def test_head_fit_lbfgs_beyond_the_memory_free(converted_fixture, tmp_path, capsys, monkeypatch):
    """The L-BFGS fit holds every text's pooled layers: where they cannot fit, one line says how much they need,
    before anything is written."""
    from modeling_elmo.commands import memory

    monkeypatch.setattr(memory, "available_bytes", lambda device: 4 << 20)  # the model fits, 10,000 texts' layers not
    train = _jsonl(tmp_path / "train.jsonl", TRAIN * 5000)
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        run_classifier.main(
            [f"--model_name_or_path={converted_fixture}", f"--output_dir={output}", "--report_to=none"]
            + [f"--train_file={train}", "--do_train"]
        )
    assert exit_info.value.code == 2
    errors = [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.strip() and not line.startswith("Loading weights")
    ]
    assert len(errors) == 1 and errors[0].startswith("elmo-train-classifier: error: this run needs at least ")
    assert (
        f"--head_fit lbfgs holds the pooled layers of all {len(TRAIN) * 5000:,} training and validation" in errors[0]
    )
    assert not output.exists()
