"""The SST reader against the counts published in ../shared/data/README.md, and its parsing rules."""

import json
from collections import Counter

import pytest

from modeling_elmo.classification import sst
from tests.conftest import require_shared


@pytest.fixture(scope="module")
def sst_dir():
    return require_shared("data/sst")


@pytest.fixture(scope="module")
def sst2(sst_dir, tmp_path_factory):
    """SST-2 written once for the module: (folder, counts)."""
    folder = tmp_path_factory.mktemp("sst2")
    return folder, sst.prepare_sst(sst_dir, folder, binary=True)


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_sst5_sentences_and_label_counts(sst_dir, tmp_path):
    counts = sst.prepare_sst(sst_dir, tmp_path)
    assert counts == {"train": 8544, "validation": 1101, "test": 2210}
    published = {
        "train": [1092, 2218, 1624, 2322, 1288],
        "validation": [139, 289, 229, 279, 165],
        "test": [279, 633, 389, 510, 399],
    }
    for split, expected in published.items():
        labels = Counter(record["label"] for record in _records(tmp_path / f"{split}.jsonl"))
        assert [labels[label] for label in range(5)] == expected


def test_sst2_drops_neutral_and_binarises(sst2):
    folder, counts = sst2
    assert counts == {"train": 6920, "validation": 872, "test": 1821}
    first = _records(folder / "train.jsonl")[0]  # "The Rock is destined ..." has root label 3
    assert first["label"] == 1 and first["sentence"][:3] == ["The", "Rock", "is"]
    assert {record["label"] for record in _records(folder / "test.jsonl")} == {0, 1}


def test_phrases_are_distinct_and_include_every_sentence(sst_dir, sst2):
    records = sst.build_split(sst_dir / "train.txt", binary=True, phrases=True)
    phrases = [tuple(record["sentence"]) for record in records]
    sentences = {tuple(record["sentence"]) for record in _records(sst2[0] / "train.jsonl")}
    assert len(phrases) == len(set(phrases)) > 10 * len(sentences)
    assert sentences <= set(phrases)
    assert {record["label"] for record in records} == {0, 1}


def test_tree_parsing_unescapes_and_splits_leaves():
    phrases = sst.parse_tree(r"(3 (2 -LRB- 8 1\/2 -RRB-) (4 (4 good) (2 \*)))")
    assert phrases[0] == sst.Phrase(("(", "8", "1/2", ")", "good", "*"), 3)
    assert [phrase.label for phrase in phrases] == [3, 2, 4, 4, 2]
    assert phrases[2].words == ("good", "*")


@pytest.mark.parametrize("line", ["(3 (2 a) (5 b))", "(3 (2 a) (2 b)", "(3 (2 a)) (2 c)", "(3 ())"])
def test_malformed_trees_name_file_and_line(tmp_path, line):
    for name in ("train.txt", "dev.txt", "test.txt"):
        (tmp_path / name).write_text("(2 (2 fine) (2 .))\n" + line + "\n", encoding="utf-8")
    with pytest.raises(sst.TreebankError, match=r"train\.txt, line 2: "):
        sst.prepare_sst(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_command_refuses_existing_files_and_writes_nothing(sst_dir, tmp_path, capsys):
    (tmp_path / "validation.jsonl").write_text("mine\n")
    with pytest.raises(SystemExit) as exit_info:
        sst.main(["--data_dir", str(sst_dir), "--output_dir", str(tmp_path), "--binary"])
    assert exit_info.value.code == 2
    assert "validation.jsonl exists" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["validation.jsonl"]
    assert (tmp_path / "validation.jsonl").read_text() == "mine\n"


def test_a_failed_write_is_one_line_and_leaves_no_partial_file(sst_dir, tmp_path, capsys, monkeypatch):
    """A write that fails (here: the disk is full at the second file) leaves only the files completed before it."""
    replace = sst.write_text_atomically.__globals__["os"].replace
    calls = []

    def full_disk_on_the_second(source, target):
        calls.append(target)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(sst.write_text_atomically.__globals__["os"], "replace", full_disk_on_the_second)
    with pytest.raises(SystemExit) as exit_info:
        sst.main(["--data_dir", str(sst_dir), "--output_dir", str(tmp_path), "--binary"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "Cannot write" in error[0] and "validation.jsonl" in error[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["train.jsonl"]
