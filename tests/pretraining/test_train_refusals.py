"""`elmo-pretrain` under unlucky or hostile inputs: every case either runs right or stops with one line
`elmo-pretrain: error: ...` (exit 2) naming the flag, file or folder, and leaves no model behind."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from pretraining_inputs import command, write_options
from safetensors.torch import load_file
from transformers import AutoModel

from modeling_elmo import ElmoForPreTraining, ElmoModel, ElmoQuantizationConfig
from modeling_elmo.foundation.folder_record import FOLDER_RECORD, read_record, unlisted_entries
from modeling_elmo.pretraining.options import PretrainingOptions
from modeling_elmo.pretraining.train import ElmoPretrainingTrainer, main

SAVING = ["--save_strategy", "steps", "--save_steps", "2"]


def refused(capsys, argv: list[str], expected: str) -> str:
    """Run `argv`, check the one-line refusal (exit 2) holds `expected`; return the line."""
    capsys.readouterr()
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("elmo-pretrain: error: ") and expected in error[0], error
    return error[0]


def no_model_in(output: Path) -> bool:
    return not (output / "model.safetensors").exists() and not (output / "README.md").exists()


def save_model(corpus: dict, folder: Path, with_softmax: bool, **config_changes) -> Path:
    config = PretrainingOptions.from_dict(json.loads(corpus["options"].read_text())).config
    for name, value in config_changes.items():
        setattr(config, name, value)
    torch.manual_seed(0)
    (ElmoForPreTraining if with_softmax else ElmoModel)(config).save_pretrained(folder)
    if with_softmax:
        shutil.copy(corpus["vocab"], folder / "vocab.txt")
    return folder


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--num_train_epochs", "nan"], "--num_train_epochs must be a positive number, got nan"),
        (["--num_train_epochs", "0"], "--num_train_epochs must be a positive number, got 0.0"),
        (["--num_train_epochs", "-2"], "--num_train_epochs must be a positive number, got -2.0"),
        (["--learning_rate", "nan", "--max_steps", "1"], "--learning_rate must be a positive number, got nan"),
        (["--learning_rate", "0", "--max_steps", "1"], "--learning_rate must be a positive number, got 0.0"),
        (["--max_grad_norm", "nan", "--max_steps", "1"], "--max_grad_norm must be >= 0 (0: no clipping), got nan"),
        (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size must be an integer >= 1, got 0"),
        (["--gradient_accumulation_steps", "0"], "--gradient_accumulation_steps must be an integer >= 1, got 0"),
        (["--learning_rate", "1e30", "--max_steps", "3"], "Training diverged: the weights hold NaN or infinite"),
        (["--do_train", "False"], "--do_train False: nothing to do; add --do_eval"),
        (["--do_train", "False", "--do_eval", "--eval_files", "{eval}"], "--do_train False evaluates a saved model"),
        (["--do_train", "False", "--do_eval", "--eval_files", "{eval}", "--model_name_or_path", "{body}"],
         "has no softmax (an ElmoModel) to compute a perplexity with"),
        (["--do_train", "False", "--do_eval", "--eval_files", "{eval}", "--model_name_or_path", "{model}",
          "--resume_from_checkpoint", "last"], "--resume_from_checkpoint continues training"),
        (["--model_name_or_path", "{dir}/nothing", "--max_steps", "1"], "--model_name_or_path {dir}/nothing: no ELMo"),
        (["--model_name_or_path", "{dir}/bert", "--max_steps", "1"], "holds a 'bert' model, not an ELMo biLM"),
        (["--model_name_or_path", "{dir}/no_weights", "--max_steps", "1"], "no_weights: cannot load its weights"),
        (["--do_train", "--do_eval", "--eval_files", "{dir}/empty.txt", "--max_steps", "1"], "the corpus is empty"),
        (["--do_train", "--do_eval", "--eval_files", "{dir}/bad.txt", "--max_steps", "1"],
         "bad.txt: line 2 is not valid UTF-8"),
    ],
)  # fmt: skip
def test_values_that_would_train_nothing_or_garbage_are_refused(corpus, tmp_path, capsys, flags, expected):
    save_model(corpus, tmp_path / "body", with_softmax=False)
    save_model(corpus, tmp_path / "model", with_softmax=True)
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    PretrainingOptions.from_dict(json.loads(corpus["options"].read_text())).config.save_pretrained(
        tmp_path / "no_weights"
    )
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "bad.txt").write_bytes(b"fine words\nbad \xff word\n")
    names = {"eval": corpus["eval"], "body": tmp_path / "body", "model": tmp_path / "model", "dir": tmp_path}
    flags = [flag.format(**names) for flag in flags]
    output = tmp_path / "out"
    refused(capsys, command(corpus, output, *flags), expected.format(**names))
    assert no_model_in(output)


def test_continued_pretraining_from_a_quantized_folder_is_refused(
    corpus, fixture_dir, converted_fixture, tmp_path, capsys
):
    """Continued pretraining trains the biLM, whose quantized layers are frozen: refused in one line before training
    (rather than training the softmax alone and saying nothing), and the --output_dir it would create is not left."""
    folder = tmp_path / "int8"
    AutoModel.from_pretrained(converted_fixture, quantization_config=ElmoQuantizationConfig("int8")).save_pretrained(
        folder
    )
    original = json.loads((fixture_dir / "options.json").read_text())  # the fixture's architecture, so it would train
    options = write_options(
        tmp_path / "fixture_options.json", corpus["size"], char_cnn=original["char_cnn"], lstm=original["lstm"]
    )
    output = tmp_path / "out"
    argv = command({**corpus, "options": options}, output, "--model_name_or_path", str(folder), "--max_steps", "2")
    line = refused(capsys, argv, f"--model_name_or_path {folder} holds a quantized biLM ('int8')")
    assert "the float32 folder it was quantized from" in line and "\x1b" not in line
    assert not output.exists()


def test_a_second_run_never_writes_over_the_first(corpus, tmp_path, capsys):
    output = tmp_path / "out"
    assert main(command(corpus, output, "--max_steps", "1")) == 0
    before = {path.name: path.read_bytes() for path in output.iterdir() if path.is_file()}
    line = refused(capsys, command(corpus, output, "--max_steps", "2"), f"--output_dir {output} is not empty")
    assert "--resume_from_checkpoint last" in line
    assert {path.name: path.read_bytes() for path in output.iterdir() if path.is_file()} == before


def test_the_run_folder_keeps_its_record_and_a_resume_refuses_files_it_does_not_list(corpus, tmp_path, capsys):
    """The folder of a finished run lists what it wrote, like every Trainer command's; a resume there refuses a file
    the record does not list, and resumes the folder of an earlier version's run, which kept no record."""
    output = tmp_path / "out"
    assert main(command(corpus, output, "--max_steps", "2", *SAVING)) == 0
    record = read_record(output, AssertionError)
    assert record.tool == "elmo-pretrain" and record.complete and "checkpoint-2/trainer_state.json" in record.files
    assert unlisted_entries(output, record) == []
    (output / "notes.txt").write_text("mine")
    resume = command(corpus, output, "--max_steps", "4", *SAVING, "--resume_from_checkpoint", "last")
    refused(capsys, resume, "holds files that elmo-pretrain did not write (notes.txt)")
    (output / "notes.txt").unlink()
    (output / FOLDER_RECORD).unlink()  # as an earlier version left it
    assert main(resume) == 0
    assert read_record(output, AssertionError).complete


