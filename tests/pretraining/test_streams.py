"""The TBPTT stream batches against a brute-force transcription of bilm-tf's `_get_batch` semantics."""

import itertools
import random
from pathlib import Path

import pytest
import torch

from modeling_elmo.character_ids import (
    BEGIN_OF_SENTENCE_CHAR,
    BEGIN_OF_WORD_CHAR,
    END_OF_SENTENCE_CHAR,
    END_OF_WORD_CHAR,
    PADDING_CHAR,
    word_to_char_ids,
)
from modeling_elmo.formats.corpus import CorpusError
from modeling_elmo.formats.vocab import LmVocabulary
from modeling_elmo.pretraining.streams import LmStreamDataset

KEYS = ("input_ids", "labels", "backward_input_ids", "backward_labels")


def write_corpus(directory: Path, shards: list[list[str]]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, lines in enumerate(shards):
        path = directory / f"shard{index}.txt"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        paths.append(path)
    return paths


def reference_sentences(files, rank=0, world_size=1, seed=0, num_passes=1) -> list[list[str]]:
    """The sentence stream, read independently: whole files, shuffled per pass, split by rank."""
    shared = len(files) < world_size
    own = list(files) if shared else list(files)[rank::world_size]
    sentences = []
    for current_pass in range(num_passes):
        order = list(own)
        random.Random(seed + current_pass).shuffle(order)
        pass_sentences = [line.split() for path in order for line in Path(path).read_text("utf-8").split("\n")]
        pass_sentences = [words for words in pass_sentences if words]
        if shared:
            pass_sentences = pass_sentences[rank::world_size]
        sentences.extend(pass_sentences)
    return sentences


def reference_batches(sentences, tokens, batch_size, unroll_steps, chars):
    """bilm-tf's `_get_batch`, brute force: each row holds a queue of (input word, target word) pairs for both
    directions; a row appends whole sentences from the shared stream until it has a window's worth."""
    ids = {token: index for index, token in enumerate(tokens)}
    unk = ids["<UNK>"]
    stream = iter(sentences)
    forward = [[] for _ in range(batch_size)]
    backward = [[] for _ in range(batch_size)]
    batches = []
    while True:
        for row in range(batch_size):
            while len(forward[row]) < unroll_steps:
                words = next(stream, None)
                if words is None:
                    return batches
                forward[row].extend(zip(["<S>", *words], [*words, "</S>"], strict=True))
                reverse = words[::-1]
                backward[row].extend(zip(["</S>", *reverse], [*reverse, "<S>"], strict=True))
        batch = {}
        for name, queues in (("", forward), ("backward_", backward)):
            windows = [queue[:unroll_steps] for queue in queues]
            for queue in queues:
                del queue[:unroll_steps]
            batch[f"{name}input_ids"] = torch.tensor(
                [[word_to_char_ids(word, chars) for word, _ in window] for window in windows]
            )
            batch[f"{name}labels"] = torch.tensor(
                [[ids.get(target, unk) for _, target in window] for window in windows]
            )
        batches.append(batch)


def decode_word(char_ids) -> str:
    """The word of one row of character ids (inverse of `word_to_char_ids` for short words)."""
    values = [int(value) for value in char_ids]
    assert values[0] == BEGIN_OF_WORD_CHAR
    end = values.index(END_OF_WORD_CHAR)
    assert all(value == PADDING_CHAR for value in values[end + 1 :])
    inner = values[1:end]
    if inner == [BEGIN_OF_SENTENCE_CHAR]:
        return "<S>"
    if inner == [END_OF_SENTENCE_CHAR]:
        return "</S>"
    return bytes(value - 1 for value in inner).decode("utf-8")


def random_corpus(rng: random.Random, n_shards: int, n_sentences: int, max_length: int) -> list[list[str]]:
    pool = ["the", "a", "of", "bank", "river", "Zürich", "naïve", "日本語", "x" * 40, "<UNK>", "rare", "."]
    pool += [f"w{index}" for index in range(30)]
    return [
        [" ".join(rng.choice(pool) for _ in range(rng.randint(1, max_length))) for _ in range(n_sentences)]
        for _ in range(n_shards)
    ]


@pytest.fixture
def vocab() -> LmVocabulary:
    return LmVocabulary(
        ["<S>", "</S>", "<UNK>", "the", "a", "of", ".", "bank", "Zürich"] + [f"w{i}" for i in range(10)]
    )


def assert_batches_equal(actual: list[dict], expected: list[dict]) -> None:
    assert len(actual) == len(expected)
    for index, (batch, reference) in enumerate(zip(actual, expected, strict=True)):
        assert set(batch) == set(KEYS)
        for key in KEYS:
            assert batch[key].dtype == torch.long, key
            assert torch.equal(batch[key], reference[key]), f"batch {index}, {key}"


@pytest.mark.parametrize(
    "batch_size, unroll_steps, chars, max_length",
    [(3, 5, 12, 14), (1, 1, 50, 3), (4, 7, 50, 30), (2, 20, 9, 6)],
)
def test_batches_match_brute_force(tmp_path, vocab, batch_size, unroll_steps, chars, max_length):
    rng = random.Random(batch_size * 100 + unroll_steps)
    files = write_corpus(tmp_path, random_corpus(rng, n_shards=3, n_sentences=25, max_length=max_length))
    dataset = LmStreamDataset(files, vocab, batch_size, unroll_steps, chars, seed=7, num_passes=2)
    expected = reference_batches(
        reference_sentences(files, seed=7, num_passes=2), vocab.tokens, batch_size, unroll_steps, chars
    )
    assert len(expected) > 2
    assert_batches_equal(list(dataset), expected)


def test_sentence_longer_than_a_window_continues_in_the_same_row(tmp_path, vocab):
    long = [f"w{index % 10}" for index in range(12)]
    files = write_corpus(
        tmp_path, [[" ".join(long), "a", "the of", "bank", "a a a a a a a a a a a a a", "the the the"]]
    )
    dataset = LmStreamDataset(files, vocab, batch_size=2, unroll_steps=5, max_characters_per_token=50, num_passes=1)
    batches = list(dataset)
    row0 = [decode_word(ids) for batch in batches for ids in batch["input_ids"][0]]
    targets0 = [vocab.tokens[i] for batch in batches for i in batch["labels"][0]]
    # row 0: the 12-word sentence (13 positions) over windows 0, 1, 2, then the next sentence it takes
    assert row0[:13] == ["<S>", *long]
    assert targets0[:13] == [*long, "</S>"]
    backward0 = [decode_word(ids) for batch in batches for ids in batch["backward_input_ids"][0]]
    assert backward0[:13] == ["</S>", *long[::-1]]
    assert [vocab.tokens[i] for batch in batches for i in batch["backward_labels"][0]][:13] == [*long[::-1], "<S>"]
    # row 1 took "a" (2 positions) and "the of" (3 positions) for window 0: the stream is shared, row by row
    assert [decode_word(ids) for ids in batches[0]["input_ids"][1]] == ["<S>", "a", "<S>", "the", "of"]


def test_directions_hold_the_same_sentence_at_every_position(tmp_path):
    shards = [
        [" ".join(f"s{shard}x{line}y{word}" for word in range(1 + (line * 7) % 11)) for line in range(40)]
        for shard in range(2)
    ]
    files = write_corpus(tmp_path, shards)
    vocab = LmVocabulary(["<S>", "</S>", "<UNK>"])
    dataset = LmStreamDataset(files, vocab, batch_size=3, unroll_steps=4, max_characters_per_token=16, num_passes=1)
    batches = list(dataset)
    assert batches
    compared = 0
    for batch in batches:
        for row in range(3):
            forward = [decode_word(ids) for ids in batch["input_ids"][row]]
            backward = [decode_word(ids) for ids in batch["backward_input_ids"][row]]
            for word, other in zip(forward, backward, strict=True):
                if word not in ("<S>", "</S>") and other not in ("<S>", "</S>"):
                    assert word.split("y")[0] == other.split("y")[0]
                    compared += 1
                else:  # a sentence starts at the same position in both directions
                    assert (word == "<S>") == (other == "</S>")
    assert compared > 50


def test_unknown_words_keep_their_characters(tmp_path, vocab):
    files = write_corpus(tmp_path, [["unseen bank"]])
    batch = next(iter(LmStreamDataset(files, vocab, 1, 3, 50, num_passes=1)))
    assert decode_word(batch["input_ids"][0, 1]) == "unseen"
    assert batch["labels"][0].tolist() == [vocab.unk, vocab.token_to_id("bank"), vocab.eos]


def test_incomplete_final_batch_is_dropped(tmp_path, vocab):
    files = write_corpus(tmp_path, [["a the", "of"]])  # 3 + 2 = 5 positions
    assert len(list(LmStreamDataset(files, vocab, 1, 5, 50, num_passes=1))) == 1
    assert len(list(LmStreamDataset(files, vocab, 1, 6, 50, num_passes=1))) == 0
    assert len(list(LmStreamDataset(files, vocab, 2, 2, 50, num_passes=1))) == 1  # rows 0 and 1 fit once


def test_endless_stream_loops_over_passes(tmp_path, vocab):
    rng = random.Random(3)
    files = write_corpus(tmp_path, random_corpus(rng, n_shards=4, n_sentences=5, max_length=8))
    dataset = LmStreamDataset(files, vocab, 2, 6, 20, seed=11)
    expected = reference_batches(reference_sentences(files, seed=11, num_passes=12), vocab.tokens, 2, 6, 20)
    actual = list(itertools.islice(iter(dataset), len(expected)))
    assert_batches_equal(actual, expected)
    one_pass = reference_batches(reference_sentences(files, seed=11), vocab.tokens, 2, 6, 20)
    assert len(expected) > 5 * len(one_pass)


def test_stream_is_deterministic_and_restarts(tmp_path, vocab):
    rng = random.Random(5)
    files = write_corpus(tmp_path, random_corpus(rng, n_shards=5, n_sentences=6, max_length=8))
    dataset = LmStreamDataset(files, vocab, 2, 4, 20, seed=1, num_passes=1)
    iterator = iter(dataset)
    first = [next(iterator) for _ in range(3)]
    again = list(itertools.islice(iter(dataset), 3))  # a new __iter__ starts from the beginning
    assert_batches_equal(again, first)
    assert_batches_equal(list(LmStreamDataset(files, vocab, 2, 4, 20, seed=1, num_passes=1)), list(dataset))
    other_seed = list(LmStreamDataset(files, vocab, 2, 4, 20, seed=2, num_passes=1))
    assert any(not torch.equal(a["labels"], b["labels"]) for a, b in zip(other_seed, dataset, strict=False))


def test_a_small_character_cache_gives_the_same_batches(tmp_path, vocab):
    rng = random.Random(9)
    files = write_corpus(tmp_path, random_corpus(rng, n_shards=2, n_sentences=30, max_length=10))
    small = list(LmStreamDataset(files, vocab, 2, 3, 12, num_passes=1, char_cache_size=1))
    assert_batches_equal(small, reference_batches(reference_sentences(files), vocab.tokens, 2, 3, 12))


@pytest.mark.parametrize("n_shards, world_size", [(4, 2), (5, 2), (1, 2), (2, 3)])
def test_ranks_read_disjoint_shares_that_cover_the_corpus(tmp_path, vocab, n_shards, world_size):
    shards = [[f"s{shard}x{line} the" for line in range(7)] for shard in range(n_shards)]
    files = write_corpus(tmp_path, shards)
    seen = []
    for rank in range(world_size):
        dataset = LmStreamDataset(files, vocab, 1, 3, 20, rank=rank, world_size=world_size, num_passes=1)
        sentences = reference_sentences(files, rank=rank, world_size=world_size)
        assert_batches_equal(list(dataset), reference_batches(sentences, vocab.tokens, 1, 3, 20))
        seen.extend(word for batch in dataset for ids in batch["input_ids"][0] if (word := decode_word(ids))[0] == "s")
    assert sorted(seen) == sorted(line.split()[0] for lines in shards for line in lines)  # each sentence once


def test_utf8_error_names_file_and_line(tmp_path, vocab):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"the bank\n\nof \xff the\n")
    with pytest.raises(CorpusError, match=r"bad\.txt: line 3 is not valid UTF-8"):
        list(LmStreamDataset([path], vocab, 1, 2, 50, num_passes=1))


