"""bilm-tf's training options JSON -> `PretrainingOptions`: every check, the config, the layout written back."""

import copy
import json

import pytest
import torch

from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.configuration_elmo import ElmoConfig
from modeling_elmo.formats.vocab import LmVocabulary
from modeling_elmo.pretraining.options import PretrainingOptions, PretrainingOptionsError, read_pretraining_options
from modeling_elmo.pretraining.streams import LmStreamDataset

# bilm-tf's bin/train_elmo.py, with the 1B Word Benchmark's vocabulary size
TRAIN_ELMO = {
    "bidirectional": True,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 16},
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "max_characters_per_token": 50,
        "n_characters": 261,
        "n_highway": 2,
    },
    "dropout": 0.1,
    "lstm": {
        "cell_clip": 3,
        "dim": 4096,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 512,
        "use_skip_connections": True,
    },
    "all_clip_norm_val": 10.0,
    "n_epochs": 10,
    "n_train_tokens": 768648884,
    "batch_size": 128,
    "n_tokens_vocab": 793471,
    "unroll_steps": 20,
    "n_negative_samples_batch": 8192,
}


def changed(key: str, value) -> dict:
    """TRAIN_ELMO with the dotted `key` set to `value` (or removed, for `...`)."""
    options = copy.deepcopy(TRAIN_ELMO)
    *parents, last = key.split(".")
    section = options
    for parent in parents:
        section = section[parent]
    if value is ...:
        del section[last]
    else:
        section[last] = value
    return options


def test_bilm_tf_training_options():
    options = PretrainingOptions.from_dict(TRAIN_ELMO, "options.json")
    assert (options.batch_size, options.unroll_steps, options.n_epochs) == (128, 20, 10)
    assert (options.dropout, options.all_clip_norm_val, options.n_train_tokens) == (0.1, 10.0, 768648884)
    assert (options.n_negative_samples_batch, options.n_tokens_vocab, options.n_characters) == (8192, 793471, 261)
    assert options.sample_softmax is True
    config = options.config
    assert isinstance(config, ElmoConfig)
    assert (config.lstm_cell_size, config.projection_dim, config.num_hidden_layers) == (4096, 512, 2)
    assert (config.cell_clip, config.proj_clip, config.use_skip_connections) == (3, 3, True)
    assert config.char_filters == TRAIN_ELMO["char_cnn"]["filters"]
    assert (config.num_highway_layers, config.char_activation, config.char_vocab_size) == (2, "relu", 262)
    assert options.max_characters_per_token == config.max_characters_per_token == 50
    assert config.lm_vocab_size == 793471
    assert config.lm_dropout == 0.1
    assert config.lm_num_negative_samples == 8192


def test_to_dict_gives_bilm_tf_layout_back():
    options = PretrainingOptions.from_dict(TRAIN_ELMO, "options.json")
    assert options.to_dict() == TRAIN_ELMO
    again = PretrainingOptions.from_dict(json.loads(json.dumps(options.to_dict())), "again")
    assert again.to_dict() == TRAIN_ELMO
    minimal = changed("bidirectional", ...)
    for key in ("n_train_tokens", "lstm.cell_clip", "lstm.proj_clip"):
        minimal = {**minimal, "lstm": dict(minimal["lstm"])}
        section, _, last = key.rpartition(".")
        (minimal[section] if section else minimal).pop(last)
    written = PretrainingOptions.from_dict(minimal, "minimal").to_dict()
    assert written == {**minimal, "bidirectional": True}
    assert written["lstm"].keys() == {"dim", "n_layers", "projection_dim", "use_skip_connections"}


def test_read_from_file(tmp_path):
    path = tmp_path / "options.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(TRAIN_ELMO).encode())
    assert read_pretraining_options(path).to_dict() == TRAIN_ELMO


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[1, 2]", "the training options must be a JSON object, got \\[1, 2\\]"),
    ],
)
def test_unreadable_files(tmp_path, content, message):
    path = tmp_path / "options.json"
    path.write_bytes(content)
    with pytest.raises(PretrainingOptionsError, match=f"{path}: {message}"):
        read_pretraining_options(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(PretrainingOptionsError, match="options file not found"):
        read_pretraining_options(tmp_path / "nope.json")
    with pytest.raises(PretrainingOptionsError, match="is a directory"):
        read_pretraining_options(tmp_path)


@pytest.mark.parametrize(
    "key",
    [
        "dropout",
        "all_clip_norm_val",
        "n_epochs",
        "batch_size",
        "unroll_steps",
        "n_negative_samples_batch",
        "n_tokens_vocab",
        "lstm.dim",
        "lstm.projection_dim",
        "lstm.n_layers",
        "char_cnn.filters",
        "char_cnn.n_characters",
        "char_cnn.max_characters_per_token",
        "char_cnn.embedding.dim",
        "char_cnn.activation",
    ],
)
def test_missing_keys_are_named(tmp_path, key):
    path = tmp_path / "options.json"
    path.write_text(json.dumps(changed(key, ...)))
    with pytest.raises(PretrainingOptionsError, match=rf"^{path}: missing key '{key}'"):
        read_pretraining_options(path)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("unroll_steps", "x", 'unroll_steps must be a positive integer, got "x"'),
        ("unroll_steps", 0, "unroll_steps must be a positive integer, got 0"),
        ("batch_size", True, "batch_size must be a positive integer, got true"),
        ("batch_size", 128.0, "batch_size must be a positive integer, got 128.0"),
        ("n_epochs", None, "n_epochs must be a positive integer, got null"),
        ("dropout", 1, "dropout must be a number from 0 up to \\(not including\\) 1, got 1"),
        ("dropout", -0.1, "dropout must be a number from 0"),
        ("dropout", "0.1", "dropout must be a number from 0"),
        ("all_clip_norm_val", 0, "all_clip_norm_val must be a positive number, got 0"),
        ("all_clip_norm_val", float("nan"), "all_clip_norm_val must be a positive number, got NaN"),
        ("n_tokens_vocab", 2, "n_tokens_vocab must be an integer >= 3"),
        ("n_train_tokens", 0, "n_train_tokens must be a positive integer or null, got 0"),
        ("n_negative_samples_batch", [8192], "n_negative_samples_batch must be a positive integer"),
        ("bidirectional", "true", 'bidirectional must be a boolean, got "true"'),
        ("sample_softmax", 1, "sample_softmax must be a boolean, got 1"),
        ("lstm.use_skip_connections", 1, "lstm.use_skip_connections must be a boolean, got 1"),
        ("lstm.cell_clip", -1, "lstm.cell_clip must be a positive number or null, got -1"),
        ("lstm.dim", 4096.0, "lstm.dim must be a positive integer, got 4096.0"),
        ("lstm", [], "lstm must be a JSON object"),
        ("char_cnn.n_characters", 260, "char_cnn.n_characters must be 261 or 262, got 260"),
        ("char_cnn.activation", "gelu", "char_cnn.activation must be one of 'relu', 'tanh'"),
        ("char_cnn.max_characters_per_token", 6, "char_cnn.max_characters_per_token must be at least 7"),
    ],
)
def test_wrong_values_are_named(key, value, message):
    with pytest.raises(PretrainingOptionsError, match=f"^options.json: {message}"):
        PretrainingOptions.from_dict(changed(key, value), "options.json")


