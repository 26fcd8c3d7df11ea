"""CoNLL-2003-format NER data: read files (IOB1 or IOB2 tags, converted to IOB2) into a `datasets.DatasetDict`, and
encode it for [`ElmoForTokenClassification`] with one label per word."""

import logging
import os
import re
from collections.abc import Mapping

from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from ..foundation.errors import ToolInputError
from ..tokenization_elmo import ElmoTokenizer

logger = logging.getLogger(__name__)

_TAG = re.compile(r"^(O|[BI]-\S+)$")


class ConllFormatError(ToolInputError, ValueError):
    """A CoNLL file that cannot be read; the message names the file and line."""


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """IOB1 (`I-X` may start an entity; `B-X` only between two adjacent `X` entities) -> IOB2 (`B-X` starts every
    entity). Valid IOB2 input is returned unchanged, so this is safe on either scheme."""
    converted = []
    for index, tag in enumerate(tags):
        previous = converted[index - 1] if index else "O"
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        converted.append(tag)
    return converted


def read_conll(path: str | os.PathLike) -> list[dict[str, list[str]]]:
    """
    Read `word ... tag` lines (the NER tag is the last column; every line of a file has the same number of columns),
    sentences separated by blank lines, `-DOCSTART-` lines skipped. Returns `[{"tokens": [...], "ner_tags": [...]}]`
    with IOB2 tags. Raises `ConllFormatError` naming the file and line for malformed input, and for an empty file.
    """
    sentences, tokens, tags = [], [], []
    num_columns = None

    def close_sentence() -> None:
        if tokens:
            sentences.append({"tokens": list(tokens), "ner_tags": iob1_to_iob2(tags)})
            tokens.clear()
            tags.clear()

    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                close_sentence()
                continue
            if fields[0] == "-DOCSTART-":
                close_sentence()
                continue
            num_columns = num_columns or len(fields)
            if len(fields) < 2 or len(fields) != num_columns:
                raise ConllFormatError(
                    f"{path}, line {line_number}: expected {max(num_columns, 2)} whitespace-separated columns "
                    f"(word ... NER tag), got {len(fields)}: {line.rstrip()!r}"
                )
            if not _TAG.match(fields[-1]):
                raise ConllFormatError(
                    f"{path}, line {line_number}: {fields[-1]!r} is not an IOB tag (O, B-TYPE or I-TYPE)."
                )
            tokens.append(fields[0])
            tags.append(fields[-1])
    close_sentence()
    if not sentences:
        raise ConllFormatError(f"{path}: no sentences (empty file?).")
    return sentences


def sort_labels(labels: set[str]) -> list[str]:
    """`O` first, then `B-X`, `I-X` per entity type in alphabetical order."""
    types = sorted({label[2:] for label in labels if label != "O"})
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in ("B", "I")]


def load_conll(data_files: Mapping[str, str | os.PathLike], label_names: list[str] | None = None) -> DatasetDict:
    """
    Read CoNLL files into a `DatasetDict` (`tokens`: words, `ner_tags`: `ClassLabel` per word), e.g.
    `load_conll({"train": ..., "validation": ..., "test": ...})`. `label_names` defaults to the tags of the `train`
    split (or of all splits without one), completed so that every `B-X` has its `I-X`; a tag of another split that is
    not among them raises a `ConllFormatError` naming the file.
    """
    splits = {name: read_conll(path) for name, path in data_files.items()}
    if label_names is None:
        source = [splits["train"]] if "train" in splits else list(splits.values())
        label_names = sort_labels({tag for rows in source for row in rows for tag in row["ner_tags"]})
    features = Features({"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=label_names))})
    known = set(label_names)
    datasets = {}
    for name, rows in splits.items():
        unknown = sorted({tag for row in rows for tag in row["ner_tags"]} - known)
        if unknown:
            raise ConllFormatError(
                f"{data_files[name]}: tags {unknown} are not among the model's labels {label_names}."
            )
        encoded = [
            {"tokens": row["tokens"], "ner_tags": [label_names.index(t) for t in row["ner_tags"]]} for row in rows
        ]
        datasets[name] = Dataset.from_list(encoded, features=features)
    return DatasetDict(datasets)


def encode_for_elmo(
    dataset: Dataset, tokenizer: ElmoTokenizer, max_length: int | None = None, label_column: str = "ner_tags"
) -> Dataset:
    """
    Tokenize `tokens` (pre-split words) to character ids and attach `labels`, one per word, aligned with
    `word_ids()`. Sentences longer than `max_length` words are truncated (labels too) with a warning.
    Returns a dataset with `input_ids` (words, max_characters_per_token), `attention_mask` and `labels` (words).
    """

    def encode(batch: dict) -> dict:
        encoding = tokenizer(
            batch["tokens"], is_split_into_words=True, truncation=max_length is not None, max_length=max_length
        )
        labels = []
        for index, tags in enumerate(batch[label_column]):
            word_ids = encoding.word_ids(index)
            labels.append([tags[word] if word is not None else -100 for word in word_ids])
        return {"input_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"], "labels": labels}

    if max_length is not None:
        too_long = sum(len(tokens) > max_length for tokens in dataset["tokens"])
        if too_long:
            logger.warning(
                "%d sentence(s) longer than max_length=%d words were truncated (their labels too).",
                too_long,
                max_length,
            )
    # small map batches: `word_ids(i)` of a Python tokenizer's encoding costs time proportional to the batch
    return dataset.map(encode, batched=True, batch_size=64, remove_columns=dataset.column_names)


__all__ = ["ConllFormatError", "encode_for_elmo", "iob1_to_iob2", "load_conll", "read_conll", "sort_labels"]
