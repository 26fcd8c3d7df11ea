"""`elmo`: one command for every tool, `elmo SUBCOMMAND ...`; the console scripts `elmo-convert`, `elmo-train-ner`,
... are its aliases (`elmo-train-ner ARGS` is `elmo train-ner ARGS`).

A subcommand runs in three steps, so that `--help` and argument errors answer before torch and Transformers are
imported (seconds): its command line is parsed by a parser that imports nothing heavy (`check`); the process's CPU
threads are chosen (`runtime.cpu_threads`, which must run before torch is imported to set OpenMP's wait policy) and
ELMo is registered with the Auto classes (`inference.registration`); then the work's module is imported and run. A
subcommand's own subcommands that need neither torch nor the model (`elmo pretrain build-vocab`, ...) run directly.
"""

import contextlib
import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..foundation.errors import ToolError, report, typed_as
from ..inference.registration import register_auto_classes
from .progress_bars import VERBOSE_HELP, asks_for_help, take_verbose_flag, transformers_progress_bars_hidden

PROG = "elmo"


@dataclass(frozen=True)
class Subcommand:
    """One tool: what it does (`summary`), the function that runs it (`run`: "module:function", called with the
    arguments after the subcommand's name, returning the exit status), the function that parses its command line
    without importing torch (`check`, same form; None where `run` itself parses first and registers ELMo when it
    needs to), and its own light subcommands (`light`: name -> "module:function", called with the arguments after
    that name), and whether it takes `--verbose` (`takes_verbose`)."""

    summary: str
    run: str
    check: str | None = None
    light: Mapping[str, str] = field(default_factory=dict)
    takes_verbose: bool = True  # `--verbose` (`progress_bars`); run-legacy's arguments are all its program's


SUBCOMMANDS = {
    "convert": Subcommand(
        "convert a bilm-tf / AllenNLP, NLPL or ELMoForManyLangs model into a Transformers folder",
        run="modeling_elmo.conversion.convert_command:main",
        check="modeling_elmo.conversion.arguments:check_convert_command_line",
    ),
    "export": Subcommand(
        "write a Transformers ELMo folder back in bilm-tf's format",
        run="modeling_elmo.conversion.export:main",
        check="modeling_elmo.conversion.arguments:check_export_command_line",
    ),
    "publish": Subcommand(
        "convert the official models and push them to the Hub (`publish batch`: a folder of downloads)",
        run="modeling_elmo.conversion.publish:main",
        check="modeling_elmo.conversion.arguments:check_publish_command_line",
    ),
    "embed": Subcommand(
        "a corpus in, ELMo layers out as HDF5 or Parquet (`embed merge`: join shards; `embed to-parquet`)",
        run="modeling_elmo.embed.cli:main",
    ),
    "train-ner": Subcommand(
        "fine-tune ELMo for NER on CoNLL files with the Trainer",
        run="modeling_elmo.ner.train:cli",
        check="modeling_elmo.ner.arguments:COMMAND_LINE.check",
    ),
    "train-classifier": Subcommand(
        "sentence(-pair) classification or regression with the Trainer (`prepare-sst`: the SST files)",
        run="modeling_elmo.classification.train:cli",
        check="modeling_elmo.classification.arguments:COMMAND_LINE.check",
        light={"prepare-sst": "modeling_elmo.classification.sst:main"},
    ),
    "pretrain": Subcommand(
        "train a biLM with bilm-tf's recipe on the Trainer (`build-vocab`: a vocabulary file)",
        run="modeling_elmo.pretraining.train:main",
        check="modeling_elmo.pretraining.arguments:COMMAND_LINE.check",
        light={"build-vocab": "modeling_elmo.pretraining.build_vocab:main"},
    ),
    "export-onnx": Subcommand(
        "export an ELMo folder to one ONNX file, checked with onnxruntime",
        run="modeling_elmo.deploy.onnx_export:main",
        check="modeling_elmo.deploy.arguments:check_onnx_export_command_line",
    ),
    "serve": Subcommand(
        "serve a model over HTTP: OpenAI's /v1/embeddings, per-word vectors, health and metrics",
        run="modeling_elmo.serve.cli:main",
        check="modeling_elmo.serve.arguments:check_serve_command_line",
    ),
    "run-legacy": Subcommand(
        "run an unchanged AllenNLP-ELMo program (seqvec, a script) with modeling_elmo serving allennlp's names",
        run="modeling_elmo.commands.run_legacy:main",
        takes_verbose=False,
    ),
}
# console script: subcommand (pyproject.toml's [project.scripts])
ALIASES = {f"elmo-{name}": name for name in SUBCOMMANDS}


