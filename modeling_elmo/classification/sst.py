"""The Stanford Sentiment Treebank (PTB-style labelled trees, one sentence a line) as `elmo-train-classifier` input.

    elmo-train-classifier prepare-sst --data_dir ../shared/data/sst --output_dir sst2 --binary [--phrases]
    python -m modeling_elmo.classification.sst ...   (the same)

writes `train.jsonl`, `validation.jsonl` and `test.jsonl` (from `train.txt`, `dev.txt`, `test.txt`): one record per
sentence, `{"sentence": [words], "label": L}`. SST-5: `L` is the root's label, 0 (very negative) to 4 (very
positive). `--binary` (SST-2): sentences labelled 2 are dropped, 0-1 become 0 (negative) and 3-4 become 1 (positive).
`--phrases`: the training file instead holds every distinct labelled phrase (subtree) of the training trees, whole
sentences included, each phrase once (its first label); validation and test stay sentence-level. Words are the
treebank's tokens with the PTB escapes undone (`-LRB-` -> `(`, `-RRB-` -> `)`, `\\/` -> `/`).
"""

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..foundation.errors import ToolError, ToolInputError
from ..foundation.output_folder import write_text_atomically

SPLITS = {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_BRACKETS = {"-LRB-": "(", "-RRB-": ")"}
_LABELS = frozenset("01234")


class TreebankError(ToolInputError, ValueError):
    """A line that is not a labelled tree; the message names the file and line."""


@dataclass(frozen=True)
class Phrase:
    """A labelled subtree: its words (leaves in order) and its sentiment label 0-4."""

    words: tuple[str, ...]
    label: int


def unescape(token: str) -> str:
    """A treebank token as plain text: `-LRB-` -> `(`, `-RRB-` -> `)`, a backslash escape -> the character."""
    if token in _BRACKETS:
        return _BRACKETS[token]
    return re.sub(r"\\(.)", r"\1", token) if "\\" in token else token


def parse_tree(line: str) -> list[Phrase]:
    """Every subtree of one bracketed tree, root first (pre-order). A node holds either words (a leaf; several
    tokens, as in `(2 8 1\\/2)`, are several words) or subtrees. Raises `TreebankError` (without location)."""
    tokens = _TOKEN.findall(line)
    words: list[str] = []
    spans: list[list[int]] = []  # [label, first word, end word] per node, pre-order
    open_nodes: list[int] = []  # indices into spans
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if token == "(":
            if spans and not open_nodes:
                raise TreebankError(f"text after the tree's closing bracket at token {position + 1}")
            label = tokens[position + 1] if position + 1 < len(tokens) else ""
            if label not in _LABELS:
                raise TreebankError(f"label {label!r} at token {position + 2} is not 0-4")
            open_nodes.append(len(spans))
            spans.append([int(label), len(words), -1])
            position += 2
            continue
        if not open_nodes:
            raise TreebankError(f"unexpected {token!r} outside the tree at token {position + 1}")
        if token == ")":
            node = spans[open_nodes.pop()]
            node[2] = len(words)
            if node[2] == node[1]:
                raise TreebankError(f"empty bracket closed at token {position + 1}")
        else:
            words.append(unescape(token))
        position += 1
    if open_nodes or not spans:
        raise TreebankError("unbalanced brackets: the tree is not closed")
    return [Phrase(tuple(words[first:end]), label) for label, first, end in spans]


def read_trees(path: str | os.PathLike) -> Iterator[list[Phrase]]:
    """The phrases of each tree (root first), one list per non-blank line of `path`."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield parse_tree(line)
            except TreebankError as error:
                raise TreebankError(f"{path}, line {number}: {error}.") from None


def to_binary(label: int) -> int | None:
    """SST-2 label: 0-1 -> 0 (negative), 3-4 -> 1 (positive), 2 (neutral) -> None (dropped)."""
    return None if label == 2 else int(label > 2)


def build_split(path: str | os.PathLike, binary: bool, phrases: bool) -> list[dict[str, object]]:
    """The records of one split: root sentences, or (`phrases`) every distinct labelled phrase."""
    records, seen = [], set()
    for tree in read_trees(path):
        for phrase in tree if phrases else tree[:1]:
            if phrases and phrase.words in seen:
                continue
            seen.add(phrase.words)
            label = to_binary(phrase.label) if binary else phrase.label
            if label is not None:
                records.append({"sentence": list(phrase.words), "label": label})
    return records


def prepare_sst(
    data_dir: str | os.PathLike, output_dir: str | os.PathLike, binary: bool = False, phrases: bool = False
) -> dict[str, int]:
    """Write `{train,validation,test}.jsonl` under `output_dir` (refusing to replace existing files); returns the
    number of records per split. Every file is built before any is written, each replaced atomically
    (`write_text_atomically`: complete or not at all)."""
    output_dir = Path(output_dir)
    targets = {split: output_dir / f"{split}.jsonl" for split in SPLITS}
    existing = [str(path) for path in targets.values() if path.exists()]
    if existing:
        raise FileExistsError(f"{existing[0]} exists; remove it or choose another --output_dir.")
    splits = {
        split: build_split(Path(data_dir) / name, binary, phrases and split == "train")
        for split, name in SPLITS.items()
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    for split, records in splits.items():
        write_text_atomically(targets[split], "".join(json.dumps(record) + "\n" for record in records), ToolError)
    return {split: len(records) for split, records in splits.items()}


def main(argv: list[str] | None = None) -> int:
    """`prepare-sst`: print the counts; one line and exit 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="elmo-train-classifier prepare-sst", description="SST trees -> JSON lines for elmo-train-classifier."
    )
    parser.add_argument("--data_dir", required=True, help="folder with train.txt, dev.txt, test.txt (PTB trees)")
    parser.add_argument("--output_dir", required=True, help="where train/validation/test.jsonl are written")
    parser.add_argument("--binary", action="store_true", help="SST-2: drop neutral sentences, 0-1 -> 0, 3-4 -> 1")
    parser.add_argument("--phrases", action="store_true", help="train on every distinct labelled training phrase")
    args = parser.parse_args(argv)
    try:
        counts = prepare_sst(args.data_dir, args.output_dir, binary=args.binary, phrases=args.phrases)
    except (OSError, TreebankError, ToolError) as error:
        message = (
            str(error)
            if isinstance(error, TreebankError | FileExistsError | ToolError)
            else f"{error.filename}: {error.strerror}"
        )
        parser.exit(2, f"{parser.prog}: error: {message}\n")
    print(json.dumps(counts))
    return 0


__all__ = [
    "Phrase",
    "TreebankError",
    "build_split",
    "parse_tree",
    "prepare_sst",
    "read_trees",
    "to_binary",
    "unescape",
]

if __name__ == "__main__":
    sys.exit(main())
