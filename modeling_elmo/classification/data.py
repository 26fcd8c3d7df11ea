"""Reading and checking the data files of `elmo-train-classifier`: CSV, JSON or JSON lines, one or two text columns
and a label column.

A text column holds raw strings (split into words by the tokenizer) or lists of words (passed with
`is_split_into_words=True`). Every problem is a `DataError` whose message is one line naming the file, the record
(1-based, in file order) and the column.
"""

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets
from datasets import Dataset

from ..foundation.errors import ToolInputError, one_line

FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json"}
REGRESSION = "regression"
SINGLE_LABEL = "single_label_classification"
# a column of lists: `List` since datasets 4, `Sequence` before
_LIST_FEATURES = tuple(getattr(datasets, name) for name in ("List", "Sequence") if hasattr(datasets, name))


class DataError(ToolInputError, ValueError):
    """A data file, column or value that the command cannot use; the message is one line."""


@dataclass(frozen=True)
class Columns:
    """The columns of a task: one text column, or two for sentence pairs, and the label column."""

    texts: tuple[str, ...]
    label: str

    @classmethod
    def parse(cls, text_column_names: str, label_column_name: str) -> "Columns":
        """`"a"` or `"a,b"` (a sentence pair) and the label column name."""
        texts = tuple(name.strip() for name in text_column_names.split(","))
        if not 1 <= len(texts) <= 2 or not all(texts):
            raise DataError(
                f"--text_column_names takes one column or two (a pair), comma-separated, not {text_column_names!r}."
            )
        if label_column_name in texts:
            raise DataError(f"--label_column_name {label_column_name!r} is also a text column.")
        return cls(texts, label_column_name)


def read_table(path: str | os.PathLike) -> Dataset:
    """The records of a `.csv`, `.json` or `.jsonl` file, read with `datasets` after checking that the content
    matches the extension (a JSON file named `.csv` would otherwise read as one odd column)."""
    path = Path(path)
    builder = FORMATS.get(path.suffix.lower())
    if builder is None:
        raise DataError(f"{path}: unknown extension {path.suffix!r}; use .csv, .json or .jsonl.")
    if not path.is_file():
        raise DataError(f"{path}: no such file.")
    with path.open("rb") as handle:
        start = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start:
        raise DataError(f"{path}: the file is empty.")
    looks_like_json = start[:1] in (b"{", b"[")
    if builder == "json" and not looks_like_json:
        raise DataError(
            f"{path}: not JSON or JSON lines (it does not start with '{{' or '['), yet named {path.suffix}."
        )
    if builder == "csv" and looks_like_json:
        raise DataError(f"{path}: looks like JSON (it starts with {start[:1].decode()!r}), yet named .csv.")
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # a bad file must give one line, not progress bars first
    try:
        table = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as error:  # datasets wraps pyarrow / pandas parse errors in several types
        cause = error.__cause__ or error
        detail = one_line(cause, first=True)
        raise DataError(f"{path}: not a valid {path.suffix} file: {detail}") from None
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
    if len(table) == 0:
        raise DataError(f"{path}: no records.")
    return table


def check_columns(table: Dataset, path: str | os.PathLike, names: Sequence[str]) -> None:
    """Every column of `names` exists in `table`; else name the columns that do."""
    for name in names:
        if name not in table.column_names:
            raise DataError(f"{path}: no column {name!r}; its columns are: {', '.join(table.column_names)}.")


def text_input_kind(table: Dataset, path: str | os.PathLike, columns: Sequence[str]) -> bool:
    """Whether the text columns hold lists of words (True) or raw strings (False); all must be alike."""
    kinds = set()
    for name in columns:
        feature = table.features[name]
        if isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string"):
            kinds.add(False)
        elif isinstance(feature, _LIST_FEATURES) and getattr(feature.feature, "dtype", None) in (
            "string",
            "large_string",
        ):
            kinds.add(True)
        elif isinstance(feature, datasets.Value) and feature.dtype == "null":
            raise DataError(f"{path}: column {name!r} is empty in every record.")
        else:
            raise DataError(f"{path}: column {name!r} holds {feature}, not text (strings or lists of words).")
    if len(kinds) > 1:
        raise DataError(f"{path}: the columns {', '.join(map(repr, columns))} mix raw strings and lists of words.")
    return kinds.pop()


