"""Tests of ElmoTokenizer: character ids, word splitting, batching/padding, collators, save/load, added tokens, errors.

Expected character ids are computed here from the specification of the original vocabulary (UTF-8 bytes + 1, cut at
max_characters_per_token - 2 bytes, wrapped in begin/end-of-word 259/260, padded with 261; `<S>` / `</S>` are the
single characters 257 / 258), never by the code under test.
"""

import json
import logging
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
import torch
from tokenizers import AddedToken
from transformers import AutoTokenizer, DataCollatorForTokenClassification, DataCollatorWithPadding

from modeling_elmo.tokenization_elmo import ElmoBatchEncoding, ElmoTokenizer
from modeling_elmo.transformers_compat import IS_TRANSFORMERS_5, register_tokenizer

BOS_CHAR, EOS_CHAR, BOW, EOW, CHAR_PAD = 257, 258, 259, 260, 261


def expected_row(word: str, n: int = 50) -> list[int]:
    """Character ids of one word, from the spec of the original vocabulary (shifted by +1)."""
    if word == "<S>":
        ids = [BOW, BOS_CHAR, EOW]
    elif word == "</S>":
        ids = [BOW, EOS_CHAR, EOW]
    else:
        ids = [BOW] + [b + 1 for b in list(word.encode("utf-8"))[: n - 2]] + [EOW]
    return ids + [CHAR_PAD] * (n - len(ids))


ZERO_ROW = [0] * 50


@pytest.fixture(scope="module")
def tok() -> ElmoTokenizer:
    return ElmoTokenizer()


# ---------------------------------------------------------------------------------------------------------------------
# Vocabulary and character ids
# ---------------------------------------------------------------------------------------------------------------------


def test_character_vocabulary(tok):
    assert tok.vocab_size == 262
    assert len(tok) == 262
    assert tok.pad_token == "<pad>" and tok.pad_token_id == 0
    vocab = tok.get_vocab()
    assert len(vocab) == 262 and sorted(vocab.values()) == list(range(262))
    assert vocab["<0x41>"] == ord("A") + 1
    assert vocab["<0xFF>"] == 256
    assert [vocab[t] for t in ("<S>", "</S>", "<bow>", "<eow>", "<char_pad>")] == [257, 258, 259, 260, 261]
    assert tok.convert_tokens_to_ids("<bow>") == BOW
    # a word (what `tokenize` gives) converts to its row of `input_ids`
    assert tok.tokenize("didn't") == ["didn", "'t"]
    assert tok.tokenize("didn't say .", is_split_into_words=True) == ["didn't", "say", "."]
    assert tok.convert_tokens_to_ids(["Hi", "<bow>"]) == [tok(["Hi"], is_split_into_words=True)["input_ids"][0], BOW]
    assert tok.convert_ids_to_tokens(ord("z") + 1) == "<0x7A>"
    assert tok.all_special_ids == [0]


@pytest.mark.parametrize(
    "word",
    ["a", "Hello", "", "café", "naïve", "日本語", "👍🏽", "e\u0301", "x" * 48, "x" * 49, "Straße", "\u00a0"],
)
def test_word_to_char_ids_matches_spec(tok, word):
    assert tok.word_to_char_ids(word) == expected_row(word)


def test_boundary_words(tok):
    assert tok.word_to_char_ids("<S>") == [BOW, BOS_CHAR, EOW] + [CHAR_PAD] * 47
    assert tok.word_to_char_ids("</S>") == [BOW, EOS_CHAR, EOW] + [CHAR_PAD] * 47
    enc = tok(["<S>", "x", "</S>"], is_split_into_words=True)
    assert enc["input_ids"] == [expected_row("<S>"), expected_row("x"), expected_row("</S>")]
    assert tok.decode(enc["input_ids"]) == "<S> x </S>"


def test_long_word_is_cut_like_the_original(tok):
    word = "abcdefghijklmnopqrstuvwxyz" * 2 + "ABCDEFGH"  # 60 characters
    row = tok.word_to_char_ids(word)
    assert len(word) == 60
    assert row == [BOW] + [ord(c) + 1 for c in word[:48]] + [EOW]
    assert tok([word], is_split_into_words=True)["input_ids"] == [row]


def test_cut_inside_a_multibyte_character(tok):
    word = "a" + "é" * 30  # 61 bytes: the 48-byte cut keeps only the first byte of the 24th "é"
    row = tok.word_to_char_ids(word)
    assert row == expected_row(word)
    assert row[48] == 0xC3 + 1 and row[49] == EOW
    assert tok.decode([row]) == "a" + "é" * 23 + "\ufffd"


def test_other_max_characters_per_token():
    small = ElmoTokenizer(max_characters_per_token=10)
    assert small.word_to_char_ids("internationalisation") == expected_row("internationalisation", 10)
    enc = small(["hi", "there"], padding="max_length", max_length=3, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 3, 10)
    assert small("", return_tensors="pt")["input_ids"].shape == (1, 0, 10)


@pytest.mark.parametrize(
    "text",
    [
        "emoji 👨\u200d👩\u200d👧 🇫🇷 ❤️ 1️⃣ 👍🏽",
        "CJK 東京へ行く。한국어",
        "combining e\u0301\u0302 \u0301alone",
        "controls a\x00b\x07c\x1bd\x7fe",
        "lone \ud800 surrogate \udfff",
        "rtl مرحبا بالعالم",
        "\ufeffBOM and zero\u200bwidth",
    ],
)
def test_any_unicode_is_encoded(tok, text):
    enc = tok(text, return_offsets_mapping=True)
    assert len(enc["input_ids"]) == len(enc["offset_mapping"]) > 0
    for row, (start, end) in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
        assert len(row) == 50 and row[0] == BOW and EOW in row
        assert 0 <= start < end <= len(text)
    tok.decode(enc["input_ids"])  # never crashes