def test_an_output_folder_that_cannot_be_created_is_refused_before_training(corpus, tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    output = tmp_path / "a_file" / "out"
    refused(capsys, command(corpus, output, "--max_steps", "1"), f"{tmp_path / 'a_file'} is a file, not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_is_refused_before_training(corpus, tmp_path, capsys):
    output = tmp_path / "out"
    output.mkdir()
    output.chmod(0o555)
    try:
        refused(capsys, command(corpus, output, "--max_steps", "1"), "is not writable")
    finally:
        output.chmod(0o755)


def test_resume_last_skips_a_checkpoint_cut_short_by_a_kill(corpus, tmp_path, caplog):
    """A run killed while saving checkpoint-4 (its trainer_state.json, written last, missing): `last` resumes from
    checkpoint-2 and ends exactly where the uninterrupted run ended."""
    output = tmp_path / "out"
    assert main(command(corpus, output, "--max_steps", "4", *SAVING)) == 0
    expected = load_file(output / "model.safetensors")
    (output / "checkpoint-4" / "trainer_state.json").unlink()
    with caplog.at_level(logging.WARNING, logger="elmo-pretrain"):
        assert main(command(corpus, output, "--max_steps", "4", *SAVING, "--resume_from_checkpoint", "last")) == 0
    assert f"Skipping {output / 'checkpoint-4'}: incomplete" in caplog.text
    resumed = load_file(output / "model.safetensors")
    assert all(torch.equal(expected[name], resumed[name]) for name in expected)


def test_resuming_from_an_incomplete_checkpoint_by_name_is_refused(corpus, tmp_path, capsys):
    output = tmp_path / "out"
    assert main(command(corpus, output, "--max_steps", "2", *SAVING)) == 0
    checkpoint = output / "checkpoint-2"
    (checkpoint / "trainer_state.json").write_text('{"global_step": 2, "log_hist')  # cut short
    argv = command(corpus, tmp_path / "resumed", "--max_steps", "4", "--resume_from_checkpoint", str(checkpoint))
    refused(capsys, argv, f"--resume_from_checkpoint {checkpoint}: incomplete checkpoint")
    assert no_model_in(tmp_path / "resumed")


def test_a_save_killed_over_an_older_checkpoint_leaves_it_incomplete(corpus, tmp_path, monkeypatch):
    """Re-saving checkpoint-4 (after resuming from checkpoint-2) removes its old trainer_state.json first, so a kill
    midway does not leave old state beside new weights."""
    output = tmp_path / "out"
    assert main(command(corpus, output, "--max_steps", "4", *SAVING)) == 0

    def killed(self, output_dir):
        raise KeyboardInterrupt  # stands for the kill, after the weights and optimizer of the new save

    monkeypatch.setattr(ElmoPretrainingTrainer, "_save_rng_state", killed)
    with pytest.raises(KeyboardInterrupt):
        main(
            command(
                corpus, output, "--max_steps", "4", *SAVING, "--resume_from_checkpoint", str(output / "checkpoint-2")
            )
        )
    assert not (output / "checkpoint-4" / "trainer_state.json").exists()


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"lstm_cell_size": 40}, "disagree on the architecture: lstm_cell_size"),
        ({"per_device_train_batch_size": 2}, "it was trained with 4 rows per batch, this run has 2"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused(corpus, tmp_path, capsys, change, expected):
    other = tmp_path / "other"
    if "lstm_cell_size" in change:
        options = json.loads(corpus["options"].read_text())
        write_options(tmp_path / "other.json", corpus["size"], lstm={**options["lstm"], "dim": 40})
        other_run = command(corpus, other, "--max_steps", "2", *SAVING, "--options", str(tmp_path / "other.json"))
        this_run = []
    else:
        other_run = command(corpus, other, "--max_steps", "2", *SAVING)
        this_run = ["--per_device_train_batch_size", "2"]
    assert main(other_run) == 0
    argv = command(corpus, tmp_path / "out", "--max_steps", "4", *this_run)
    refused(capsys, argv + ["--resume_from_checkpoint", str(other / "checkpoint-2")], expected)
    assert no_model_in(tmp_path / "out")


def test_a_checkpoint_without_its_stream_states_resumes_with_a_warning(corpus, tmp_path, caplog):
    output = tmp_path / "out"
    assert main(command(corpus, output, "--max_steps", "2", *SAVING)) == 0
    (output / "checkpoint-2" / "stream_states_0.pt").unlink()
    with caplog.at_level(logging.WARNING, logger="elmo-pretrain"):
        assert main(command(corpus, output, "--max_steps", "3", "--resume_from_checkpoint", "last")) == 0
    assert "holds no stream_states_*.pt: the LSTM states restart from zero" in caplog.text


KILLED_WHILE_SAVING = """
import sys, time
from pathlib import Path
from modeling_elmo.pretraining import train

save_rng_state = train.ElmoPretrainingTrainer._save_rng_state

def save_then_hang(self, output_dir):  # the kill lands here: weights and optimizer saved, trainer_state.json not yet
    save_rng_state(self, output_dir)
    if output_dir.endswith("checkpoint-4"):
        (Path(output_dir).parent / "saving-4").touch()
        time.sleep(600)

train.ElmoPretrainingTrainer._save_rng_state = save_then_hang
sys.exit(train.main(sys.argv[1:]))
"""


@pytest.mark.integration
def test_kill_9_while_saving_a_checkpoint_leaves_the_previous_one_to_resume_from(corpus, tmp_path, caplog):
    output = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_WHILE_SAVING, *command(corpus, output, "--max_steps", "6", *SAVING)],
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not (output / "saving-4").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (output / "saving-4").exists(), process.poll()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert (output / "checkpoint-4" / "model.safetensors").is_file()
    assert not (output / "checkpoint-4" / "trainer_state.json").exists()
    (output / "saving-4").unlink()
    with caplog.at_level(logging.WARNING, logger="elmo-pretrain"):
        assert main(command(corpus, output, "--max_steps", "6", *SAVING, "--resume_from_checkpoint", "last")) == 0
    assert f"Skipping {output / 'checkpoint-4'}: incomplete" in caplog.text
    assert json.loads((output / "trainer_state.json").read_text())["global_step"] == 6
    assert json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == 4
