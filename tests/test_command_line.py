"""The commands' shared command line (issue 31): `--help` shows every flag and subcommand with defaults that say
what happens; unknown flags and bad `TrainingArguments` values are one line and exit 2 on every Trainer command; a
model argument naming a missing folder is refused at once (no Hub round trip)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modeling_elmo.classification import arguments as classifier_arguments
from modeling_elmo.classification import train as train_classifier
from modeling_elmo.conversion import arguments as conversion_arguments
from modeling_elmo.embed import cli as embed
from modeling_elmo.foundation.model_location import is_hub_repo_id, missing_model_folder
from modeling_elmo.foundation.owned_files import claim_file
from modeling_elmo.ner import arguments as ner_arguments
from modeling_elmo.ner import train as train_ner
from modeling_elmo.pretraining import arguments as pretrain_arguments


@pytest.mark.parametrize(
    "value, hub",
    [
        ("allenai/elmo-original", True),
        ("my-org/elmo.small_v2", True),
        ("elmo-fixtur", False),  # no namespace: ELMo models on the Hub all have one
        ("./elmo-fixture", False),
        ("../models/elmo", False),
        ("~/elmo", False),
        ("/models/elmo", False),
        ("models/en/elmo", False),
        ("org/bad name", False),
        ("org/--double", False),
        ("", False),
    ],
)
def test_a_model_argument_is_a_hub_id_only_as_namespace_slash_name(value, hub):
    assert is_hub_repo_id(value) is hub


def test_an_existing_folder_is_never_missing_whatever_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elmo-fixture").mkdir()
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert not missing_model_folder("elmo-fixture") and not missing_model_folder("org/name")
    assert missing_model_folder("elmo-fixtur") and missing_model_folder(str(tmp_path / "nowhere"))
    assert not missing_model_folder("org/elsewhere")  # a Hub id: the Hub (or its cache) decides
    assert missing_model_folder("") and missing_model_folder(" ")


def _help(parser) -> str:
    return parser.format_help()


@pytest.mark.parametrize(
    "parser, expected",
    [
        (classifier_arguments.build_parser, ["prepare-sst", "--output_dir", "--do_eval", "--classifier_pooling"]),
        (ner_arguments.build_parser, ["--output_dir", "--use_crf", "--data_dir", "--eval_strategy"]),
        (pretrain_arguments.build_parser, ["build-vocab", "--output_dir", "--do_eval", "--options", "--save_steps"]),
        (embed.build_parser, ["merge", "--model", "--layers"]),
        (conversion_arguments.publish_parser, ["batch", "--namespace"]),
    ],
    ids=["elmo-train-classifier", "elmo-train-ner", "elmo-pretrain", "elmo-embed", "elmo-publish"],
)
def test_help_shows_every_flag_and_subcommand(parser, expected):
    shown = _help(parser())
    assert all(text in shown for text in expected), [text for text in expected if text not in shown]
    assert "(default: None)" not in shown


@pytest.mark.parametrize("parser", [classifier_arguments.build_parser, ner_arguments.build_parser])
def test_head_flags_say_they_keep_the_model_folders_value(parser):
    shown = " ".join(_help(parser()).split())
    assert "--classifier_dropout CLASSIFIER_DROPOUT" in shown
    assert shown.count("keeps the model folder's value") >= 6


TRAINER_COMMANDS = {
    "elmo-train-classifier": (train_classifier.main, ["--do_train", "--train_file", "t.jsonl"]),
    "elmo-train-ner": (train_ner.main, ["--data_dir", "conll"]),
}


@pytest.mark.parametrize("command", TRAINER_COMMANDS)
@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--bogus_flag"], "unrecognized arguments: --bogus_flag"),
        (["--seed", "-1"], "--seed must be an integer from 0 to 4294967295, got -1"),
        (["--logging_steps", "0"], "requires non-zero --logging_steps"),
        (["--learning_rate", "nan"], "--learning_rate must be a positive number, got nan"),
        (["--num_train_epochs", "-1"], "--num_train_epochs must be a positive number, got -1.0"),
        (["--per_device_eval_batch_size", "0"], "--per_device_eval_batch_size must be an integer >= 1, got 0"),
    ],
)
def test_trainer_command_argument_errors_are_one_line_and_exit_2(tmp_path, capsys, command, flags, expected):
    main, arguments = TRAINER_COMMANDS[command]
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main(["--model_name_or_path", str(tmp_path / "model"), "--output_dir", str(output), *arguments, *flags])
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(f"{command}: error: ") and expected in error[0], error
    assert not output.exists()


def test_a_mistyped_model_folder_is_no_such_folder_for_elmo_train_ner(conll_dir, tmp_path, capsys):
    argv = ["--model_name_or_path", "elmo-fixtur", "--data_dir", str(conll_dir), "--output_dir", str(tmp_path / "o")]
    with pytest.raises(SystemExit, match="elmo-train-ner: error: --model_name_or_path elmo-fixtur: no such folder"):
        train_ner.main(argv)


def test_a_mistyped_model_folder_is_no_such_folder_for_elmo_train_classifier(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text('{"sentence": "a fine film", "label": 1}\n{"sentence": "a dull film", "label": 0}\n')
    argv = ["--model_name_or_path", "elmo-fixtur", "--do_train", "--train_file", str(train)]
    with pytest.raises(SystemExit) as stop:
        train_classifier.main([*argv, "--output_dir", str(tmp_path / "o"), "--report_to", "none"])
    assert stop.value.code == 2
    assert "--model_name_or_path elmo-fixtur: no such folder" in capsys.readouterr().err


def test_a_mistyped_model_folder_is_no_such_folder_for_elmo_embed(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a sentence\n")
    code = embed.main([str(tmp_path / "in.txt"), str(tmp_path / "out.h5"), "--model", "elmo-fixtur"])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1 and "elmo-fixtur (no such folder" in error[0], (code, error)


@pytest.mark.integration
def test_a_mistyped_model_folder_makes_no_hub_round_trip(tmp_path):
    """Online, with the Hub unreachable (a closed local port): the answer comes without a connection attempt."""
    (tmp_path / "in.txt").write_text("a sentence\n")
    environment = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    argv = [str(tmp_path / "in.txt"), str(tmp_path / "out.h5"), "--model", "elmo-fixtur"]
    script = "import sys; from modeling_elmo.embed.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", script, *argv], env=environment, capture_output=True, text=True, cwd=Path(tmp_path)
    )
    assert result.returncode == 2 and "no such folder" in result.stderr, result.stderr
    assert "127.0.0.1" not in result.stderr and "connect" not in result.stderr.lower()


LIGHT_START = """
import sys
sys.argv[0] = "elmo-embed"
from modeling_elmo.embed.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
heavy = sorted(name for name in ("torch", "transformers") if name in sys.modules)
print(code, heavy)
"""


@pytest.mark.parametrize(
    "arguments", [["--help"], ["in.txt", "out.h5", "--model", "m", "--batch-size", "0"], ["merge", "--help"]]
)
def test_elmo_embed_answers_help_and_argument_errors_before_importing_torch(arguments):
    result = subprocess.run([sys.executable, "-c", LIGHT_START, *arguments], capture_output=True, text=True)
    code, heavy = result.stdout.strip().splitlines()[-1].split(" ", 1)
    assert heavy == "[]" and code in ("0", "2"), result.stdout + result.stderr


def test_light_start_commands_are_the_console_scripts():
    import tomllib

    from modeling_elmo.inference.registration import LIGHT_START_COMMANDS

    scripts = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["scripts"]
    assert LIGHT_START_COMMANDS == scripts.keys()


def test_elmo_train_ner_refuses_an_output_dir_in_use_by_a_live_run(converted_fixture, tmp_path):
    import fcntl

    train = tmp_path / "train.txt"
    train.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n", encoding="utf-8")
    output = tmp_path / "out"
    output.mkdir()
    argv = [f"--model_name_or_path={converted_fixture}", f"--train_file={train}", f"--output_dir={output}"]
    descriptor = os.open(claim_file(output), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # stands for the live run: the output's one claim
        with pytest.raises(SystemExit, match=f"elmo-train-ner: error: --output_dir {output} is in use by another"):
            train_ner.main([*argv, "--max_steps", "1", "--report_to", "none"])
    finally:
        os.close(descriptor)
    assert list(output.iterdir()) == []


def test_elmo_train_classifier_refuses_an_output_dir_in_use_by_a_live_run(converted_fixture, tmp_path, capsys):
    import fcntl

    train = tmp_path / "train.jsonl"
    train.write_text('{"sentence": "a fine film", "label": 1}\n{"sentence": "a dull film", "label": 0}\n')
    output = tmp_path / "out"
    output.mkdir()
    argv = [f"--model_name_or_path={converted_fixture}", "--do_train", f"--train_file={train}"]
    descriptor = os.open(claim_file(output), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # stands for the live run: the output's one claim
        with pytest.raises(SystemExit) as stop:
            train_classifier.main([*argv, f"--output_dir={output}", "--max_steps", "1", "--report_to", "none"])
    finally:
        os.close(descriptor)
    assert stop.value.code == 2
    assert f"--output_dir {output} is in use by another running elmo-train-classifier" in capsys.readouterr().err
    assert list(output.iterdir()) == []


@pytest.mark.parametrize("command", TRAINER_COMMANDS)
def test_a_head_too_large_for_memory_is_refused_before_allocating(converted_fixture, tmp_path, capsys, command):
    records = [{"sentence": "a fine film", "label": 1}, {"sentence": "a dull film", "label": 0}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    (tmp_path / "conll").mkdir()
    for split in ("train", "dev", "test"):
        (tmp_path / "conll" / f"{split}.txt").write_text("EU NNP B-NP B-ORG\n\nPeter NNP B-NP B-PER\n")
    main, arguments = TRAINER_COMMANDS[command]
    arguments = [argument if argument != "t.jsonl" else str(tmp_path / "t.jsonl") for argument in arguments]
    arguments = [argument if argument != "conll" else str(tmp_path / "conll") for argument in arguments]
    huge = ["--classifier_head", "bilstm", "--tagger_hidden_size", "1000000", "--report_to", "none"]
    with pytest.raises(SystemExit) as stop:
        main(["--model_name_or_path", str(converted_fixture), "--output_dir", str(tmp_path / "o"), *arguments, *huge])
    error = capsys.readouterr().err.strip().splitlines() or [str(stop.value.code)]
    assert len(error) == 1 and "needs at least" in error[0] and "--tagger_hidden_size" in error[0], error