def test_lone_surrogate_does_not_crash(tok):
    row = tok.word_to_char_ids("x\ud800y")
    assert len(row) == 50 and row[:2] == [BOW, ord("x") + 1]
    assert ord("y") + 1 in row
    assert tok(["x\udfff"], is_split_into_words=True, return_tensors="pt")["input_ids"].shape == (1, 1, 50)
    assert isinstance(tok.decode([row]), str)


def test_lone_surrogate_like_the_original(tok):
    """bilm-tf and AllenNLP encode with errors='ignore': a lone surrogate is dropped."""
    assert tok.word_to_char_ids("x\ud800y") == expected_row("xy")


# ---------------------------------------------------------------------------------------------------------------------
# Word splitting
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Hello,  world!\tHow are\nyou?", ["Hello", ",", "world", "!", "How", "are", "you", "?"]),
        ("I don't like John's car.", ["I", "don", "'t", "like", "John", "'s", "car", "."]),
        ("We'll see; they're here", ["We", "'ll", "see", ";", "they", "'re", "here"]),
        ("the 1990's", ["the", "1990", "'s"]),
        ("It costs 3.5 dollars, or 1,000 cents.", ["It", "costs", "3.5", "dollars", ",", "or", "1,000", "cents", "."]),
        ("a,b 1,a", ["a", ",", "b", "1", ",", "a"]),
        ("The U.S. team won.", ["The", "U.S.", "team", "won", "."]),
        ("Made in the U.S.", ["Made", "in", "the", "U.S."]),
        ("e.g. this", ["e.g.", "this"]),
        ("Mr. Smith waited...", ["Mr.", "Smith", "waited", "..."]),
        ("a well-known fact -- sure", ["a", "well-known", "fact", "--", "sure"]),
        ('"Quoted" (paren) [x] {y}', ['"', "Quoted", '"', "(", "paren", ")", "[", "x", "]", "{", "y", "}"]),
        ("50% of $5 @ #tag a/b", ["50", "%", "of", "$", "5", "@", "#", "tag", "a", "/", "b"]),
        ("Keep CaSe", ["Keep", "CaSe"]),
        ("Café naïve résumé Straße", ["Café", "naïve", "résumé", "Straße"]),
        ("cafe\u0301 ok", ["cafe\u0301", "ok"]),
        ("東京へ行く。", ["東京へ行く", "。"]),
        ("I ❤️ NY 👍🏽!", ["I", "❤️", "NY", "👍🏽", "!"]),
        ("a\u00a0b\u3000c\u200bd", ["a", "b", "c", "d"]),
        ("don’t", ["don", "’t"]),
        ("", []),
        (" \t\n  ", []),
    ],
)
def test_split_words(tok, text, words):
    split = tok.split_words(text)
    assert [w for w, _, _ in split] == words
    assert all(text[start:end] == word for word, start, end in split)
    assert tok.tokenize(text) == words


def test_offsets_index_the_raw_string(tok):
    texts = ["  Multiple   spaces\tand\ttabs\n\nnew lines  ", "Ünïcödé — “quotes” and 👍🏽 émoji!", "x"]
    enc = tok(texts, padding=True, return_offsets_mapping=True)
    for index, text in enumerate(texts):
        words = [w for w, _, _ in tok.split_words(text)]
        offsets = enc["offset_mapping"][index]
        assert [text[s:e] for s, e in offsets[: len(words)]] == words
        assert all(tuple(o) == (0, 0) for o in offsets[len(words) :])
        assert enc["input_ids"][index][: len(words)] == [expected_row(w) for w in words]


def test_offsets_of_pre_split_words_index_the_joined_words(tok):
    batch = [["New", "York", "", "is", "big"], ["Ünïcödé", "👍🏽"]]
    enc = tok(batch, is_split_into_words=True, padding=True, return_offsets_mapping=True, return_tensors="pt")
    assert enc["offset_mapping"].shape == (2, 5, 2)
    for index, words in enumerate(batch):
        joined = " ".join(words)
        offsets = enc["offset_mapping"][index].tolist()
        assert [joined[s:e] for s, e in offsets[: len(words)]] == words
        assert offsets[len(words) :] == [[0, 0]] * (5 - len(words))


# ---------------------------------------------------------------------------------------------------------------------
# Encoding: single examples, batches, padding, truncation
# ---------------------------------------------------------------------------------------------------------------------


def test_single_raw_string(tok):
    text = "Hello, world!"
    enc = tok(text)
    assert isinstance(enc, ElmoBatchEncoding)
    assert set(enc) == {"input_ids", "attention_mask"}
    assert enc["input_ids"] == [expected_row(w) for w in ["Hello", ",", "world", "!"]]
    assert enc["attention_mask"] == [1, 1, 1, 1]
    assert enc.word_ids() == [0, 1, 2, 3]
    assert tok.encode(text) == enc["input_ids"]
    pt = tok(text, return_tensors="pt")
    assert pt["input_ids"].shape == (1, 4, 50) and pt["input_ids"].dtype == torch.int64
    assert pt["attention_mask"].shape == (1, 4)
    assert pt["input_ids"][0].tolist() == enc["input_ids"]
    assert pt.word_ids(0) == [0, 1, 2, 3]


def test_single_pre_split_example(tok):
    words = ["The", "bank", "closed"]
    enc = tok(words, is_split_into_words=True)
    assert enc["input_ids"] == [expected_row(w) for w in words]
    pt = tok(words, is_split_into_words=True, return_tensors="pt")
    assert pt["input_ids"].shape == (1, 3, 50)
    assert tok(tuple(words), is_split_into_words=True)["input_ids"] == enc["input_ids"]


