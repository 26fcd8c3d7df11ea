"""What an `elmo-pretrain` run does by default and what it writes: the README's command trains, an evaluation-only
run says so and writes no model, and the card reports what happened."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pretraining_inputs import command, write_options
from transformers import AutoModel

from modeling_elmo import ElmoForPreTraining, ElmoModel
from modeling_elmo.pretraining.options import PretrainingOptions
from modeling_elmo.pretraining.train import EVALUATION_ONLY, main, parse_arguments

REPETITIVE = ["the cat sat on the mat .", "a dog ran to the park ."]
UNUSED_WORDS = [f"unused{index}" for index in range(40)]  # in the vocabulary, never in the corpus
README_COMMAND = [
    "--options", "options.json", "--vocab_file", "vocab.txt", "--train_files", "corpus/*.txt",
    "--output_dir", "my-elmo", "--do_eval", "--eval_files", "heldout/*.txt",
]  # fmt: skip


@pytest.fixture
def readme_inputs(tmp_path, monkeypatch) -> Path:
    """The README example's relative inputs in the working folder: bilm-tf-style options (tiny dimensions, the full
    softmax), a vocabulary with 40 words the corpus never uses, a repetitive corpus of 160 positions and its held-out
    copy. 6 epochs of 160 positions in batches of 2 x 8: 60 steps."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "heldout").mkdir()
    (tmp_path / "corpus" / "shard.txt").write_text("\n".join(REPETITIVE * 10) + "\n")
    (tmp_path / "heldout" / "heldout.txt").write_text("\n".join(REPETITIVE) + "\n")
    words = sorted({word for sentence in REPETITIVE for word in sentence.split()})
    tokens = ["<S>", "</S>", "<UNK>", *words, *UNUSED_WORDS]
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    lstm = {
        "cell_clip": 3,
        "dim": 64,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 64,
        "use_skip_connections": True,
    }
    write_options(
        tmp_path / "options.json",
        len(tokens),
        lstm=lstm,
        n_epochs=6,
        batch_size=2,
        unroll_steps=8,
        sample_softmax=False,
    )
    return tmp_path


def test_the_readme_command_trains_without_do_train(readme_inputs):
    assert main(README_COMMAND + ["--report_to", "none", "--disable_tqdm", "true"]) == 0
    output = readme_inputs / "my-elmo"
    assert (output / "config.json").is_file() and (output / "model.safetensors").is_file()
    assert isinstance(AutoModel.from_pretrained(output), ElmoModel)
    vocab_size = len((readme_inputs / "vocab.txt").read_text().split())
    perplexity = json.loads((output / "eval_results.json").read_text())["eval_perplexity"]
    # untrained, about the vocabulary size (54); 60 steps bring it near the 11 words the corpus uses
    assert perplexity < vocab_size / 2, perplexity
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] == 60
    card = (output / "README.md").read_text()
    steps = int(re.search(r"Optimizer steps trained: ([\d,]+)\.", card).group(1).replace(",", ""))
    positions = int(re.search(r"Input positions seen in training \(.*\): ([\d,]+)\.", card).group(1).replace(",", ""))
    assert steps == state["global_step"]
    assert positions == state["global_step"] * state["train_batch_size"] * 8


def test_the_card_counts_the_steps_done_when_resuming_and_accumulating(corpus, tmp_path):
    """Positions per step include gradient accumulation; a resumed run's steps are the Trainer's, not a plan."""
    first = tmp_path / "first"
    saving = ["--save_strategy", "steps", "--save_steps", "2", "--gradient_accumulation_steps", "2"]
    assert main(command(corpus, first, "--max_steps", "2", *saving)) == 0
    (first / "README.md").unlink()
    assert main(command(corpus, first, "--max_steps", "3", *saving, "--resume_from_checkpoint", "last")) == 0
    card = (first / "README.md").read_text()
    assert "Optimizer steps trained: 3." in card
    assert f"): {3 * 4 * 8 * 2:,}." in card  # steps x batch 4 x unroll 8 x accumulation 2


@pytest.fixture
def saved_model(corpus, tmp_path) -> Path:
    """An `ElmoForPreTraining` folder (random weights) with the corpus's vocabulary, as a finished run leaves it."""
    config = PretrainingOptions.from_dict(json.loads(corpus["options"].read_text())).config
    torch.manual_seed(0)
    folder = tmp_path / "model"
    ElmoForPreTraining(config).save_pretrained(folder)
    shutil.copy(corpus["vocab"], folder / "vocab.txt")
    return folder


@pytest.mark.integration
def test_evaluation_only_says_so_first_and_writes_no_model(corpus, saved_model, tmp_path):
    output = tmp_path / "evaluation"
    result = subprocess.run(
        [sys.executable, "-m", "modeling_elmo.pretraining.train", "--do_train", "False", "--do_eval",
         "--options", str(corpus["options"]), "--vocab_file", str(corpus["vocab"]),
         "--model_name_or_path", str(saved_model), "--eval_files", str(corpus["eval"]), "--output_dir", str(output),
         "--report_to", "none", "--disable_tqdm", "true"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert EVALUATION_ONLY in result.stderr.splitlines()[0], result.stderr[:1000]
    assert json.loads((output / "eval_results.json").read_text())["eval_num_sentences"] == 4
    written = {path.name for path in output.iterdir()}
    assert not written & {"README.md", "config.json", "model.safetensors", "trainer_state.json"}, written


@pytest.mark.parametrize(
    "flags, trains",
    [
        ([], True),
        (["--do_train"], True),
        (["--do_train", "true"], True),
        (["--do_train", "False"], False),
        (["--do_train=false"], False),
        (["--do-train", "False"], False),  # the dashed spelling argparse accepts too
    ],
)
def test_training_is_the_default_and_only_do_train_false_turns_it_off(corpus, tmp_path, flags, trains):
    argv = command(corpus, tmp_path / "out", *flags)
    argv[argv.index("--output_dir")] = "--output-dir"
    _, training_args, _ = parse_arguments(argv)
    assert training_args.do_train is trains
    assert training_args.output_dir == str(tmp_path / "out")
