"""
`elmo run-legacy PROGRAM [ARGS ...]`: run an unchanged program written for AllenNLP's ELMo (seqvec's console script,
a script that imports `allennlp.commands.elmo` or `allennlp.modules.elmo`) with those module names served by
`modeling_elmo.allennlp` (the table is `modeling_elmo.allennlp.legacy_names`).

The program runs in a child process of this environment's Python, started as `python PROGRAM ARGS ...`: it is
`__main__`, `sys.argv` is what `python` gives it (the script's path, then ARGS untouched), its own folder comes first
on `sys.path`, and its exit status (a `SystemExit` code, 1 with Python's own traceback for an exception, 128 + N for
a death by signal N) is this command's. A child rather than `runpy` in this process, so that the program's process is
the one Python would give it (its `__main__`, its traceback, its `atexit` and signal handlers, its threads' CPU
settings), and so that the processes it starts itself (multiprocessing workers, `python` sub-commands) see the same
names. The names come from a temporary folder put first on the child's `PYTHONPATH`, holding one package `allennlp`
whose `__init__` hands every `allennlp.*` import to `modeling_elmo.allennlp.legacy_names`; the folder is removed when
the program ends. Nothing is served anywhere else: importing `modeling_elmo` never installs the names.

A real AllenNLP is never shadowed: when `allennlp` is importable as the program would see it (its folder first on
`sys.path`, `PYTHONPATH` and the environment's own `.pth` finders included; asked of a Python started like the
program), the command refuses in one line and runs nothing.

This module imports only the standard library: the parent process never loads torch (`--help` answers at once).
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..foundation.errors import ToolError, ToolInputError, command_as_typed, report
from ..foundation.output_folder import reason_of
from .arguments import OneLineErrors

PROG = "elmo-run-legacy"  # as a console script; `elmo run-legacy` when typed so (`command_as_typed`)
LEGACY_PACKAGE = "allennlp"
# The whole of the child's `allennlp/__init__.py`: AllenNLP's names are served by `modeling_elmo.allennlp`.
LEGACY_PACKAGE_INIT = '''"""Not AllenNLP: `elmo run-legacy` serves AllenNLP's names from modeling_elmo.allennlp."""

from modeling_elmo.allennlp.legacy_names import serve

