"""CoNLL reading, IOB1 -> IOB2, label alignment with `word_ids()`, truncation and collator padding."""

import logging

import pytest
import torch
from transformers import DataCollatorForTokenClassification

from modeling_elmo import ElmoTokenizer
from modeling_elmo.ner.conll import ConllFormatError, encode_for_elmo, iob1_to_iob2, load_conll, read_conll


@pytest.mark.parametrize(
    ("iob1", "iob2"),
    [
        (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),
        (["I-PER", "B-PER", "O", "I-LOC"], ["B-PER", "B-PER", "O", "B-LOC"]),
        (["I-ORG", "I-LOC", "I-LOC"], ["B-ORG", "B-LOC", "I-LOC"]),
        (["B-MISC", "I-MISC", "O", "B-PER"], ["B-MISC", "I-MISC", "O", "B-PER"]),  # already IOB2: unchanged
        ([], []),
    ],
)
def test_iob1_to_iob2(iob1, iob2):
    assert iob1_to_iob2(iob1) == iob2


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


IOB1_FILE = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
"""


def test_read_conll_docstart_and_iob1(tmp_path):
    sentences = read_conll(_write(tmp_path, "a.txt", IOB1_FILE))
    assert sentences == [
        {"tokens": ["EU", "rejects", "German", "call"], "ner_tags": ["B-ORG", "O", "B-MISC", "O"]},
        {"tokens": ["Peter", "Blackburn"], "ner_tags": ["B-PER", "I-PER"]},
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("EU NNP B-NP B-ORG\nrejects VBZ O\n", "line 2"),  # a column missing
        ("EU NNP B-NP B-ORG\n\ncall NN I-NP X-PER\n", "line 3"),  # not an IOB tag
        ("EU\n", "line 1"),  # no tag column
        ("", "no sentences"),
        ("\n\n-DOCSTART- -X- -X- O\n\n", "no sentences"),
    ],
)
def test_read_conll_errors_name_file_and_line(tmp_path, text, message):
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(ConllFormatError, match=message) as error:
        read_conll(path)
    assert "bad.txt" in str(error.value)


def test_load_conll_class_labels_and_unknown_tag(tmp_path):
    train = _write(tmp_path, "train.txt", "A x x B-PER\nb x x I-PER\n\nC x x O\n")
    dev = _write(tmp_path, "dev.txt", "D x x B-LOC\n")
    with pytest.raises(ConllFormatError, match=r"dev\.txt.*B-LOC"):
        load_conll({"train": train, "validation": dev})
    data = load_conll({"train": train})
    assert data["train"].features["ner_tags"].feature.names == ["O", "B-PER", "I-PER"]
    assert data["train"][0] == {"tokens": ["A", "b"], "ner_tags": [1, 2]}


def test_real_conll_slice(conll_dir, tmp_path):
    lines = (conll_dir / "dev.txt").read_text(encoding="utf-8").splitlines()[:400]
    data = load_conll({"validation": _write(tmp_path, "dev.txt", "\n".join(lines) + "\n")})["validation"]
    names = data.features["ner_tags"].feature.names
    assert names[0] == "O" and set(names[1:]) == {f"{p}-{t}" for p in "BI" for t in ("LOC", "MISC", "ORG", "PER")}
    assert sum(len(row) for row in data["tokens"]) == sum(1 for line in lines if line.strip())


def test_labels_align_one_to_one_with_word_ids():
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    features = Features({"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=["O", "B", "I"]))})
    rows = [{"tokens": ["New", "York", "is", "big"], "ner_tags": [1, 2, 0, 0]}, {"tokens": ["Hi"], "ner_tags": [1]}]
    tokenizer = ElmoTokenizer()
    encoded = encode_for_elmo(Dataset.from_list(rows, features=features), tokenizer)
    for row, example in zip(rows, encoded, strict=True):
        encoding = tokenizer(row["tokens"], is_split_into_words=True)
        assert encoding.word_ids() == list(range(len(row["tokens"])))
        assert example["labels"] == row["ner_tags"]
        assert [tokenizer.decode([ids]) for ids in example["input_ids"]] == row["tokens"]


def test_truncation_warns_and_keeps_labels_consistent(caplog):
    from datasets import Dataset

    dataset = Dataset.from_list([{"tokens": list("abcdefg"), "ner_tags": [0, 1, 2, 0, 1, 2, 0]}])
    with caplog.at_level(logging.WARNING, logger="modeling_elmo.ner.conll"):
        encoded = encode_for_elmo(dataset, ElmoTokenizer(), max_length=4)
    assert "truncated" in caplog.text
    assert len(encoded[0]["input_ids"]) == len(encoded[0]["labels"]) == 4
    assert encoded[0]["labels"] == [0, 1, 2, 0]


def test_stock_collator_pads_char_ids_and_labels():
    from datasets import Dataset

    tokenizer = ElmoTokenizer()
    rows = [{"tokens": ["a", "bb", "c"], "ner_tags": [1, 0, 2]}, {"tokens": ["dd"], "ner_tags": [0]}]
    encoded = encode_for_elmo(Dataset.from_list(rows), tokenizer)
    batch = DataCollatorForTokenClassification(tokenizer)([encoded[0], encoded[1]])
    assert batch["input_ids"].shape == (2, 3, tokenizer.max_characters_per_token)
    assert torch.equal(batch["attention_mask"], torch.tensor([[1, 1, 1], [1, 0, 0]]))
    assert torch.equal(batch["labels"], torch.tensor([[1, 0, 2], [0, -100, -100]]))
    assert batch["input_ids"][1, 1:].eq(0).all() and batch["input_ids"][1, 0].ne(0).any()
    assert torch.equal(batch["input_ids"][0], torch.tensor(encoded[0]["input_ids"]))
