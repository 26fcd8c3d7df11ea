"""`elmo-pretrain` end to end on tiny corpora: memorisation, exact resumption, the output folder, options as
defaults, continued pretraining, two processes, and refusals."""

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
import torch
from pretraining_inputs import SENTENCES, command, write_options
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForPreTraining

from modeling_elmo import ElmoForPreTraining, ElmoModel
from modeling_elmo.pretraining.options import PretrainingOptions
from modeling_elmo.pretraining.train import main, parse_arguments


def test_a_tiny_model_memorises_a_tiny_corpus(corpus):
    output = corpus["dir"] / "out"
    args = command(corpus, output, "--do_train", "--do_eval", "--eval_files", str(corpus["eval"]))
    assert main(args + ["--max_steps", "160", "--learning_rate", "0.01", "--full_softmax", "true"]) == 0
    results = json.loads((output / "eval_results.json").read_text())
    # Untrained, the perplexity is about the vocabulary size (35). Training streams sentences with the states of the
    # previous ones carried over (its loss ends near 0.08, perplexity 1.08); the sentence-level protocol starts each
    # sentence from zero states, a state seen only at the start of training, so it stays higher (1.7 measured).
    assert results["eval_perplexity"] < 2.5, results
    assert results["eval_perplexity_forward"] < 3 and results["eval_perplexity_backward"] < 3
    assert results["eval_num_sentences"] == 4 and results["eval_num_predictions"] == sum(
        len(s.split()) + 1 for s in SENTENCES
    )


def test_the_output_folder_is_complete(corpus):
    output = corpus["dir"] / "out"
    evaluation = ["--do_eval", "--eval_files", str(corpus["eval"]), "--eval_strategy", "steps", "--eval_steps", "2"]
    assert main(command(corpus, output, "--do_train", *evaluation, "--max_steps", "3")) == 0
    history = json.loads((output / "train_results.json").read_text())
    assert history["epoch"] > 0
    curve = [
        entry
        for entry in json.loads((output / "trainer_state.json").read_text())["log_history"]
        if "eval_perplexity" in entry
    ]
    assert [entry["step"] for entry in curve][:1] == [2]  # evaluated during training too
    assert (output / "vocab.txt").read_text() == corpus["vocab"].read_text()
    config = json.loads((output / "config.json").read_text())
    assert config["architectures"] == ["ElmoForPreTraining"] and config["lm_vocab_size"] == corpus["size"]
    assert config["max_characters_per_token"] == 16
    card = (output / "README.md").read_text()
    assert "eval_perplexity" in card and '"unroll_steps": 8' in card and "elmo-export" in card
    assert "Corpus size: not counted" in card  # --max_steps given: the corpus was not read for its size
    assert isinstance(AutoModel.from_pretrained(output), ElmoModel)
    pretraining = AutoModelForPreTraining.from_pretrained(output)
    assert isinstance(pretraining, ElmoForPreTraining)
    assert (output / "tokenizer_config.json").is_file()

    # bilm-tf's format out: elmo-export, then elmo-convert reads it back to the same biLM
    from modeling_elmo.conversion.convert_command import main as convert
    from modeling_elmo.conversion.export import main as export

    assert export([str(output), "--output", str(corpus["dir"] / "original")]) == 0
    with h5py.File(corpus["dir"] / "original" / "softmax.hdf5", "r") as handle:
        assert torch.equal(torch.from_numpy(handle["W"][...]), pretraining.softmax.weight.detach())
        assert torch.equal(torch.from_numpy(handle["b"][...]), pretraining.softmax.bias.detach())
    original = corpus["dir"] / "original"
    reconverted = corpus["dir"] / "reconverted"
    assert convert(["--options", str(original / "options.json"), "--weights", str(original / "lm_weights.hdf5"),
                    "--output", str(reconverted)]) == 0  # fmt: skip
    state = AutoModel.from_pretrained(reconverted).state_dict()
    assert all(torch.equal(value, state[name]) for name, value in pretraining.elmo.state_dict().items())


def test_resumed_training_continues_exactly(corpus):
    """Same data stream, random states and carried LSTM states: bit-identical to an uninterrupted run."""
    straight, resumed = corpus["dir"] / "straight", corpus["dir"] / "resumed"
    checkpoints = ["--save_strategy", "steps", "--save_steps", "4", "--max_steps", "8", "--do_train"]
    assert main(command(corpus, straight, *checkpoints)) == 0
    checkpoint = straight / "checkpoint-4"
    assert (checkpoint / "stream_states_0.pt").is_file()
    assert main(command(corpus, resumed, *checkpoints, "--resume_from_checkpoint", str(checkpoint))) == 0
    expected, actual = load_file(straight / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[name], actual[name]) for name in expected)
    zero_states = command(corpus, corpus["dir"] / "zero", *checkpoints, "--resume_from_checkpoint", str(checkpoint))
    (checkpoint / "stream_states_0.pt").unlink()  # without the carried states the run differs
    assert main(zero_states) == 0
    different = load_file(corpus["dir"] / "zero" / "model.safetensors")
    assert not all(torch.equal(expected[name], different[name]) for name in expected)