serve(__name__)
'''
# Asked of a Python started like the program, with the program's folder as sys.path[0] (argv[1]): where `allennlp`
# would be imported from, or nothing.
FIND_ALLENNLP = """import importlib.util, sys
if not sys.flags.safe_path:
    sys.path[0] = sys.argv[1]
spec = importlib.util.find_spec("allennlp")
if spec is not None:
    print(spec.origin or ", ".join(spec.submodule_search_locations or ()) or "a module without a location")
"""
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class RunLegacyParser(OneLineErrors, argparse.ArgumentParser):
    pass


def command_line_parser() -> RunLegacyParser:
    prog = command_as_typed(PROG)
    return RunLegacyParser(
        prog=prog,
        usage=f"{prog} [-h] PROGRAM [ARGS ...]",
        description=(
            "Run an unchanged program written for AllenNLP's ELMo, with the module names allennlp.commands.elmo "
            "(ElmoEmbedder), allennlp.modules.elmo (Elmo, batch_to_ids, ...), allennlp.nn.util and "
            "allennlp.data.token_indexers.elmo_indexer served by modeling_elmo.allennlp. Refused where a real "
            "AllenNLP is importable."
        ),
        epilog=(
            "Every argument after PROGRAM goes to it untouched (its own --help too). Example: "
            "`elmo run-legacy seqvec -i in.fasta -o out.npz --model DIR`. See docs/migrate-seqvec.md."
        ),
    )


def parse_command_line(argv: list[str]) -> tuple[str, list[str]]:
    """(PROGRAM, its arguments). Only what comes before PROGRAM is this command's: `-h`/`--help`, or `--` before a
    PROGRAM whose name starts with a dash."""
    parser = command_line_parser()
    parser.add_argument(
        "program",
        metavar="PROGRAM",
        help="a Python script's path or a console script of this environment (such as seqvec)",
    )
    parser.add_argument("arguments", metavar="ARGS", nargs="*", help="the program's own arguments")
    if argv[:1] in (["-h"], ["--help"]):
        parser.parse_args(argv[:1])  # prints the help, exit status 0
    if argv[:1] == ["--"]:
        argv = argv[1:]
    elif argv[:1] and argv[0].startswith("-"):
        parser.error(f"unknown option {argv[0]}: the only option is --help (a PROGRAM named -... comes after --)")
    if not argv:
        parser.error("the following arguments are required: PROGRAM")
    return argv[0], argv[1:]


def environment_scripts_folder() -> Path:
    """The running environment's folder of console scripts (a virtual environment's `bin`)."""
    return Path(sysconfig.get_path("scripts"))


def resolve_program(program: str) -> str:
    """The Python file that `program` names, as `python` is to be given it: a console script of this environment
    (its full path, as a shell starts it) when `program` is a bare name found there, else the script's path as
    written. A missing file, a folder or a console script that is not a Python program is refused."""
    if os.sep not in program and (os.altsep is None or os.altsep not in program):
        found = shutil.which(program, path=str(environment_scripts_folder()))
        if found is not None:
            return _python_program(found, program)
    path = Path(program)
    if path.is_dir():
        raise ToolInputError(f"{program}: a folder, not a Python script (name the script, or a console script)")
    if not path.is_file():
        raise ToolInputError(
            f"{program}: no such script, and no console script of that name in {environment_scripts_folder()}"
        )
    return program


def _python_program(path: str, program: str) -> str:
    """`path`, a console script, if it is a Python program (pip's console scripts start with a `#!...python`
    line)."""
    try:
        with open(path, "rb") as handle:
            first_line = handle.readline(512)
    except OSError as error:
        raise ToolInputError(f"{program}: cannot read {path} ({reason_of(error, with_file=False)})") from None
    if not (first_line.startswith(b"#!") and b"python" in first_line):
        raise ToolInputError(f"{program}: {path} is not a Python program, so it cannot use Python module names")
    return path


def refuse_a_real_allennlp(program: str, environment: dict[str, str]) -> None:
    """Raise `ToolInputError` if `allennlp` is importable by `program` run with `environment`."""
    folder = os.path.dirname(os.path.realpath(program))  # what `python PROGRAM` puts first on sys.path
    result = subprocess.run(
        [sys.executable, "-c", FIND_ALLENNLP, folder], env=environment, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise ToolError(f"cannot tell whether allennlp is importable by {program}: {result.stderr.strip()[-300:]}")
    where = result.stdout.strip()
    if where:
        raise ToolInputError(
            f"allennlp is importable by {program} ({where}): run-legacy never shadows a real AllenNLP; run the "
            "program without it, or uninstall allennlp (or take it off PYTHONPATH) to use modeling_elmo's names"
        )


@contextmanager
def legacy_names_folder() -> Iterator[str]:
    """A temporary folder holding the package `allennlp` that serves AllenNLP's names (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="elmo-run-legacy-") as folder:
        package = Path(folder, LEGACY_PACKAGE)
        package.mkdir()
        package.joinpath("__init__.py").write_text(LEGACY_PACKAGE_INIT, encoding="utf-8")
        yield folder


@contextmanager
def signals_go_to(process: subprocess.Popen) -> Iterator[None]:
    """While the child runs: Ctrl-C reaches it from the terminal (this process ignores SIGINT), SIGTERM and SIGHUP
    sent to this process are passed on to it."""

    def forward(signal_number: int, frame: object) -> None:
        process.send_signal(signal_number)

    handlers = {signal.SIGINT: signal.SIG_IGN} | {number: forward for number in FORWARDED_SIGNALS}
    previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_program(command: list[str], environment: dict[str, str]) -> int:
    """Run `command` to its end; its exit status (128 + N when signal N killed it, as a shell reports it)."""
    process = subprocess.Popen(command, env=environment)
    try:
        with signals_go_to(process):
            status = process.wait()
    finally:
        if process.poll() is None:  # this process is being stopped by an exception: stop the program too
            process.kill()
            process.wait()
    return status if status >= 0 else 128 - status


def main(argv: list[str] | None = None) -> int:
    """The `elmo run-legacy` command; the program's exit status (2 where it was refused)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    program, arguments = parse_command_line(argv)
    environment = dict(os.environ)
    try:
        script = resolve_program(program)
        refuse_a_real_allennlp(script, environment)
    except ToolError as error:
        return report(command_as_typed(PROG), error)
    with legacy_names_folder() as folder:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, environment.get("PYTHONPATH")]))
        return run_program([sys.executable, "--", script, *arguments], environment)  # `--`: a script named -...