def load(target: str) -> Callable:
    """The function named by "module:attribute.path" (imported now)."""
    module, path = target.split(":")
    found = importlib.import_module(module)
    for name in path.split("."):
        found = getattr(found, name)
    return found


def run_subcommand(name: str, argv: list[str], typed: str) -> int:
    """Run the subcommand `name` with `argv` (the arguments after its name); its exit status. `typed`: the command as
    the user typed it (`elmo NAME` or `elmo-NAME`), what its errors begin with."""
    from ..runtime.cpu_threads import configure_cpu_threads

    subcommand = SUBCOMMANDS[name]
    verbose, argv = take_verbose_flag(argv) if subcommand.takes_verbose else (True, argv)
    try:
        with typed_as(typed), contextlib.nullcontext() if verbose else transformers_progress_bars_hidden():
            if argv[:1] and argv[0] in subcommand.light:
                return load(subcommand.light[argv[0]])(argv[1:])
            try:
                if subcommand.check is not None:
                    load(subcommand.check)(argv)
                configure_cpu_threads()
                if subcommand.check is not None:
                    register_auto_classes()
                return load(subcommand.run)(argv)
            except ToolError as error:  # one that the command's own `main` (or its check) does not report
                return report(typed, error)
    except SystemExit as stop:
        if stop.code == 0 and subcommand.takes_verbose and asks_for_help(argv):
            print(f"\n{VERBOSE_HELP}")  # after the help its parser printed
        raise


def usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [f"  {name:<{width}}  {subcommand.summary}" for name, subcommand in SUBCOMMANDS.items()]
    return (
        f"usage: {PROG} SUBCOMMAND [ARGS ...]\n\nELMo for Hugging Face Transformers: every tool as a subcommand.\n"
        f"`{PROG} SUBCOMMAND --help` lists its flags; `elmo-SUBCOMMAND` is the same command.\n\nsubcommands:\n"
        + "\n".join(lines)
        + "\n\nEvery subcommand but run-legacy also takes --verbose: Transformers' own progress bars (loading and "
        "saving a model), hidden otherwise.\n"
    )


def main(argv: list[str] | None = None) -> int:
    """The `elmo` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(usage(), end="")
        return 0
    if not argv or argv[0] not in SUBCOMMANDS:
        given = f"unknown subcommand {argv[0]!r}" if argv else "a subcommand is required"
        print(f"{PROG}: error: {given}; one of {', '.join(SUBCOMMANDS)} (see {PROG} --help)", file=sys.stderr)
        return 2
    return run_subcommand(argv[0], argv[1:], typed=f"{PROG} {argv[0]}")


def alias(name: str) -> Callable[[], int]:
    """The console script `elmo-NAME`: `elmo NAME` with the script's arguments."""

    def run_alias() -> int:
        return run_subcommand(name, sys.argv[1:], typed=f"elmo-{name}")

    run_alias.__name__ = run_alias.__qualname__ = name.replace("-", "_")
    run_alias.__doc__ = f"The console script `elmo-{name}`: `elmo {name}` ({SUBCOMMANDS[name].summary})."
    return run_alias


convert = alias("convert")
export = alias("export")
publish = alias("publish")
embed = alias("embed")
train_ner = alias("train-ner")
train_classifier = alias("train-classifier")
pretrain = alias("pretrain")
export_onnx = alias("export-onnx")
serve = alias("serve")
run_legacy = alias("run-legacy")
