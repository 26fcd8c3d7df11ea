"""The LM vocabulary: bilm-tf's file format, its checks, encoding, atomic saving, and building one from a corpus."""

import logging
import os
from collections import Counter
from pathlib import Path

import pytest

from modeling_elmo.formats import vocab as vocab_module
from modeling_elmo.formats.corpus import CorpusError
from modeling_elmo.formats.vocab import (
    LmVocabulary,
    VocabularyError,
    build_vocabulary,
    count_words,
    vocabulary_from_counts,
)


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_load_ids_and_encode(tmp_path):
    vocab = LmVocabulary.from_file(write(tmp_path / "vocab.txt", "<S>\n</S>\n<UNK>\nthe\n,\nZürich\n"))
    assert len(vocab) == 6
    assert vocab.tokens == ("<S>", "</S>", "<UNK>", "the", ",", "Zürich")
    assert (vocab.bos, vocab.eos, vocab.unk) == (0, 1, 2)
    assert vocab.encode(["the", "Zürich", "unseen", ",", "The"]) == [3, 5, 2, 4, 2]
    assert vocab.encode([]) == []
    assert "the" in vocab and "The" not in vocab
    assert vocab.source == str(tmp_path / "vocab.txt")


def test_special_tokens_may_stand_anywhere_as_in_bilm_tf(tmp_path, caplog):
    # the 1B Word Benchmark vocabulary starts </S>, <S>, <UNK> and ends with !!!MAXTERMID
    with caplog.at_level(logging.WARNING, logger="modeling_elmo.formats.vocab"):
        vocab = LmVocabulary.from_file(write(tmp_path / "v.txt", "</S>\n<S>\n<UNK>\nthe\n!!!MAXTERMID\n"))
    assert (vocab.bos, vocab.eos, vocab.unk, len(vocab)) == (1, 0, 2, 4)
    assert caplog.text == ""
    with caplog.at_level(logging.WARNING, logger="modeling_elmo.formats.vocab"):
        vocab = LmVocabulary.from_file(write(tmp_path / "w.txt", "the\n<S>\n</S>\nof\n<UNK>\n"))
    assert (vocab.bos, vocab.eos, vocab.unk) == (1, 2, 4)
    assert "are not the first three tokens" in caplog.text


def test_maxtermid_line_takes_no_id_but_counts_as_a_line(tmp_path):
    vocab_file = write(tmp_path / "v.txt", "<S>\n!!!MAXTERMID\n</S>\n<UNK>\nthe\nthe\n")
    with pytest.raises(VocabularyError, match=r"'the' is on line 5 and again on line 6"):
        LmVocabulary.from_file(vocab_file)
    vocab = LmVocabulary.from_file(write(tmp_path / "w.txt", "<S>\n!!!MAXTERMID\n</S>\n<UNK>\nthe\n"))
    assert vocab.tokens == ("<S>", "</S>", "<UNK>", "the")


@pytest.mark.parametrize(
    "content, message",
    [
        ("<S>\n</S>\nthe\n", r"has no <UNK>: a biLM vocabulary must hold the tokens <S>, </S>, <UNK>"),
        ("the\nof\n", r"has no <S>, </S>, <UNK>"),
        ("", r"is empty: a biLM vocabulary must hold"),
        ("<S>\n</S>\n<UNK>\nthe\n<S>\n", r"'<S>' is on line 1 and again on line 5"),
        ("<S>\n</S>\n<UNK>\nthe\n\nof\n", r"line 5 is empty"),
        ("<S>\n</S>\n<UNK>\n  \t \nof\n", r"line 4 is empty"),
        ("<S>\n</S>\n<UNK>\nnew york\n", r"line 4 \('new york'\) has whitespace inside"),
        (b"<S>\n</S>\n<UNK>\nca\xffe\n", r"line 4 is not valid UTF-8"),
    ],
)
def test_bad_vocabulary_files_are_refused_naming_the_line(tmp_path, content, message):
    path = write(tmp_path / "vocab.txt", content)
    with pytest.raises(VocabularyError, match=message) as error:
        LmVocabulary.from_file(path)
    assert str(error.value).startswith(str(path))


def test_windows_line_ends_byte_order_mark_and_surrounding_spaces_are_ignored(tmp_path):
    vocab = LmVocabulary.from_file(write(tmp_path / "v.txt", "\ufeff<S>\r\n</S>\r\n <UNK> \r\nthe"))
    assert vocab.tokens == ("<S>", "</S>", "<UNK>", "the")


