"""Corpus shards: globbing, streaming sentence reading, the rank split, position counts."""

import logging
import random
from pathlib import Path

import pytest

from modeling_elmo.formats.corpus import (
    CorpusError,
    count_positions,
    iter_sentences,
    rank_files,
    resolve_corpus_files,
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


def test_resolve_globs_sorted_without_duplicates(tmp_path, monkeypatch):
    b = write(tmp_path / "corpus" / "b.txt", "x\n")
    a = write(tmp_path / "corpus" / "a.txt", "x\n")
    deep = write(tmp_path / "corpus" / "sub" / "deeper" / "c.txt", "x\n")
    write(tmp_path / "corpus" / "notes.md", "x\n")
    (tmp_path / "corpus" / "dir.txt").mkdir()  # a directory matched by a wildcard is skipped
    monkeypatch.chdir(tmp_path)
    files = resolve_corpus_files(["corpus/*.txt", "corpus/**/*.txt", str(a), "./corpus/b.txt"])
    assert files == sorted([a.resolve(), b.resolve(), deep.resolve()], key=str)
    assert all(path.is_absolute() for path in files)
    assert resolve_corpus_files("corpus/a.txt") == [a.resolve()]


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("missing/*.txt", r"--eval_files: no file matches 'missing/\*\.txt'"),
        ("corpus", r"--eval_files: 'corpus' is a directory; give the files, e.g. 'corpus/\*\.txt'"),
        ("corpus/*", r"'corpus/\*' matches no regular file \(only folders or special files\)"),
        ("/dev/null", r"'/dev/null' matches no regular file"),
    ],
)
def test_resolve_refuses_bad_patterns(tmp_path, monkeypatch, pattern, message):
    (tmp_path / "corpus" / "sub").mkdir(parents=True)
    write(tmp_path / "good.txt", "x\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError, match=message):
        resolve_corpus_files(["good.txt", pattern], what="--eval_files")


def test_resolve_refuses_no_patterns():
    with pytest.raises(CorpusError, match="no file pattern"):
        resolve_corpus_files([])


def test_sentences_skip_blank_lines_and_split_on_whitespace(tmp_path):
    path = write(tmp_path / "a.txt", "\ufeffThe  bank\tclosed .\r\n\n   \r\nZürich  naïve\u00a0café\nlast line")
    assert list(iter_sentences([path])) == [
        ["The", "bank", "closed", "."],
        ["Zürich", "naïve", "café"],
        ["last", "line"],
    ]


@pytest.mark.parametrize("line_end", ["\r", "\r\n", "\n"], ids=["CR", "CRLF", "LF"])
def test_line_ends_are_python_universal_newlines_as_bilm_tf_reads_them(tmp_path, line_end):
    """bilm-tf reads a shard with `open(shard).readlines()`: a lone `\\r` ends a line too (a CR-only file from an
    old Mac holds three sentences here, not one)."""
    text = line_end.join(["the cat sat", "a dog ran", "birds sing"]) + line_end
    path = write(tmp_path / "a.txt", text)
    with open(path, encoding="utf-8") as handle:  # what bilm-tf's reader gets
        expected = [line.split() for line in handle.readlines()]
    assert list(iter_sentences([path])) == expected == [["the", "cat", "sat"], ["a", "dog", "ran"], ["birds", "sing"]]
    assert count_positions([path], progress=False) == 3 + 3 + 2 + 3


def test_a_bad_line_after_cr_line_ends_is_named_by_its_universal_line_number(tmp_path):
    bad = write(tmp_path / "b.txt", b"one\rtwo\rthree \xc3\x28 bad\rfour")
    with pytest.raises(CorpusError, match="line 3 is not valid UTF-8"):
        list(iter_sentences([bad]))


def test_invalid_utf8_names_file_and_line_after_streaming_the_lines_before(tmp_path):
    good = write(tmp_path / "a.txt", "one\n")
    bad = write(tmp_path / "b.txt", b"two words\n\nthree \xc3\x28 bad\nfour\n")
    sentences = iter_sentences([good, bad])
    assert next(sentences) == ["one"]
    assert next(sentences) == ["two", "words"]  # read before the bad line: streaming, not whole files
    with pytest.raises(CorpusError, match=rf"{bad}: line 3 is not valid UTF-8"):
        next(sentences)


def test_missing_file_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="cannot read the file"):
        list(iter_sentences([tmp_path / "gone.txt"]))