def test_empty_corpus_is_an_error_not_an_endless_loop(tmp_path, vocab):
    files = write_corpus(tmp_path, [["", "   "], []])
    with pytest.raises(CorpusError, match="corpus is empty"):
        next(iter(LmStreamDataset(files, vocab, 1, 2, 50)))


def test_dataloader_workers_are_refused(tmp_path, vocab):
    files = write_corpus(tmp_path, [["a the of"] * 10])
    loader = torch.utils.data.DataLoader(LmStreamDataset(files, vocab, 1, 2, 50), batch_size=None, num_workers=1)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(loader))
    batch = next(iter(torch.utils.data.DataLoader(LmStreamDataset(files, vocab, 1, 2, 50), batch_size=None)))
    assert batch["input_ids"].shape == (1, 2, 50)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"unroll_steps": 2.0}, "unroll_steps must be a positive integer"),
        ({"max_characters_per_token": 2}, "max_characters_per_token must be an integer from 3"),
        ({"num_passes": 0}, "num_passes must be a positive integer or None"),
        ({"rank": 2, "world_size": 2}, "0 <= rank < world_size"),
        ({"files": []}, "no files"),
    ],
)
def test_constructor_checks_its_arguments(tmp_path, vocab, kwargs, message):
    files = write_corpus(tmp_path, [["a"]])
    arguments = {"files": files, "vocab": vocab, "batch_size": 1, "unroll_steps": 1, "max_characters_per_token": 50}
    with pytest.raises(ValueError, match=message):
        LmStreamDataset(**{**arguments, **kwargs})