def test_cr_only_line_ends_separate_tokens_as_in_bilm_tf(tmp_path):
    vocab = LmVocabulary.from_file(write(tmp_path / "v.txt", "<S>\r</S>\r<UNK>\rthe\r"))
    assert vocab.tokens == ("<S>", "</S>", "<UNK>", "the")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(VocabularyError, match="vocabulary file not found"):
        LmVocabulary.from_file(tmp_path / "nope.txt")
    with pytest.raises(VocabularyError, match="is a directory"):
        LmVocabulary.from_file(tmp_path)


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["<S>", "</S>", "<UNK>", "a", "a"], r"'a' is on entry 4 and again on entry 5"),
        (["<S>", "</S>", "<UNK>", ""], r"entry 4 is empty"),
        (["<S>", "</S>", "<UNK>", " a"], r"entry 4 \(' a'\) has whitespace inside"),
        (["<S>", "</S>", "<UNK>", "!!!MAXTERMID"], r"entry 4 is !!!MAXTERMID"),
        (["<S>", "</S>", "<UNK>", 3], r"entry 4 is not a string"),
        (["<S>", "</S>"], r"has no <UNK>"),
    ],
)
def test_token_lists_are_checked_too(tokens, message):
    with pytest.raises(VocabularyError, match=message):
        LmVocabulary(tokens, source="mine")


def test_check_size(tmp_path):
    vocab = LmVocabulary(["<S>", "</S>", "<UNK>", "the"], source="vocab.txt")
    vocab.check_size(4, "options.json")
    with pytest.raises(
        VocabularyError, match=r"options\.json: n_tokens_vocab is 5, but the vocabulary vocab\.txt has 4"
    ):
        vocab.check_size(5, "options.json")


def test_save_round_trip_and_replace(tmp_path):
    tokens = ["</S>", "<S>", "<UNK>", "the", "Zürich", "日本語", "a\u00ad"]
    path = tmp_path / "vocab.txt"
    write(path, "old\n")
    assert LmVocabulary(tokens).save(path) == path
    assert path.read_bytes() == "".join(f"{token}\n" for token in tokens).encode("utf-8")
    assert LmVocabulary.from_file(path) == LmVocabulary(tokens)
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_save_is_atomic(tmp_path, monkeypatch):
    path = write(tmp_path / "vocab.txt", "old\n")

    def fail(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vocab_module.os, "fsync", fail)
    with pytest.raises(OSError, match="No space left"):
        LmVocabulary(["<S>", "</S>", "<UNK>"]).save(path)
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["vocab.txt"]  # no temporary file left behind


CORPUS = [
    "the cat sat on the mat .",
    "",
    "the dog sat .",
    "<S> a <UNK> b </S>",  # the special strings are never counted as words
    "b a  a",
]


def test_build_orders_by_count_then_by_word(tmp_path):
    files = [write(tmp_path / "a.txt", "\n".join(CORPUS[:3])), write(tmp_path / "b.txt", "\n".join(CORPUS[3:]))]
    counts = Counter(word for line in CORPUS for word in line.split() if word not in ("<S>", "</S>", "<UNK>"))
    expected = sorted(counts, key=lambda word: (-counts[word], word))
    assert expected == ["a", "the", ".", "b", "sat", "cat", "dog", "mat", "on"]  # by hand: counts 3, 3, 2, 2, 2, 1...
    assert count_words(files, progress=False) == counts
    assert build_vocabulary(files, progress=False) == ["<S>", "</S>", "<UNK>", *expected]
    assert build_vocabulary(files, min_count=2, progress=False) == [
        "<S>",
        "</S>",
        "<UNK>",
        *[word for word in expected if counts[word] >= 2],
    ]
    assert build_vocabulary(files, max_size=5, progress=False) == ["<S>", "</S>", "<UNK>", *expected[:2]]
    assert build_vocabulary(files, max_size=3, progress=False) == ["<S>", "</S>", "<UNK>"]
    assert build_vocabulary(files, max_size=1000, progress=False) == ["<S>", "</S>", "<UNK>", *expected]
    LmVocabulary(build_vocabulary(files, progress=False))  # a valid vocabulary


def test_build_ties_are_deterministic():
    counts = Counter({"b": 2, "a": 2, "B": 2, "é": 2, "z": 5, "<S>": 100})
    assert vocabulary_from_counts(counts) == ["<S>", "</S>", "<UNK>", "z", "B", "a", "b", "é"]
    assert vocabulary_from_counts(Counter(dict(reversed(list(counts.items()))))) == vocabulary_from_counts(counts)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"min_count": 0}, "min_count must be a positive integer"),
        ({"min_count": 1.5}, "min_count must be a positive integer"),
        ({"max_size": 2}, "max_size must be an integer >= 3"),
    ],
)
def test_build_limits_are_checked_before_counting(tmp_path, kwargs, message):
    with pytest.raises(VocabularyError, match=message):
        build_vocabulary([tmp_path / "does-not-exist.txt"], **kwargs)


def test_build_from_an_empty_corpus_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="corpus is empty"):
        build_vocabulary([write(tmp_path / "a.txt", "\n\n")], progress=False)