def check_texts(table: Dataset, path: str | os.PathLike, columns: Sequence[str]) -> None:
    """No record has a missing or empty text (or, for a pair, a missing second text)."""
    for position, name in enumerate(columns):
        for record, text in enumerate(table[name], start=1):
            if isinstance(text, str):
                empty = not text.strip()
            else:
                empty = text is None or not text or any(word is None or not word.strip() for word in text)
            if not empty:
                continue
            what = "missing" if text is None else "empty"
            if position == 1:
                raise DataError(f"{path}, record {record}: the pair's second text (column {name!r}) is {what}.")
            raise DataError(f"{path}, record {record}: the text in column {name!r} is {what}.")


def problem_type(table: Dataset, path: str | os.PathLike, label: str, regression: bool | None) -> str:
    """`regression` when asked (`regression=True`) or, when not said, when the label column holds floats; else
    single-label classification. Lists of labels (multi-label) are refused."""
    feature = table.features[label]
    if not isinstance(feature, (datasets.Value, datasets.ClassLabel)):
        raise DataError(f"{path}: column {label!r} holds {feature}; one label per record is supported.")
    if regression is None:
        regression = isinstance(feature, datasets.Value) and feature.dtype.startswith("float")
    return REGRESSION if regression else SINGLE_LABEL


def _label_values(table: Dataset, path: str | os.PathLike, label: str) -> list:
    values = table[label]
    for record, value in enumerate(values, start=1):
        if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
            raise DataError(f"{path}, record {record}: the label (column {label!r}) is missing.")
    return values


def class_names(table: Dataset, path: str | os.PathLike, label: str) -> list[str]:
    """The distinct labels as strings, numbers in numeric order, else in string order (deterministic)."""
    distinct = set(_label_values(table, path, label))
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in distinct):
        return [str(value) for value in sorted(distinct)]
    return sorted(str(value) for value in distinct)


def label_ids(table: Dataset, path: str | os.PathLike, label: str, label2id: Mapping[str, int]) -> list[int]:
    """The class id of every record; a label that `label2id` lacks (unseen in training) is an error."""
    values = [str(value) for value in _label_values(table, path, label)]
    unseen = sorted(set(values) - set(label2id))
    if unseen:
        record = values.index(unseen[0]) + 1
        shown = ", ".join(map(repr, unseen[:5])) + (f" and {len(unseen) - 5} more" if len(unseen) > 5 else "")
        raise DataError(
            f"{path}, record {record}: label {shown} never seen in training (known: {', '.join(label2id)})."
        )
    return [label2id[value] for value in values]


def regression_targets(table: Dataset, path: str | os.PathLike, label: str) -> list[float]:
    """Every label as a finite float; a value that is not a number (or is NaN / infinite) is an error."""
    targets = []
    for record, value in enumerate(_label_values(table, path, label), start=1):
        try:
            if isinstance(value, bool):
                raise ValueError
            target = float(value)
        except (TypeError, ValueError):
            raise DataError(
                f"{path}, record {record}: the regression target {value!r} (column {label!r}) is not a number."
            ) from None
        if not math.isfinite(target):
            raise DataError(
                f"{path}, record {record}: the regression target {value!r} (column {label!r}) is not finite."
            )
        targets.append(target)
    return targets


__all__ = [
    "REGRESSION",
    "SINGLE_LABEL",
    "Columns",
    "DataError",
    "check_columns",
    "check_texts",
    "class_names",
    "label_ids",
    "problem_type",
    "read_table",
    "regression_targets",
    "text_input_kind",
]
