"""`elmo-pretrain build-vocab`: output, limits, refusals and atomic writing."""

import os
from collections import Counter

import pytest

from modeling_elmo.formats.vocab import LmVocabulary
from modeling_elmo.pretraining.build_vocab import main

LINES = ["the bank closed .", "the river bank", "", "a bank , a river .", "Zürich"]


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus" / "part"
    folder.mkdir(parents=True)
    (folder / "1.txt").write_text("\n".join(LINES[:2]) + "\n", encoding="utf-8")
    (folder / "2.txt").write_text("\n".join(LINES[2:]) + "\n", encoding="utf-8")
    return tmp_path / "corpus"


def expected_tokens(min_count: int = 1, max_size: int | None = None) -> list[str]:
    counts = Counter(word for line in LINES for word in line.split())
    words = sorted((word for word in counts if counts[word] >= min_count), key=lambda word: (-counts[word], word))
    return ["<S>", "</S>", "<UNK>", *words][:max_size]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--no_progress"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_writes_a_vocabulary(tmp_path, corpus, capsys):
    output = tmp_path / "vocab.txt"
    code, out, err = run(capsys, "--train_files", f"{corpus}/**/*.txt", "--output", str(output))
    assert (code, err) == (0, "")
    assert LmVocabulary.from_file(output).tokens == tuple(expected_tokens())
    assert output.read_text(encoding="utf-8") == "".join(f"{token}\n" for token in expected_tokens())
    n_words = sum(len(line.split()) for line in LINES)
    assert f"Counted {n_words} words ({len(expected_tokens()) - 3} distinct) in 2 file(s)" in out
    assert f"Set n_tokens_vocab to {len(expected_tokens())}" in out
    assert "covering 100.00% of the words" in out


def test_min_count_and_max_size(tmp_path, corpus, capsys):
    output = tmp_path / "vocab.txt"
    pattern = f"{corpus}/part/*.txt"
    assert run(capsys, "--train_files", pattern, "--output", str(output), "--min_count", "2")[0] == 0
    assert LmVocabulary.from_file(output).tokens == tuple(expected_tokens(min_count=2))
    assert len(expected_tokens(min_count=2)) < len(expected_tokens())
    code, out, _ = run(capsys, "--train_files", pattern, "--output", str(output), "--max_size", "5", "--overwrite")
    assert code == 0
    assert LmVocabulary.from_file(output).tokens == tuple(expected_tokens(max_size=5))
    assert "wrote 5 tokens (2 words + <S>, </S>, <UNK>)" in out


def test_refuses_an_existing_output_unless_overwrite(tmp_path, corpus, capsys):
    output = tmp_path / "vocab.txt"
    output.write_text("mine\n")
    code, out, err = run(capsys, "--train_files", f"{corpus}/**/*.txt", "--output", str(output))
    assert code == 2
    assert err == f"elmo-pretrain build-vocab: error: --output {output} exists; pass --overwrite to replace it.\n"
    assert output.read_text() == "mine\n"
    code, _, _ = run(capsys, "--train_files", f"{corpus}/**/*.txt", "--output", str(output), "--overwrite")
    assert code == 0
    assert LmVocabulary.from_file(output).tokens == tuple(expected_tokens())


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--train_files", "nothing/*.txt"], "--train_files: no file matches 'nothing/*.txt'."),
        (["--train_files", "{corpus}/part"], "--train_files: '{corpus}/part' is a directory"),
        (["--train_files", "{corpus}/**/*.txt", "--output", "{tmp}/missing/vocab.txt"], "does not exist"),
        (["--train_files", "{corpus}/**/*.txt", "--output", "{tmp}"], "is a directory; give a file name"),
    ],
)
def test_errors_are_one_line_with_status_2(tmp_path, corpus, capsys, arguments, message):
    arguments = [argument.format(corpus=corpus, tmp=tmp_path) for argument in arguments]
    if "--output" not in arguments:
        arguments += ["--output", str(tmp_path / "vocab.txt")]
    code, out, err = run(capsys, *arguments)
    assert code == 2
    assert err.startswith("elmo-pretrain build-vocab: error: ") and err.count("\n") == 1
    assert message.format(corpus=corpus, tmp=tmp_path) in err
    assert not (tmp_path / "vocab.txt").exists()


def test_a_failure_while_counting_leaves_nothing_behind(tmp_path, capsys):
    (tmp_path / "bad.txt").write_bytes(b"fine line\nbad \xff line\n")
    output = tmp_path / "out" / "vocab.txt"
    output.parent.mkdir()
    code, _, err = run(capsys, "--train_files", str(tmp_path / "bad.txt"), "--output", str(output))
    assert code == 2
    assert "bad.txt: line 2 is not valid UTF-8" in err
    assert os.listdir(output.parent) == []


def test_empty_corpus(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n \n")
    code, _, err = run(capsys, "--train_files", str(tmp_path / "empty.txt"), "--output", str(tmp_path / "v.txt"))
    assert code == 2 and "the corpus is empty" in err
    assert not (tmp_path / "v.txt").exists()


@pytest.mark.parametrize(
    "arguments",
    [
        ["--min_count", "2", "--max_size", "10"],  # one or the other
        ["--min_count", "0"],
        ["--max_size", "2"],
        ["--max_size", "ten"],
    ],
)
def test_usage_errors_exit_with_status_2(tmp_path, corpus, capsys, arguments):
    with pytest.raises(SystemExit) as exit_info:
        main(["--train_files", f"{corpus}/**/*.txt", "--output", str(tmp_path / "v.txt"), *arguments])
    assert exit_info.value.code == 2
    assert "elmo-pretrain build-vocab: error:" in capsys.readouterr().err


def test_refuses_to_overwrite_one_of_its_own_corpus_files(tmp_path, corpus, capsys):
    shard = corpus / "part" / "1.txt"
    before = shard.read_bytes()
    code, _, err = run(capsys, "--train_files", f"{corpus}/**/*.txt", "--output", str(shard), "--overwrite")
    assert code == 2
    assert (
        err == f"elmo-pretrain build-vocab: error: --output {shard} is one of the --train_files; write the "
        "vocabulary elsewhere.\n"
    )
    assert shard.read_bytes() == before


def test_a_corpus_word_that_is_bilm_tf_end_marker_is_not_counted(tmp_path, capsys):
    """bilm-tf skips a `!!!MAXTERMID` vocabulary line, so the word cannot be in a vocabulary: it is not counted."""
    (tmp_path / "c.txt").write_text("the !!!MAXTERMID end\nthe end\n")
    output = tmp_path / "vocab.txt"
    code, _, err = run(capsys, "--train_files", str(tmp_path / "c.txt"), "--output", str(output))
    assert (code, err) == (0, "")
    assert LmVocabulary.from_file(output).tokens == ("<S>", "</S>", "<UNK>", "end", "the")
