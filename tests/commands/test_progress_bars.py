"""A command's output has no progress bars of Transformers' own ("Loading weights", "Writing model shards") unless
`--verbose` (issue 52, point 5a); its own bars stay, and a library user's process is left as it was."""

import os
import subprocess
import sys

import pytest
import transformers
from huggingface_hub.utils import are_progress_bars_disabled
from transformers.utils import logging as hf_logging

from modeling_elmo.commands.elmo import SUBCOMMANDS, main
from modeling_elmo.commands.progress_bars import VERBOSE_HELP, take_verbose_flag, transformers_progress_bars_hidden

ELMO = "import sys; from modeling_elmo.commands.elmo import main; sys.exit(main())"  # `elmo ARGS...`
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "HF_HUB_DISABLE_PROGRESS_BARS"}
ENVIRONMENT |= {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
TRANSFORMERS_BARS = ("Loading weights", "Writing model shards")
DRAWS_BARS = int(transformers.__version__.split(".")[0]) >= 5  # Transformers 4.x draws neither bar


def elmo(*arguments) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-c", ELMO, *map(str, arguments)], capture_output=True, text=True, env=ENVIRONMENT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.integration
@pytest.mark.parametrize("verbose", [False, True])
def test_convert_shows_transformers_bars_only_with_verbose(fixture_dir, tmp_path, verbose):
    """elmo convert --verify saves the folder and loads it back: both bars, or neither."""
    result = elmo(
        "convert",
        *("--options", fixture_dir / "options.json", "--weights", fixture_dir / "lm_weights.hdf5"),
        *("--output", tmp_path / "out", "--verify", *(["--verbose"] if verbose else [])),
    )
    assert all((bar in result.stderr) == (verbose and DRAWS_BARS) for bar in TRANSFORMERS_BARS), result.stderr
    assert "Wrote " in result.stdout


@pytest.mark.integration
@pytest.mark.parametrize("verbose", [False, True])
def test_embed_keeps_its_own_bar(converted_fixture, tmp_path, verbose):
    """elmo embed imports Transformers once its arguments are parsed: the bar is hidden from then; its own stays."""
    corpus = tmp_path / "in.txt"
    corpus.write_text("the bank closed .\nriver boats\n", encoding="utf-8")
    flags = ["--verbose"] if verbose else []
    result = elmo("embed", corpus, tmp_path / "out.hdf5", "--model", converted_fixture, "--batch-size", "1", *flags)
    assert ("Loading weights" in result.stderr) == (verbose and DRAWS_BARS), result.stderr
    assert "elmo-embed" in result.stderr  # its own bar


def test_transformers_bars_hidden_in_the_block_only():
    """Transformers already imported (a library user's process running a command): hidden in the block, shown after;
    the Hub's bars untouched."""
    shown, hub_disabled = hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    with transformers_progress_bars_hidden():
        assert not hf_logging.is_progress_bar_enabled()
        assert are_progress_bars_disabled() == hub_disabled
    assert (hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()) == (shown, hub_disabled)


def test_transformers_bars_hidden_when_imported_in_the_block():
    """Transformers imported in the block (a console command's process): hidden from its import, shown after, and
    nothing of Transformers imported before."""
    script = """
import sys
sys.argv[0] = "elmo"  # a console command's process: `import modeling_elmo` imports no Transformers
from modeling_elmo.commands.progress_bars import transformers_progress_bars_hidden
from huggingface_hub.utils import are_progress_bars_disabled
with transformers_progress_bars_hidden():
    assert "transformers" not in sys.modules
    from transformers.utils import logging
    assert not logging.is_progress_bar_enabled() and not are_progress_bars_disabled()
    assert logging.__loader__.get_source(logging.__name__)  # the module's own loader answers the rest
assert logging.is_progress_bar_enabled() and not are_progress_bars_disabled()
assert not any(type(finder).__module__.endswith("progress_bars") for finder in sys.meta_path)
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENVIRONMENT)
    assert result.stdout.strip() == "ok", result.stderr


def test_a_library_process_keeps_its_bars_after_a_command(tmp_path, capsys):
    shown = hf_logging.is_progress_bar_enabled()
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert hf_logging.is_progress_bar_enabled() == shown
    assert capsys.readouterr().out.rstrip().endswith(VERBOSE_HELP)


@pytest.mark.parametrize(
    "argv, verbose, rest",
    [
        (["m", "--verbose", "--port", "1"], True, ["m", "--port", "1"]),
        (["m", "--port", "1"], False, ["m", "--port", "1"]),
        (["--", "--verbose"], False, ["--", "--verbose"]),  # after `--`: a positional argument
    ],
)
def test_verbose_is_taken_before_the_command_parses(argv, verbose, rest):
    assert take_verbose_flag(argv) == (verbose, rest)


def test_run_legacy_passes_verbose_on():
    """run-legacy's arguments are all its program's (and its own parser refuses an option before PROGRAM)."""
    assert [name for name, subcommand in SUBCOMMANDS.items() if not subcommand.takes_verbose] == ["run-legacy"]