def test_batch_of_pre_split_examples(tok):
    batch = [["The", "bank", "closed"], ["River", "bank"]]
    enc = tok(batch, is_split_into_words=True, padding=True, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 3, 50)
    assert enc["input_ids"][0].tolist() == [expected_row(w) for w in batch[0]]
    assert enc["input_ids"][1].tolist() == [expected_row("River"), expected_row("bank"), ZERO_ROW]
    assert enc["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert enc.word_ids(0) == [0, 1, 2] and enc.word_ids(1) == [0, 1, None]
    unpadded = tok(batch, is_split_into_words=True)
    assert [len(x) for x in unpadded["input_ids"]] == [3, 2]
    assert unpadded.word_ids(1) == [0, 1]


def test_batch_of_raw_strings(tok):
    enc = tok(["Hello world", "Hi"], padding="longest")
    assert enc["input_ids"] == [[expected_row("Hello"), expected_row("world")], [expected_row("Hi"), ZERO_ROW]]
    assert enc["attention_mask"] == [[1, 1], [1, 0]]
    with pytest.raises(ValueError, match="padding=True"):
        tok(["Hello world", "Hi"], return_tensors="pt")  # ragged without padding


def test_numpy_tensors(tok):
    enc = tok([["a", "b"], ["c"]], is_split_into_words=True, padding=True, return_tensors="np")
    assert enc["input_ids"].shape == (2, 2, 50) and enc["attention_mask"].shape == (2, 2)


@pytest.mark.parametrize("tensor_type", ["pt", "np"])
def test_padded_input_ids_convert_to_int64_tensors(tok, tensor_type):
    batch = [["The", "bank", "closed"], ["River", "bank"]]
    expected = [[expected_row(w) for w in batch[0]], [expected_row("River"), expected_row("bank"), ZERO_ROW]]
    kind = torch.Tensor if tensor_type == "pt" else np.ndarray
    enc = tok(batch, is_split_into_words=True, padding=True, return_tensors=tensor_type)
    assert isinstance(enc["input_ids"], kind) and enc["input_ids"].dtype in (torch.int64, np.int64)
    assert enc["input_ids"].tolist() == expected
    single = tok(batch[0], is_split_into_words=True, return_tensors=tensor_type)  # batch axis prepended
    assert isinstance(single["input_ids"], kind) and single["input_ids"].tolist() == [expected[0]]
    padded = tok.pad({"input_ids": [expected[0], expected[1][:2]]}, padding=True, return_tensors=tensor_type)
    assert padded["input_ids"].tolist() == expected and padded["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]


def test_non_integer_input_ids_are_not_truncated_to_integers():
    enc = ElmoBatchEncoding({"input_ids": [[[1.5, 2.0]], [[3.0, 4.25]]]}, tensor_type="pt")
    assert enc["input_ids"].dtype == torch.float32 and enc["input_ids"].tolist() == [[[1.5, 2.0]], [[3.0, 4.25]]]


def test_a_failed_conversion_keeps_the_input_ids():
    enc = ElmoBatchEncoding({"input_ids": [[[1, 2]], [[3, 4]]], "attention_mask": [[1], [1, 1]]})
    with pytest.raises(ValueError):
        enc.convert_to_tensors("pt")  # the ragged attention mask
    assert enc["input_ids"].tolist() == [[[1, 2]], [[3, 4]]]


def test_padding_max_length_and_multiple_of(tok):
    batch = [["a"] * 5, ["b"] * 2]
    enc = tok(batch, is_split_into_words=True, padding="max_length", max_length=7, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 7, 50)
    assert enc["attention_mask"].sum(1).tolist() == [5, 2]
    assert (enc["input_ids"][1, 2:] == 0).all()
    enc = tok(batch, is_split_into_words=True, padding=True, pad_to_multiple_of=4, return_tensors="pt")
    assert enc["input_ids"].shape == (2, 8, 50)
    single = tok(["a"] * 5, is_split_into_words=True, padding=True, pad_to_multiple_of=4, return_tensors="pt")
    assert single["input_ids"].shape == (1, 8, 50)
    assert single.word_ids() == [0, 1, 2, 3, 4, None, None, None]


def test_left_padding(tok):
    batch = [["a", "b", "c"], ["d"]]
    enc = tok(batch, is_split_into_words=True, padding=True, padding_side="left", return_offsets_mapping=True)
    assert enc["input_ids"][1] == [ZERO_ROW, ZERO_ROW, expected_row("d")]
    assert enc["attention_mask"] == [[1, 1, 1], [0, 0, 1]]
    assert enc["offset_mapping"][1] == [(0, 0), (0, 0), (0, 1)]
    assert enc.word_ids(1) == [None, None, 0]
    left = ElmoTokenizer(padding_side="left")
    assert left(batch, is_split_into_words=True, padding=True)["input_ids"] == enc["input_ids"]


def test_truncation_in_words_warns_once(caplog):
    fresh = ElmoTokenizer()
    words = ["w0", "w1", "w2", "w3", "w4"]
    with caplog.at_level(logging.WARNING):
        enc = fresh(words, is_split_into_words=True, truncation=True, max_length=3)
        fresh([words, ["x"]], is_split_into_words=True, truncation=True, max_length=2, padding=True)
    assert enc["input_ids"] == [expected_row(w) for w in words[:3]]
    records = [r for r in caplog.records if "truncat" in r.getMessage() and r.levelno == logging.WARNING]
    assert len(records) == 1 and "max_length=3" in records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fresh(["short"], is_split_into_words=True, truncation=True, max_length=3)
    assert not [r for r in caplog.records if "truncat" in r.getMessage()]


def test_truncation_variants(tok):
    words = ["w0", "w1", "w2", "w3", "w4"]
    only_max_length = tok(words, is_split_into_words=True, max_length=2)  # implies truncation, as in Transformers
    assert only_max_length["input_ids"] == [expected_row("w0"), expected_row("w1")]
    left = ElmoTokenizer(truncation_side="left")
    assert left(words, is_split_into_words=True, truncation=True, max_length=2)["input_ids"] == [
        expected_row("w3"),
        expected_row("w4"),
    ]
    enc = tok("one two three four", truncation=True, max_length=3, padding="max_length", return_tensors="pt")
    assert enc["input_ids"].shape == (1, 3, 50)
    assert tok(words, is_split_into_words=True, truncation=False)["input_ids"] == [expected_row(w) for w in words]
    assert tok(words, is_split_into_words=True, truncation=True, max_length=0)["input_ids"] == []


def test_optional_outputs(tok):
    enc = tok(
        [["a", "b"], ["c"]],
        is_split_into_words=True,
        padding=True,
        return_attention_mask=False,
        return_special_tokens_mask=True,
        return_token_type_ids=True,
        return_length=True,
    )
    assert "attention_mask" not in enc
    assert enc["special_tokens_mask"] == [[0, 0], [0, 1]]
    assert enc["token_type_ids"] == [[0, 0], [0, 0]]
    assert enc["length"] == [2, 1]
    assert enc.word_ids(1) == [0, None]  # derived from the all-zero padding row
    assert enc.sequence_ids(1) == [0, None]


def test_empty_sentences_are_zero_word_examples(tok):
    for empty in ("", "   \t\n", []):
        enc = tok(empty, is_split_into_words=isinstance(empty, list))
        assert enc["input_ids"] == [] and enc["attention_mask"] == []
        assert enc.word_ids() == []
        pt = tok(empty, is_split_into_words=isinstance(empty, list), return_tensors="pt")
        assert pt["input_ids"].shape == (1, 0, 50) and pt["attention_mask"].shape == (1, 0)
    enc = tok(["", "a b"], padding=True, return_tensors="pt", return_offsets_mapping=True)
    assert enc["input_ids"].shape == (2, 2, 50)
    assert (enc["input_ids"][0] == 0).all() and enc["attention_mask"].tolist() == [[0, 0], [1, 1]]
    assert enc.word_ids(0) == [None, None]
    enc = tok([[], []], is_split_into_words=True, padding=True, return_tensors="pt", return_offsets_mapping=True)
    assert enc["input_ids"].shape == (2, 0, 50) and enc["offset_mapping"].shape == (2, 0, 2)
    assert tok(["", "a"], padding="max_length", max_length=3)["attention_mask"] == [[0, 0, 0], [1, 0, 0]]


# ---------------------------------------------------------------------------------------------------------------------
# pad() and data collators
# ---------------------------------------------------------------------------------------------------------------------


def test_pad_single_example(tok):
    example = tok(["a", "b"], is_split_into_words=True, return_offsets_mapping=True)
    padded = tok.pad(example, padding="max_length", max_length=4)
    assert padded["input_ids"] == [expected_row("a"), expected_row("b"), ZERO_ROW, ZERO_ROW]
    assert padded["attention_mask"] == [1, 1, 0, 0]
    assert [tuple(o) for o in padded["offset_mapping"]] == [(0, 1), (2, 3), (0, 0), (0, 0)]
    assert padded.word_ids() == [0, 1, None, None]
    pt = tok.pad(example, padding="max_length", max_length=4, return_tensors="pt")
    assert pt["input_ids"].shape == (4, 50) and pt["attention_mask"].tolist() == [1, 1, 0, 0]
    from_tensors = tok.pad({"input_ids": torch.tensor(example["input_ids"])}, padding="max_length", max_length=3)
    assert isinstance(from_tensors["input_ids"], torch.Tensor) and from_tensors["input_ids"].shape == (3, 50)
    assert from_tensors["attention_mask"].tolist() == [1, 1, 0]
    assert tok.pad(example)["input_ids"] == example["input_ids"]  # longest = itself


def test_pad_list_of_features(tok):
    features = [tok(w, is_split_into_words=True) for w in (["a", "b", "c"], ["d"], [])]
    batch = tok.pad(features, return_tensors="pt")
    assert batch["input_ids"].shape == (3, 3, 50)
    assert batch["input_ids"][1].tolist() == [expected_row("d"), ZERO_ROW, ZERO_ROW]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]
    assert batch.word_ids(2) == [None, None, None]
    as_dict = tok.pad({"input_ids": [f["input_ids"] for f in features]}, padding="max_length", max_length=5)
    assert [len(x) for x in as_dict["input_ids"]] == [5, 5, 5]
    tensor_features = [{"input_ids": torch.tensor(f["input_ids"], dtype=torch.long).reshape(-1, 50)} for f in features]
    from_tensors = tok.pad(tensor_features, pad_to_multiple_of=2)
    assert isinstance(from_tensors["input_ids"], torch.Tensor) and from_tensors["input_ids"].shape == (3, 4, 50)


def test_data_collator_for_token_classification(tok):
    sentences = [["EU", "rejects", "German", "call"], ["Peter"], ["to", "boycott"]]
    features = [
        {**tok(words, is_split_into_words=True), "labels": list(range(1, len(words) + 1))} for words in sentences
    ]
    batch = DataCollatorForTokenClassification(tok)(features)
    assert batch["input_ids"].shape == (3, 4, 50) and batch["input_ids"].dtype == torch.int64
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [[1, 2, 3, 4], [1, -100, -100, -100], [1, 2, -100, -100]]
    assert batch["input_ids"][1].tolist() == [expected_row("Peter")] + [ZERO_ROW] * 3
    assert batch["input_ids"][2, 1].tolist() == expected_row("boycott")

    left = ElmoTokenizer(padding_side="left")
    batch = DataCollatorForTokenClassification(left, pad_to_multiple_of=8)(features)
    assert batch["input_ids"].shape == (3, 8, 50)
    assert batch["labels"][1].tolist() == [-100] * 7 + [1]
    assert batch["input_ids"][1, 7].tolist() == expected_row("Peter")
    assert batch["attention_mask"][1].tolist() == [0] * 7 + [1]


# ---------------------------------------------------------------------------------------------------------------------
# Text pairs
# ---------------------------------------------------------------------------------------------------------------------


def test_a_text_pair_is_one_row_with_token_type_ids(tok):
    premise, hypothesis = "A man plays.", "Music, loud"
    enc = tok(premise, hypothesis, return_offsets_mapping=True, return_special_tokens_mask=True)
    words = ["A", "man", "plays", ".", "Music", ",", "loud"]
    assert enc["input_ids"] == [expected_row(word) for word in words]
    assert enc["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1] and enc["attention_mask"] == [1] * 7
    assert enc["special_tokens_mask"] == [0] * 7 and enc.n_sequences == 2
    assert enc["offset_mapping"] == [(0, 1), (2, 5), (6, 11), (11, 12), (0, 5), (5, 6), (7, 11)]  # each its own text
    texts = [premise] * 4 + [hypothesis] * 3
    assert [text[start:end] for text, (start, end) in zip(texts, enc["offset_mapping"], strict=True)] == words
    assert enc.word_ids() == [0, 1, 2, 3, 0, 1, 2] and enc.sequence_ids() == [0, 0, 0, 0, 1, 1, 1]
    assert tok(premise)["input_ids"] == enc["input_ids"][:4] and "token_type_ids" not in tok(premise)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_a_batch_of_pre_split_pairs_pads_every_key(padding_side):
    tok = ElmoTokenizer(padding_side=padding_side)
    enc = tok(
        [["It", "rains"], ["Yes"]],
        [["Sun"], ["No", "way", "!"]],
        is_split_into_words=True,
        padding=True,
        return_offsets_mapping=True,
        return_tensors="pt",
    )
    assert enc["input_ids"].shape == (2, 4, 50) and enc.n_sequences == 2
    real = {"right": slice(0, 3), "left": slice(1, 4)}[padding_side]
    assert enc["token_type_ids"][0, real].tolist() == [0, 0, 1] and enc["token_type_ids"][1].tolist() == [0, 1, 1, 1]
    assert enc["attention_mask"][0, real].tolist() == [1, 1, 1] and enc["attention_mask"][0].sum() == 3
    assert enc["offset_mapping"][1].tolist() == [[0, 3], [0, 2], [3, 6], [7, 8]]  # into " ".join(words)
    padded_ids = [None, 0, 1, 0] if padding_side == "left" else [0, 1, 0, None]
    assert enc.word_ids(0) == padded_ids and enc.word_ids(1) == [0, 0, 1, 2]
    assert enc.sequence_ids(1) == [0, 1, 1, 1]


@pytest.mark.parametrize(
    ("strategy", "side", "expected"),
    [
        ("longest_first", "right", (["a", "b", "c"], ["v", "w"])),  # 4 + 3 words -> 3 + 2
        ("longest_first", "left", (["b", "c", "d"], ["x", "y"])),
        (True, "right", (["a", "b", "c"], ["v", "w"])),
        ("only_first", "right", (["a", "b"], ["v", "w", "x", "y"])),
        ("only_second", "left", (["a", "b", "c", "d"], ["y"])),
    ],
)
def test_pair_truncation_strategies(strategy, side, expected):
    tok = ElmoTokenizer(truncation_side=side)
    first, second = ["a", "b", "c", "d"], ["v", "w", "x", "y"]
    max_length = sum(map(len, expected))
    enc = tok(first, second, is_split_into_words=True, truncation=strategy, max_length=max_length)
    types = enc["token_type_ids"]
    kept = [
        [word for word, kind in zip(tok.decode(enc["input_ids"]).split(), types, strict=True) if kind == k]
        for k in (0, 1)
    ]
    assert tuple(kept) == expected


def test_pair_truncation_that_cannot_fit_is_an_error(tok):
    with pytest.raises(ValueError, match=r"truncation='only_first' cannot bring pair 1 to max_length=2 words"):
        tok(["a", "b c"], ["d", "e f g"], truncation="only_first", max_length=2)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_data_collator_with_padding_pads_pair_batches(padding_side):
    tok = ElmoTokenizer(padding_side=padding_side)
    pairs = [("A man plays .", "Music"), ("Rain", "The sun shines"), ("Yes", "")]
    features = [{**tok(first, second), "label": label} for label, (first, second) in enumerate(pairs)]
    batch = DataCollatorWithPadding(tok)(features)
    assert batch["input_ids"].shape == (3, 5, 50) and batch["labels"].tolist() == [0, 1, 2]
    for row, (first, second) in enumerate(pairs):
        alone = tok(first, second)
        keep = batch["attention_mask"][row].bool()
        assert batch["input_ids"][row, keep].tolist() == alone["input_ids"]
        assert batch["token_type_ids"][row, keep].tolist() == alone["token_type_ids"]
        assert batch["token_type_ids"][row, ~keep].tolist() == [0] * int((~keep).sum())
        assert batch["input_ids"][row, ~keep].abs().sum() == 0
    assert batch["attention_mask"][2].sum() == 1 and batch.sequence_ids(2).count(1) == 0


# ---------------------------------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------------------------------


def test_decode(tok):
    text = "Héllo, wörld 👍🏽 日本"
    enc = tok(text)
    assert tok.decode(enc["input_ids"]) == "Héllo , wörld 👍🏽 日本"
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["Héllo", ",", "wörld", "👍🏽", "日本"]
    assert tok.decode(expected_row("one")) == "one"  # a single word row
    batch = tok(["a b", "c"], padding=True, return_tensors="pt")
    assert tok.batch_decode(batch["input_ids"], skip_special_tokens=True) == ["a b", "c"]
    assert tok.decode(batch["input_ids"]) == ["a b", "c <pad>"]
    assert tok.decode(batch["input_ids"][1], skip_special_tokens=True) == "c"
    assert tok.decode([]) == ""


# ---------------------------------------------------------------------------------------------------------------------
# Save / load
# ---------------------------------------------------------------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path):
    original = ElmoTokenizer(max_characters_per_token=20, padding_side="left")
    original.save_pretrained(tmp_path)
    # Only the config (plus the tokenizer's source files when it is registered for remote code; Transformers 4.x
    # also writes the special tokens apart): no vocabulary file.
    written = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".py")
    expected = ["tokenizer_config.json"] if IS_TRANSFORMERS_5 else ["special_tokens_map.json", "tokenizer_config.json"]
    assert written == expected
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config.get("backend") == ("custom" if IS_TRANSFORMERS_5 else None)
    assert config["max_characters_per_token"] == 20
    assert config["tokenizer_class"] == "ElmoTokenizer"
    loaded = ElmoTokenizer.from_pretrained(tmp_path)
    assert loaded.max_characters_per_token == 20 and loaded.padding_side == "left"
    inputs = dict(padding=True, return_offsets_mapping=True, return_tensors="pt")
    texts = ["The U.S. didn't say.", "Ünïcödé 👍🏽", "a " * 30]
    for key, value in original(texts, **inputs).items():
        assert torch.equal(value, loaded(texts, **inputs)[key]), key


def test_auto_tokenizer(tmp_path):
    import modeling_elmo  # noqa: F401  (registers the Auto classes)
    from modeling_elmo.configuration_elmo import ElmoConfig

    try:
        register_tokenizer(ElmoConfig, ElmoTokenizer)
    except ValueError:  # already registered by `import modeling_elmo`
        pass
    ElmoTokenizer(max_characters_per_token=30).save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is ElmoTokenizer and loaded.max_characters_per_token == 30
    ElmoConfig().save_pretrained(tmp_path)  # a model folder: config.json next to tokenizer_config.json
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is ElmoTokenizer
    assert loaded(["hi"], is_split_into_words=True)["input_ids"] == [expected_row("hi", 30)]


# ---------------------------------------------------------------------------------------------------------------------
# Added tokens: kept whole as words, spelled in characters like any word
# ---------------------------------------------------------------------------------------------------------------------


def tokenizer_with_markers() -> ElmoTokenizer:
    tokenizer = ElmoTokenizer()
    assert tokenizer.add_tokens(["[E1]", "[/E1]"], special_tokens=True) == 2
    assert tokenizer.add_tokens(["New York"]) == 1  # a plain added token, with a space
    return tokenizer


def test_added_tokens_are_whole_words():
    tokenizer = tokenizer_with_markers()
    text = "[E1]Paris[/E1] met  [E1] New York [/E1]."
    words = ["[E1]", "Paris", "[/E1]", "met", "[E1]", "New York", "[/E1]", "."]
    assert tokenizer.tokenize(text) == words
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    assert [text[start:end] for start, end in enc["offset_mapping"]] == words
    assert enc["input_ids"] == [expected_row(word) for word in words]  # no vocabulary id: characters, as any word
    assert enc.word_ids() == list(range(len(words)))
    assert enc["special_tokens_mask"] == [0] * len(words)  # a marker is a word of the sentence, not padding
    assert tokenizer.tokenize("a [E1]'s b") == ["a", "[E1]", "'", "s", "b"]  # the splitter's rules around it
    assert tokenizer.tokenize("[E1] Paris", split_special_tokens=True) == ["[", "E1", "]", "Paris"]
    assert tokenizer.tokenize("<pad> [E1]") == ["<", "pad", ">", "[E1]"]  # padding is a zero row, not a word


def test_added_tokens_in_batches_and_decoding():
    tokenizer = tokenizer_with_markers()
    batch = tokenizer(["[E1] Paris [/E1]", "Hi"], padding=True, return_offsets_mapping=True, return_tensors="pt")
    assert batch["input_ids"].shape == (2, 3, 50)
    assert batch["input_ids"][0, 2].tolist() == expected_row("[/E1]")
    assert batch["offset_mapping"][0].tolist() == [[0, 4], [5, 10], [11, 16]]
    assert batch.word_ids(1) == [0, None, None]
    assert tokenizer.decode(batch["input_ids"]) == ["[E1] Paris [/E1]", "Hi <pad> <pad>"]
    assert tokenizer.decode(batch["input_ids"], skip_special_tokens=True) == ["Paris", "Hi"]
    assert tokenizer.decode(tokenizer("in New York")["input_ids"], skip_special_tokens=True) == "in New York"
    pre_split = tokenizer(["[E1]", "Paris"], is_split_into_words=True)["input_ids"]
    assert pre_split == [expected_row("[E1]"), expected_row("Paris")]


def test_added_tokens_need_no_embedding_rows():
    tokenizer = tokenizer_with_markers()
    assert tokenizer.add_special_tokens({"cls_token": "[CLS]"}) == 1
    assert tokenizer.tokenize("[CLS] x") == ["[CLS]", "x"]
    # `model.resize_token_embeddings(len(tokenizer))` stays a no-op: every id the model reads is a character id
    assert len(tokenizer) == tokenizer.vocab_size == 262
    assert {"[E1]", "[/E1]", "New York", "[CLS]"} <= set(tokenizer.get_vocab())
    assert "[E1]" in tokenizer.all_special_tokens and "New York" not in tokenizer.all_special_tokens


def test_single_word_added_tokens():
    tokenizer = ElmoTokenizer()
    tokenizer.add_tokens([AddedToken("[x]", single_word=True), "[y]"])
    assert tokenizer.tokenize("a[x]b [x] a[y]b") == ["a", "[", "x", "]", "b", "[x]", "a", "[y]", "b"]


def test_added_tokens_survive_save_and_load(tmp_path):
    import modeling_elmo  # noqa: F401  (registers the Auto classes)

    tokenizer_with_markers().save_pretrained(tmp_path)
    text = "[E1] Paris [/E1] in New York"
    expected = ["[E1]", "Paris", "[/E1]", "in", "New York"]
    for loaded in (ElmoTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert type(loaded) is ElmoTokenizer and loaded.tokenize(text) == expected
        assert loaded.all_special_tokens == ["<pad>", "[E1]", "[/E1]"]


@pytest.mark.integration
def test_added_tokens_survive_remote_code_loading(tmp_path):
    """Where the package is not installed: `AutoTokenizer.from_pretrained(..., trust_remote_code=True)`."""
    tokenizer_with_markers().save_pretrained(tmp_path / "tokenizer")
    script = (
        "import json, sys; sys.path.append(sys.argv[1]); from transformers import AutoTokenizer; "
        "t = AutoTokenizer.from_pretrained(sys.argv[2], trust_remote_code=True); "
        "print(json.dumps([type(t).__module__, t.tokenize('[E1] Paris [/E1] in New York')]))"
    )
    env = {"PATH": os.environ.get("PATH", ""), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, sysconfig.get_paths()["purelib"], str(tmp_path / "tokenizer")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    module, words = json.loads(completed.stdout.splitlines()[-1])
    assert module.startswith("transformers_modules.")  # the copy saved with the tokenizer, not this package
    assert words == ["[E1]", "Paris", "[/E1]", "in", "New York"]


# ---------------------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------------------


def test_empty_batch_is_an_error(tok):
    with pytest.raises(ValueError, match="empty batch"):
        tok([])
    with pytest.raises(ValueError, match="empty list"):
        tok.pad([])


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (["a", 3], r"word 1 of example 0 must be a str, got int"),
        (["a", None], r"word 1 of example 0 must be a str, got NoneType"),
        ([["a"], ["b", 2.5]], r"word 1 of example 1 must be a str, got float"),
        ([["a"], [["nested"]]], r"word 0 of example 1 must be a str, got list"),
        ([["a"], "b c"], r"example 1 must be a list of str, got str"),
    ],
)
def test_non_string_words(tok, text, pattern):
    with pytest.raises(TypeError, match=pattern):
        tok(text, is_split_into_words=True)


def test_pre_split_input_without_flag(tok):
    with pytest.raises(ValueError, match="is_split_into_words=True"):
        tok([["The", "bank"], ["River"]])
    with pytest.raises(ValueError, match=r"text\[1\].*is_split_into_words=True"):
        tok(["fine", ["not", "fine"]])


def test_other_bad_inputs(tok):
    with pytest.raises(TypeError, match=r"text\[1\]` must be a str, got int"):
        tok(["a", 5])
    with pytest.raises(TypeError, match="got int"):
        tok(42)
    with pytest.raises(ValueError, match="`text_pair` must be one example, as `text` is"):
        tok("a", ["b", "c"])
    with pytest.raises(ValueError, match="`text` has 2 examples but `text_pair` has 1"):
        tok(["a", "b"], ["c"])
    with pytest.raises(TypeError, match=r"word 0 of example 1 of `text_pair` must be a str, got int"):
        tok([["a"], ["b"]], [["c"], [1]], is_split_into_words=True)
    with pytest.raises(ValueError, match="Text pairs need `token_type_ids`"):
        tok("a", "b", return_token_type_ids=False)
    with pytest.raises(ValueError, match="truncation='only_second' needs text pairs"):
        tok("a b", truncation="only_second", max_length=1)
    with pytest.raises(ValueError, match="return_overflowing_tokens"):
        tok("a b", return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="padding_side"):
        tok([["a", "b"], ["c"]], is_split_into_words=True, padding=True, padding_side="middle")
    with pytest.raises(ValueError, match="input_ids"):
        tok.pad({"attention_mask": [1, 1]})
    with pytest.raises(ValueError, match="input_ids"):
        tok.pad({"input_ids": [259, 260]})  # 1-D ids are not ELMo ids
    with pytest.raises(ValueError, match="lacks the key"):
        tok.pad([{"input_ids": [[1] * 50], "attention_mask": [1]}, {"input_ids": [[1] * 50]}])
    with pytest.raises(ValueError, match="not a character id"):
        tok.convert_ids_to_tokens(999)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="max_characters_per_token"):
        ElmoTokenizer(max_characters_per_token=2)
    with pytest.raises(TypeError, match="max_characters_per_token"):
        ElmoTokenizer(max_characters_per_token="50")
    with pytest.raises(ValueError, match="pad_token"):
        ElmoTokenizer(pad_token="[PAD]")