def test_the_brief_example_message():
    with pytest.raises(PretrainingOptionsError) as error:
        PretrainingOptions.from_dict(changed("unroll_steps", "x"), "options.json")
    assert str(error.value) == 'options.json: unroll_steps must be a positive integer, got "x"'


@pytest.mark.parametrize("n_characters", [261, 262])
def test_n_characters_261_or_262(n_characters):
    options = PretrainingOptions.from_dict(changed("char_cnn.n_characters", n_characters))
    assert options.n_characters == n_characters
    assert options.config.char_vocab_size == 262
    assert options.to_dict()["char_cnn"]["n_characters"] == n_characters


def test_unidirectional_and_token_input_options_are_refused():
    with pytest.raises(
        PretrainingOptionsError, match="bidirectional is false, but elmo-pretrain trains bidirectional"
    ):
        PretrainingOptions.from_dict(changed("bidirectional", False), "o.json")
    assert PretrainingOptions.from_dict(changed("bidirectional", ...)).to_dict()["bidirectional"] is True
    with pytest.raises(PretrainingOptionsError, match="o.json: no 'char_cnn' section: .* token-input"):
        PretrainingOptions.from_dict(changed("char_cnn", ...), "o.json")
    with pytest.raises(PretrainingOptionsError, match="share_embedding_softmax must be false"):
        PretrainingOptions.from_dict(changed("share_embedding_softmax", True), "o.json")
    PretrainingOptions.from_dict(changed("share_embedding_softmax", False))


def test_negatives_and_full_softmax():
    small = changed("n_tokens_vocab", 8192)
    assert PretrainingOptions.from_dict(small).config.lm_num_negative_samples == 8192  # all classes: allowed
    with pytest.raises(PretrainingOptionsError, match=r"n_negative_samples_batch \(8192\) must not exceed n_tokens"):
        PretrainingOptions.from_dict({**small, "n_tokens_vocab": 8191}, "o.json")
    full = {**changed("n_negative_samples_batch", ...), "sample_softmax": False, "n_tokens_vocab": 100}
    options = PretrainingOptions.from_dict(full)
    assert options.n_negative_samples_batch is None
    assert options.config.lm_num_negative_samples is None
    assert options.to_dict() == full
    with pytest.raises(PretrainingOptionsError, match="missing key 'n_negative_samples_batch'"):
        PretrainingOptions.from_dict(changed("n_negative_samples_batch", ...))


def test_max_characters_per_token_other_than_50_reaches_the_batches(tmp_path):
    options = changed("char_cnn.max_characters_per_token", 9)
    options["char_cnn"]["filters"] = [[1, 4], [3, 8]]
    options.update(n_tokens_vocab=5, n_negative_samples_batch=5, batch_size=1, unroll_steps=5)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    parsed = read_pretraining_options(path)
    assert parsed.max_characters_per_token == 9
    vocab = LmVocabulary(["<S>", "</S>", "<UNK>", "short", "Zürich"])
    vocab.check_size(parsed.n_tokens_vocab, str(path))
    sentence = ["short", "Zürich", "extraordinarily", "日本語"]  # the long words are cut at 9 - 2 bytes
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(sentence) + "\n", encoding="utf-8")
    dataset = LmStreamDataset(
        [corpus], vocab, parsed.batch_size, parsed.unroll_steps, parsed.max_characters_per_token, num_passes=1
    )
    (batch,) = list(dataset)
    assert batch["input_ids"].shape == (1, 5, 9)
    expected = [[word_to_char_ids(word, 9) for word in ["<S>", *sentence]]]
    assert torch.equal(batch["input_ids"], torch.tensor(expected))
    assert torch.equal(
        batch["backward_input_ids"], torch.tensor([[word_to_char_ids(w, 9) for w in ["</S>", *sentence[::-1]]]])
    )
    assert bytes(v - 1 for v in batch["input_ids"][0, 3, 1:8].tolist()) == b"extraor"
    model_config = parsed.config
    assert model_config.max_characters_per_token == 9
