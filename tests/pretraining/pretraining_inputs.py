"""Inputs of `elmo-pretrain` runs for the tests: a tiny corpus, its vocabulary, bilm-tf-style options with tiny
dimensions, and the command line that trains on them."""

import json
from pathlib import Path

from modeling_elmo.pretraining import build_vocab

SENTENCES = [
    "the quick brown fox jumps over a lazy dog .",
    "my cat sleeps on warm stones all day",
    "rivers run down to an open sea",
    "seven old sailors sing loud songs tonight !",
]
COMMON = ["--report_to", "none", "--disable_tqdm", "true", "--logging_steps", "5", "--save_strategy", "no"]


def write_options(path: Path, n_tokens_vocab: int, **overrides) -> Path:
    options = {
        "bidirectional": True,
        "char_cnn": {
            "activation": "relu",
            "embedding": {"dim": 4},
            "filters": [[1, 8], [2, 8], [3, 16]],
            "max_characters_per_token": 16,
            "n_characters": 261,
            "n_highway": 1,
        },
        "dropout": 0.0,
        "lstm": {
            "cell_clip": 3,
            "dim": 48,
            "n_layers": 2,
            "proj_clip": 3,
            "projection_dim": 24,
            "use_skip_connections": True,
        },
        "all_clip_norm_val": 10.0,
        "n_epochs": 1,
        "batch_size": 4,
        "n_tokens_vocab": n_tokens_vocab,
        "unroll_steps": 8,
        "n_negative_samples_batch": 8,
        **overrides,
    }
    path.write_text(json.dumps(options))
    return path


def make_corpus(tmp_path: Path) -> dict[str, Path]:
    """A tiny corpus (the 4 sentences, 30 times, in 2 shards), its vocabulary and options."""
    (tmp_path / "corpus").mkdir()
    for shard in range(2):
        (tmp_path / "corpus" / f"shard{shard}.txt").write_text("\n".join(SENTENCES * 15) + "\n")
    (tmp_path / "heldout.txt").write_text("\n".join(SENTENCES) + "\n")
    vocab = tmp_path / "vocab.txt"
    assert build_vocab.main(["--train_files", str(tmp_path / "corpus" / "*.txt"), "--output", str(vocab)]) == 0
    size = len(vocab.read_text().splitlines())
    return {
        "dir": tmp_path,
        "train": tmp_path / "corpus" / "*.txt",
        "eval": tmp_path / "heldout.txt",
        "vocab": vocab,
        "size": size,
        "options": write_options(tmp_path / "options.json", size),
    }


def command(corpus: dict, output: Path, *extra: str) -> list[str]:
    return [
        "--options", str(corpus["options"]), "--vocab_file", str(corpus["vocab"]),
        "--train_files", str(corpus["train"]), "--output_dir", str(output), *COMMON, *extra,
    ]  # fmt: skip
