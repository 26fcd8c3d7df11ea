"""`elmo` and its aliases (issue 31, item 2): every console script answers `--help` and argument errors before torch
and Transformers are imported, and `elmo-NAME ARGS` is `elmo NAME ARGS`."""

import functools
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from modeling_elmo.commands.elmo import ALIASES, SUBCOMMANDS, load, main
from modeling_elmo.commands.progress_bars import VERBOSE_HELP

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]

# A console script's process: its name in argv[0], its entry point called; then what it imported.
AS_SCRIPT = """
import sys
name, target = sys.argv[1], sys.argv[2]
sys.argv = [name, *sys.argv[3:]]
module, function = target.split(":")
import importlib
try:
    code = getattr(importlib.import_module(module), function)()
except SystemExit as stop:
    code = stop.code
heavy = sorted(name for name in ("torch", "transformers") if name in sys.modules)
print("RESULT", code, heavy)
"""

ARGUMENT_ERRORS = {
    "elmo": ["bogus"],
    "elmo-convert": ["--output", "out"],
    "elmo-export": [],
    "elmo-publish": ["batch", "--input-dir", "in"],
    "elmo-embed": ["in.txt", "out.h5", "--model", "m", "--batch-size", "0"],
    "elmo-train-ner": ["--model_name_or_path", "elmo-fixtur", "--output_dir", "o"],
    "elmo-train-classifier": ["--model_name_or_path", "m", "--output_dir", "o", "--seed", "-1"],
    "elmo-pretrain": ["--options", "x.json", "--vocab_file", "v.txt", "--output_dir", "o", "--bogus_flag"],
    "elmo-export-onnx": ["model", "out.onnx", "--opset", "x"],
    "elmo-run-legacy": ["--verbose", "seqvec"],
    "elmo-serve": ["m", "--port", "0"],
}


def run_as_script(name: str, arguments: list[str], cwd: Path) -> tuple[str, str, str]:
    """(exit status, heavy modules imported, stderr) of the console script `name`."""
    result = subprocess.run(
        [sys.executable, "-c", AS_SCRIPT, name, SCRIPTS[name], *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT"))
    _, code, heavy = line.split(" ", 2)
    return code, heavy, result.stderr


def test_every_subcommand_has_its_console_script():
    assert SCRIPTS == {"elmo": "modeling_elmo.commands.elmo:main"} | {
        alias: f"modeling_elmo.commands.elmo:{name.replace('-', '_')}" for alias, name in ALIASES.items()
    }


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_answers_before_torch_is_imported(name, tmp_path):
    code, heavy, stderr = run_as_script(name, ["--help"], tmp_path)
    assert (code, heavy) == ("0", "[]"), stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_argument_error_is_one_line_before_torch_is_imported(name, tmp_path):
    code, heavy, stderr = run_as_script(name, ARGUMENT_ERRORS[name], tmp_path)
    error = [line for line in stderr.splitlines() if "error:" in line]
    assert (code, heavy) == ("2", "[]") and len(error) == 1, stderr


@pytest.mark.parametrize(
    "name, arguments, message",
    [
        ("elmo-export", ["no-such-model", "--output", "out"], "no-such-model: not a folder"),
        ("elmo-export-onnx", ["no-such-model", "out.onnx"], "no-such-model is not a model folder"),
    ],
)
def test_a_missing_model_folder_is_one_line_before_torch_is_imported(name, arguments, message, tmp_path):
    """The export commands' MODEL_DIR is checked with their arguments: the error their work would give, at once."""
    code, heavy, stderr = run_as_script(name, arguments, tmp_path)
    error = [line for line in stderr.splitlines() if "error:" in line]
    assert (code, heavy) == ("1", "[]") and len(error) == 1 and message in error[0], stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize(
    "name, subcommand", [("elmo-pretrain", "build-vocab"), ("elmo-train-classifier", "prepare-sst")]
)
def test_light_subcommands_never_import_torch(name, subcommand, tmp_path):
    code, heavy, stderr = run_as_script(name, [subcommand, "--help"], tmp_path)
    assert (code, heavy) == ("0", "[]"), stderr


def test_elmo_lists_every_subcommand(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    assert all(f"  {name} " in shown for name in SUBCOMMANDS)


def test_elmo_without_a_known_subcommand_is_one_line_and_exit_2(capsys):
    assert main([]) == 2 and main(["train_ner"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        f"elmo: error: {problem}; one of {', '.join(SUBCOMMANDS)} (see elmo --help)"
        for problem in ("a subcommand is required", "unknown subcommand 'train_ner'")
    ]


def test_elmo_name_runs_what_the_alias_runs(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["train-ner", "--help"])
    assert stop.value.code == 0
    through_elmo = capsys.readouterr().out
    help_text = load(SUBCOMMANDS["train-ner"].check.rsplit(".", 1)[0]).light_parser().format_help()
    without_addresses = functools.partial(re.sub, r"0x[0-9a-f]+", "")  # 4.52 shows an object's repr in a help text
    with_verbose = f"{help_text}\n{VERBOSE_HELP}\n"  # the flag every subcommand takes (commands.progress_bars)
    assert without_addresses(through_elmo) == without_addresses(with_verbose) and "--output_dir" in help_text


def test_every_run_and_check_target_exists():
    targets = [target for item in SUBCOMMANDS.values() for target in (item.run, item.check, *item.light.values())]
    assert all(callable(load(target)) for target in targets if target is not None)


# The thread choice stubbed: it reports whether torch was imported before it, and ends the process.
THREADS_FIRST = """
import sys
name, target = sys.argv[1], sys.argv[2]
sys.argv = [name, *sys.argv[3:]]  # first: `import modeling_elmo` reads the script's name
import modeling_elmo.runtime.cpu_threads as cpu_threads

def report():
    print("RESULT", "torch" in sys.modules)
    raise SystemExit(0)

cpu_threads.configure_cpu_threads = report
module, function = target.split(":")
import importlib
getattr(importlib.import_module(module), function)()
"""

VALID_ARGUMENTS = {
    "elmo-convert": ["--options", "o.json", "--weights", "w.hdf5", "--output", "out"],
    "elmo-export": ["model", "--output", "out"],
    "elmo-publish": ["--namespace", "org"],
    "elmo-embed": ["in.txt", "out.h5", "--model", "model"],
    "elmo-train-ner": ["--model_name_or_path", "model", "--output_dir", "out"],
    "elmo-train-classifier": ["--model_name_or_path", "model", "--output_dir", "out"],
    "elmo-pretrain": ["--options", "o.json", "--vocab_file", "v.txt", "--output_dir", "out"],
    "elmo-export-onnx": ["model", "out.onnx"],
}


@pytest.mark.parametrize("name", VALID_ARGUMENTS)
def test_threads_are_chosen_before_torch_is_imported(name, tmp_path):
    """OpenMP reads its wait policy when torch loads: the commands choose their threads before that."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")  # a model folder, as far as the command lines check
    result = subprocess.run(
        [sys.executable, "-c", THREADS_FIRST, name, SCRIPTS[name], *VALID_ARGUMENTS[name]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert "RESULT False" in result.stdout.splitlines(), result.stdout + result.stderr
