"""Reading a task's files: label names sorted from the data, and a shuffled training subset."""

import json

import pytest

from modeling_elmo.classification.data import DataError
from modeling_elmo.classification.train import DataArguments, read_task


def _write(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return str(path)


def test_integer_labels_sort_numerically_and_map_every_split(tmp_path):
    train = _write(tmp_path / "train.jsonl", [{"sentence": f"s{n}", "label": n} for n in (10, 2, 1, 2)])
    dev = _write(tmp_path / "dev.jsonl", [{"sentence": "x", "label": 10}])
    task = read_task({"train": train, "validation": dev}, DataArguments(), "unused")
    assert task.label_names == ["1", "2", "10"]
    assert task.labels == {"train": [2, 1, 0, 1], "validation": [2]}


def test_shuffled_subset_of_a_file_sorted_by_label(tmp_path):
    records = [{"sentence": f"s{n}", "label": "pos" if n < 50 else "neg"} for n in range(100)]
    train = _write(tmp_path / "train.jsonl", records)
    with pytest.raises(DataError, match="only one label \\('pos'\\) \\(the first --max_train_samples"):
        read_task({"train": train}, DataArguments(max_train_samples=20), "unused")
    shuffled = read_task({"train": train}, DataArguments(max_train_samples=20, shuffle_train_dataset=True), "unused")
    again = read_task({"train": train}, DataArguments(max_train_samples=20, shuffle_train_dataset=True), "unused")
    assert shuffled.label_names == ["neg", "pos"] and shuffled.labels == again.labels  # the same seed, same subset