@pytest.mark.parametrize("max_length", [-1, "3", 2.5])
def test_max_length_must_be_a_number_of_words(max_length):
    with pytest.raises(ValueError, match="`max_length` must be a number of words >= 0"):
        ElmoTokenizer()("a b c", truncation=True, max_length=max_length)


# ---- character lexicons (ELMoForManyLangs) --------------------------------------------------------------------------
# Expected rows from ELMoForManyLangs' spec: ids shifted by +1; a word's row is [<eow>, chars, <bow>, <pad>...] (its
# crossed markers), cut to max_characters_per_token - 2 characters, unknown characters <oov>, then the word id.
LEXICON_CHARS = ["北", "京", "и", "р", "ب", "É", "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]
LEXICON_WORDS = ["<oov>", "<bos>", "<eos>", "<pad>", "北京", "иррр"]
C = {token: index + 1 for index, token in enumerate(LEXICON_CHARS)}
W = {token: index + 1 for index, token in enumerate(LEXICON_WORDS)}


def lexicon_tokenizer(words: list[str] | None = LEXICON_WORDS) -> ElmoTokenizer:
    return ElmoTokenizer(max_characters_per_token=6, char_lexicon=LEXICON_CHARS, word_lexicon=words)


def test_lexicon_rows_follow_elmoformanylangs():
    rows = lexicon_tokenizer()(["北京", "ирррр", "éx", "<bos>"], is_split_into_words=True)["input_ids"]
    pad = C["<pad>"]
    assert rows[0] == [C["<eow>"], C["北"], C["京"], C["<bow>"], pad, pad, W["北京"]]
    assert rows[1] == [C["<eow>"], C["и"], C["р"], C["р"], C["р"], C["<bow>"], W["иррр"]]  # cut to 4, then looked up
    assert rows[2] == [C["<eow>"], C["<oov>"], C["<oov>"], C["<bow>"], pad, pad, W["<oov>"]]  # no case folding
    assert rows[3] == [C["<eow>"], C["<bos>"], C["<bow>"], pad, pad, pad, W["<bos>"]]  # the boundary token, as EFML
    char_only = lexicon_tokenizer(words=None)(["北京"], is_split_into_words=True)["input_ids"]
    assert char_only == [rows[0][:6]]


def test_lexicon_tokenizer_pads_offsets_decodes_and_round_trips(tmp_path):
    tokenizer = lexicon_tokenizer()
    encoded = tokenizer(["北京 иррр!", "É"], padding=True, return_offsets_mapping=True, return_tensors="pt")
    assert encoded["input_ids"].shape == (2, 3, 7) and not encoded["input_ids"][1, 1:].any()
    assert encoded.word_ids(1) == [0, None, None] and encoded["offset_mapping"][0].tolist() == [[0, 2], [3, 7], [7, 8]]
    assert tokenizer.decode(encoded["input_ids"][0]) == "北京 иррр <oov>"
    tokenizer.save_pretrained(tmp_path)
    for reloaded in (ElmoTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        again = reloaded(["北京 иррр!", "É"], padding=True, return_tensors="pt")
        assert torch.equal(again["input_ids"], encoded["input_ids"])
    assert "char_lexicon" not in json.loads(_saved_config(ElmoTokenizer(), tmp_path / "bytes"))  # bytes: as before


def _saved_config(tokenizer: ElmoTokenizer, folder) -> str:
    tokenizer.save_pretrained(folder)
    return (folder / "tokenizer_config.json").read_text()


def test_lexicon_vocab_names_the_padding_character_char_pad():
    vocab = lexicon_tokenizer().get_vocab()
    assert vocab["<pad>"] == 0 and vocab["<char_pad>"] == C["<pad>"] and vocab["北"] == 1 and len(vocab) == 13


@pytest.mark.parametrize(
    ("chars", "words", "message"),
    [
        (LEXICON_CHARS[:-1], None, "`char_lexicon` lacks '<eow>'"),
        ([*LEXICON_CHARS, "北"], None, "`char_lexicon` holds a token twice"),
        (LEXICON_CHARS, ["<pad>", "a"], "`word_lexicon` lacks '<oov>'"),
        (None, LEXICON_WORDS, "`word_lexicon` needs a `char_lexicon`"),
    ],
)
def test_bad_lexicons_are_refused(chars, words, message):
    with pytest.raises(ValueError, match=message):
        ElmoTokenizer(char_lexicon=chars, word_lexicon=words)


def test_char_ids_tensor_is_the_tokenizers_padded_input_ids(tok):
    """The one words -> padded character-id tensor (`char_ids_tensor`, what AllenNLP's `batch_to_ids` and
    simple_elmo's batcher use) gives the tokenizer's own padded `input_ids` (an empty sentence: all padding)."""
    from modeling_elmo.allennlp import batch_to_ids
    from modeling_elmo.tokenization_elmo import cached_char_ids, char_ids_tensor

    sentences = [["Hello", "wörld", "<S>", "x" * 80], [], ["</S>"]]
    expected = allennlp_character_ids(sentences)  # issue 46: written from AllenNLP's rules, not with our code
    assert torch.equal(
        tok(sentences, is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"], expected
    )
    assert torch.equal(char_ids_tensor(sentences, 50, cached_char_ids), expected)
    assert torch.equal(batch_to_ids(sentences), expected)


def allennlp_character_ids(sentences: list[list[str]], width: int = 50) -> torch.Tensor:
    """AllenNLP's `ELMoCharacterMapper` by its rules: a word is begin-of-word (258), its UTF-8 bytes (at most
    width - 2), end-of-word (259), then padding (260); `<S>` and `</S>` are the bytes 256 and 257; every id + 1, and
    0 where a sentence has no word."""
    ids = torch.zeros(len(sentences), max(map(len, sentences)), width, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        for column, word in enumerate(sentence):
            body = {"<S>": [256], "</S>": [257]}.get(word) or list(word.encode("utf-8"))[: width - 2]
            characters = [258, *body, 259] + [260] * (width - 2 - len(body))
            ids[row, column] = torch.tensor(characters) + 1
    return ids