def test_empty_corpus_names_the_files(tmp_path):
    files = [write(tmp_path / "a.txt", "\n  \n"), write(tmp_path / "b.txt", "")]
    with pytest.raises(CorpusError, match=r"No sentences in .*a\.txt, .*b\.txt: the corpus is empty"):
        list(iter_sentences(files))
    with pytest.raises(CorpusError, match="corpus is empty"):
        count_positions(files, progress=False)


def test_a_rank_without_sentences_is_an_error(tmp_path):
    files = [write(tmp_path / "a.txt", "only one\n")]
    assert list(iter_sentences(files, rank=0, world_size=2)) == [["only", "one"]]
    with pytest.raises(CorpusError, match=r"No sentences for rank 1 of 2 .*1 in all: fewer than the 2 processes"):
        list(iter_sentences(files, rank=1, world_size=2))


@pytest.mark.parametrize("n_files, world_size", [(6, 3), (7, 3), (3, 3), (2, 3), (1, 4), (5, 1)])
def test_rank_shares_are_disjoint_and_cover_the_corpus(tmp_path, caplog, n_files, world_size):
    rng = random.Random(n_files * 10 + world_size)
    files, all_sentences = [], []
    for index in range(n_files):
        sentences = [[f"f{index}", f"s{line}"] * rng.randint(1, 3) for line in range(rng.randint(4, 9))]
        files.append(write(tmp_path / f"{index}.txt", "".join(" ".join(s) + "\n\n" for s in sentences)))
        all_sentences.extend(sentences)
    with caplog.at_level(logging.WARNING, logger="modeling_elmo.formats.corpus"):
        shares = [list(iter_sentences(files, rank, world_size)) for rank in range(world_size)]
    keys = [tuple(sentence) for share in shares for sentence in share]
    assert sorted(keys) == sorted(tuple(sentence) for sentence in all_sentences)  # disjoint and covering
    for rank, share in enumerate(shares):
        if n_files >= world_size:  # own shards: whole files
            assert {sentence[0] for sentence in share} == {f"f{index}" for index in range(rank, n_files, world_size)}
        else:  # every world_size-th sentence of the whole corpus
            assert share == all_sentences[rank::world_size]
    assert ("every process reads every file" in caplog.text) == (n_files < world_size)


def test_rank_files_checks_its_arguments(tmp_path):
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        rank_files([tmp_path], rank=1, world_size=1)
    with pytest.raises(ValueError, match="world_size >= 1"):
        rank_files([tmp_path], rank=0, world_size=0)
    with pytest.raises(CorpusError, match="no files"):
        rank_files([])


def test_shuffle_seed_permutes_the_files_reproducibly(tmp_path):
    files = [write(tmp_path / f"{index}.txt", f"file{index}\n") for index in range(8)]
    orders = {seed: [s[0] for s in iter_sentences(files, shuffle_seed=seed)] for seed in range(4)}
    for seed, order in orders.items():
        expected = list(files)
        random.Random(seed).shuffle(expected)
        assert order == [path.read_text().strip() for path in expected]
    assert len({tuple(order) for order in orders.values()}) > 1
    assert [s[0] for s in iter_sentences(files)] == [f"file{index}" for index in range(8)]


def test_count_positions_is_words_plus_one_per_sentence(tmp_path):
    texts = ["a b c\n\nd\n", "  e f  \r\n", "\n"]
    files = [write(tmp_path / f"{index}.txt", text) for index, text in enumerate(texts)]
    expected = sum(len(line.split()) + 1 for text in texts for line in text.split("\n") if line.strip())
    assert count_positions(files, progress=False) == expected
    shares = [count_positions(files, rank, 2, progress=False) for rank in range(2)]
    assert sum(shares) == expected
    assert shares[0] == sum(len(line.split()) + 1 for text in texts[0::2] for line in text.split("\n") if line.strip())
