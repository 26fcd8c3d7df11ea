"""`elmo-pretrain`'s command line (issue 31): every flag and the subcommand in `--help`; no traceback on an unknown
flag, a bad `TrainingArguments` value, a damaged checkpoint or sizes that cannot fit in memory; one live run per
`--output_dir`."""

import fcntl
import os
import signal
import subprocess
import sys

import pytest
from pretraining_inputs import command, write_options

from modeling_elmo.foundation.owned_files import claim_file
from modeling_elmo.pretraining.train import main

SAVING = ["--save_strategy", "steps", "--save_steps", "2"]


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("elmo-pretrain: error: "), error
    return error[0]


def test_help_lists_every_flag_the_command_takes_and_its_subcommand(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0
    shown = capsys.readouterr().out
    for flag in ("--options", "--output_dir", "--do_eval", "--do_train", "--eval_strategy", "--save_steps", "--seed"):
        assert f"  {flag} " in shown, flag
    assert "elmo-pretrain build-vocab" in shown
    assert "options.json's batch_size" in shown  # the default this command gives a Trainer flag
    assert "(default: None)" not in shown


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--bogus_flag", "3"], "unrecognized arguments: --bogus_flag 3"),
        (["--logging_steps", "0"], "requires non-zero --logging_steps"),
        (["--warmup_steps", "-5"], "warmup_steps >= 0"),
        (["--max_steps", "many"], "--max-steps: invalid int value: 'many'"),
    ],
)
def test_argument_errors_are_one_line_and_exit_2(corpus, capsys, flags, expected):
    with pytest.raises(SystemExit) as stop:
        main(command(corpus, corpus["dir"] / "out", *flags))
    assert stop.value.code == 2
    assert expected in one_line_error(capsys)
    assert not (corpus["dir"] / "out").exists()


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--seed", "-1"], "--seed must be an integer from 0 to 4294967295, got -1"),
        (["--data_seed", str(2**32)], "--data_seed must be an integer from 0 to 4294967295, got 4294967296"),
        (["--adam_beta2", "1.5"], "--adam_beta2 must be in [0, 1), got 1.5"),
        (["--eval_strategy", "steps", "--eval_steps", "-1"], "--eval_steps must be a positive number"),
        (["--n_negative_samples_batch", "1000"], "--n_negative_samples_batch 1000 is larger than the vocabulary"),
        (["--per_device_train_batch_size", "100000000000"], "needs at least"),
        (["--model_name_or_path", "elmo-fixtur"], "--model_name_or_path elmo-fixtur: no ELMo model there (no such"),
    ],
)
def test_values_the_trainer_would_fail_on_are_refused_in_one_line(corpus, capsys, flags, expected):
    output = corpus["dir"] / "out"
    assert main(command(corpus, output, "--max_steps", "1", *flags)) == 2
    assert expected in one_line_error(capsys)
    assert not (output / "model.safetensors").exists()


def test_a_model_too_large_for_memory_is_refused_before_allocating(corpus, capsys):
    lstm = {"cell_clip": 3, "dim": 10**8, "n_layers": 2, "proj_clip": 3, "projection_dim": 24}
    options = write_options(corpus["dir"] / "huge.json", corpus["size"], lstm={**lstm, "use_skip_connections": True})
    argv = command(corpus, corpus["dir"] / "out", "--max_steps", "1", "--options", str(options))
    assert main(argv) == 2
    line = one_line_error(capsys)
    assert "needs at least" in line and "GiB" in line and "parameters" in line, line


@pytest.fixture
def checkpoint(corpus):
    """A complete checkpoint (`checkpoint-2` of a 2-step run with saving) to damage."""
    output = corpus["dir"] / "first"
    assert main(command(corpus, output, "--max_steps", "2", *SAVING)) == 0
    return output / "checkpoint-2"


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda folder: (folder / "stream_states_0.pt").write_bytes(b"garbage"), "stream_states_0.pt is damaged"),
        (lambda folder: (folder / "model.safetensors").unlink(), "no model.safetensors"),
        (lambda folder: _truncate(folder / "model.safetensors"), "model.safetensors is damaged or cut short"),
        (lambda folder: _truncate(folder / "optimizer.pt"), "optimizer.pt is damaged"),
    ],
    ids=["garbage stream states", "missing weights", "truncated weights", "truncated optimizer"],
)
def test_a_damaged_checkpoint_is_refused_naming_the_file(corpus, checkpoint, capsys, damage, expected):
    damage(checkpoint)
    output = corpus["dir"] / "resumed"
    assert main(command(corpus, output, "--max_steps", "4", "--resume_from_checkpoint", str(checkpoint))) == 2
    line = one_line_error(capsys)
    assert expected in line and str(checkpoint) in line, line
    assert not (output / "model.safetensors").exists()


def _truncate(path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_stream_states_of_another_shape_are_refused(corpus, checkpoint, capsys):
    import torch

    torch.save([(torch.zeros(2, 3, 24), torch.zeros(2, 3, 48))], checkpoint / "stream_states_0.pt")
    assert main(command(corpus, corpus["dir"] / "resumed", "--max_steps", "4", "--resume_from_checkpoint",
                        str(checkpoint))) == 2  # fmt: skip
    assert "does not hold the LSTM states of 2 layers" in one_line_error(capsys)


def test_an_output_dir_in_use_by_a_live_run_is_refused(corpus, capsys):
    output = corpus["dir"] / "out"
    output.mkdir()
    descriptor = os.open(claim_file(output), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # stands for the live run: the output's one claim
        assert main(command(corpus, output, "--max_steps", "1")) == 2
    finally:
        os.close(descriptor)
    assert f"--output_dir {output} is in use by another running elmo-pretrain" in one_line_error(capsys)
    assert list(output.iterdir()) == []


HOLD_THE_LOCK = """
import sys, time
from modeling_elmo.foundation.output_lock import locked_output_dir
with locked_output_dir(sys.argv[1], "elmo-pretrain"):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.mark.integration
def test_a_killed_run_leaves_no_lock_behind(corpus):
    output = corpus["dir"] / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(output)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(command(corpus, output, "--max_steps", "1")) == 2
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert main(command(corpus, output, "--max_steps", "1")) == 0  # the kernel released the lock with the process
    assert (output / "model.safetensors").is_file()