def test_options_are_defaults_and_flags_win(corpus):
    output = str(corpus["dir"] / "out")
    args, training_args, options = parse_arguments(command(corpus, Path(output)))
    assert training_args.per_device_train_batch_size == 4 and training_args.num_train_epochs == 1
    assert training_args.max_grad_norm == pytest.approx(10.0 / 8)  # bilm-tf clips the gradient of loss * unroll
    args, training_args, _ = parse_arguments(
        command(corpus, Path(output), "--per_device_train_batch_size", "2", "--max_grad_norm=1", "--unroll_steps", "5")
    )
    assert training_args.per_device_train_batch_size == 2 and training_args.max_grad_norm == 1.0
    assert args.unroll_steps == 5


def test_continued_pretraining_keeps_the_biLM_while_the_new_softmax_warms_up(corpus, tmp_path):
    start = tmp_path / "start"
    options = json.loads(corpus["options"].read_text())
    torch.manual_seed(0)
    body = ElmoModel(PretrainingOptions.from_dict(options).config)
    body.save_pretrained(start)
    output = tmp_path / "continued"
    args = command(corpus, output, "--do_train", "--model_name_or_path", str(start), "--max_steps", "4")
    assert main(args + ["--softmax_warmup_steps", "4"]) == 0
    trained = load_file(output / "model.safetensors")
    for name, value in body.state_dict().items():
        assert torch.equal(trained[f"elmo.{name}"], value), name  # held during the warm-up
    assert main(command(corpus, tmp_path / "after", "--do_train", "--model_name_or_path", str(start),
                        "--max_steps", "2", "--softmax_warmup_steps", "0")) == 0  # fmt: skip
    moved = load_file(tmp_path / "after" / "model.safetensors")
    assert not torch.equal(moved["elmo.bilm.layers.0.weight_hh"], body.state_dict()["bilm.layers.0.weight_hh"])


@pytest.mark.parametrize(
    "case, expected",
    [
        ("vocab size", "n_tokens_vocab"),
        ("eval without files", "--eval_files"),
        ("no train files", "--train_files: no file matches"),
        ("architecture", "disagree on the architecture: lstm_cell_size"),
        ("other vocabulary", "another vocabulary"),
        ("resume with another vocabulary", "Cannot resume from"),
        ("empty corpus", "the corpus is empty"),
        ("zero unroll", "--unroll_steps must be an integer >= 1, got 0"),
        ("zero eval batch", "--eval_batch_sentences must be an integer >= 1, got 0"),
        ("negative warm-up", "--softmax_warmup_steps must be an integer >= 0, got -1"),
        ("NaN dropout", "--dropout must be in [0, 1), got nan"),
    ],
)
def test_bad_inputs_are_refused_with_one_clear_line(corpus, tmp_path, capsys, case, expected):
    output = tmp_path / "out"
    args = command(corpus, output, "--do_train", "--max_steps", "1")
    if case == "vocab size":
        write_options(corpus["options"], corpus["size"] + 1)
    elif case == "eval without files":
        args += ["--do_eval"]
    elif case == "no train files":
        args[args.index("--train_files") + 1] = str(tmp_path / "missing" / "*.txt")
    elif case == "architecture":
        config = PretrainingOptions.from_dict(json.loads(corpus["options"].read_text())).config
        config.lstm_cell_size = 8
        ElmoModel(config).save_pretrained(tmp_path / "m")
        args += ["--model_name_or_path", str(tmp_path / "m")]
    elif case == "other vocabulary":
        assert main(command(corpus, tmp_path / "first", "--do_train", "--max_steps", "1")) == 0
        other = tmp_path / "other.txt"
        other.write_text(corpus["vocab"].read_text().replace("fox", "wolf"))
        args[args.index("--vocab_file") + 1] = str(other)
        args += ["--model_name_or_path", str(tmp_path / "first")]
    elif case == "resume with another vocabulary":
        saving = ["--save_strategy", "steps", "--save_steps", "2"]
        first = command(corpus, output, "--do_train", "--max_steps", "2", *saving)
        assert main(first) == 0
        (output / "model.safetensors").unlink()
        other = tmp_path / "other.txt"
        other.write_text(corpus["vocab"].read_text().replace("fox", "wolf"))
        args[args.index("--vocab_file") + 1] = str(other)
        args += ["--resume_from_checkpoint", str(output / "checkpoint-2")]
    elif case == "empty corpus":
        (tmp_path / "empty.txt").write_text("\n  \n")
        args[args.index("--train_files") + 1] = str(tmp_path / "empty.txt")
    elif case == "zero unroll":
        args += ["--unroll_steps", "0"]
    elif case == "zero eval batch":
        args += ["--eval_batch_sentences", "0"]
    elif case == "negative warm-up":
        args += ["--softmax_warmup_steps", "-1"]
    elif case == "NaN dropout":
        args += ["--dropout", "nan"]
    capsys.readouterr()
    assert main(args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and expected in error[0], error
    assert not (output / "model.safetensors").exists()


@pytest.mark.integration
def test_two_processes_train_with_ddp_each_on_its_own_shards(corpus):
    output = corpus["dir"] / "ddp"
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29531",
         "-m", "modeling_elmo.pretraining.train",
         *command(corpus, output, "--do_train", "--max_steps", "3", "--do_eval", "--eval_files", str(corpus["eval"]))],
        capture_output=True, text=True, env=environment, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads((output / "train_results.json").read_text())
    assert state["epoch"] > 0
    arguments = torch.load(output / "training_args.bin", weights_only=False)
    assert arguments.world_size == 2 and arguments.parallel_mode.value == "distributed"
    assert json.loads((output / "eval_results.json").read_text())["eval_num_sentences"] == 4
