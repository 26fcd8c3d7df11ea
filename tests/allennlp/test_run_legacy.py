"""`elmo run-legacy PROGRAM [ARGS ...]` (issue 38, item 1): the program runs as `python PROGRAM ARGS` would run it
(its `__main__`, `sys.argv`, `sys.path[0]`, exit status, traceback) with AllenNLP's module names served by
`modeling_elmo.allennlp`, only there; a real AllenNLP is never shadowed; bad input is one line and exit status 2."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest

import modeling_elmo.allennlp as served
from modeling_elmo.allennlp.legacy_names import LEGACY_MODULES
from modeling_elmo.commands import run_legacy
from modeling_elmo.commands.elmo import SUBCOMMANDS


def write_program(folder, name: str, text: str):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Where `run-legacy` makes its temporary folder during the test (to see that it is removed)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_the_program_runs_as_python_runs_it(tmp_path, capfd, monkeypatch, private_tmp):
    """`__main__`, argv untouched (its own --help included), its folder first on sys.path, PYTHONPATH kept, the exit
    status its own; the temporary folder is gone afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "on-pythonpath"))
    write_program(tmp_path, "scripts/helper.py", "VALUE = 'helper beside the script'\n")
    write_program(
        tmp_path,
        "scripts/program.py",
        """
        import os, sys
        import helper
        print("name", __name__)
        print("argv", sys.argv)
        print("path0", sys.path[0])
        print("helper", helper.VALUE)
        print("pythonpath", os.environ["PYTHONPATH"].split(os.pathsep)[1:])
        sys.exit(3)
        """,
    )
    arguments = ["--help", "-i", "in put.fasta", "--", "-h"]
    assert run_legacy.main(["scripts/program.py", *arguments]) == 3
    lines = capfd.readouterr().out.splitlines()
    assert lines == [
        "name __main__",
        f"argv {['scripts/program.py', *arguments]}",
        f"path0 {os.path.realpath(tmp_path / 'scripts')}",
        "helper helper beside the script",
        f"pythonpath {[str(tmp_path / 'on-pythonpath')]}",
    ]
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize(
    "body, status, stderr",
    [
        ("raise ValueError('broken input')", 1, ["Traceback (most recent call last):", "ValueError: broken input"]),
        ("raise SystemExit('stopped: no input')", 1, ["stopped: no input"]),
        ("import sys; sys.exit(0)", 0, []),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + signal.SIGTERM, []),
    ],
)
def test_the_exit_status_and_traceback_are_the_programs(tmp_path, capfd, body, status, stderr):
    program = write_program(tmp_path, "program.py", body + "\n")
    assert run_legacy.main([str(program)]) == status
    errors = capfd.readouterr().err
    assert all(line in errors for line in stderr), errors
    assert "elmo-run-legacy" not in errors


def test_a_program_named_like_an_option_comes_after_a_double_dash(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_program(tmp_path, "-odd.py", "import sys; print(sys.argv)\n")
    assert run_legacy.main(["--", "-odd.py", "x"]) == 0
    assert capfd.readouterr().out.strip() == "['-odd.py', 'x']"


def test_a_console_script_of_the_environment_runs_by_name(tmp_path, capfd, monkeypatch):
    scripts = tmp_path / "bin"
    tool = write_program(scripts, "legacy-tool", f"#!{sys.executable}\nimport sys\nprint(sys.argv)\nsys.exit(5)\n")
    write_program(scripts, "not-python", "#!/bin/sh\necho hello\n")
    monkeypatch.setattr(run_legacy, "environment_scripts_folder", lambda: scripts)
    tool.chmod(0o755)
    (scripts / "not-python").chmod(0o755)
    assert run_legacy.main(["legacy-tool", "--help"]) == 5
    assert capfd.readouterr().out.strip() == str([str(tool), "--help"])
    assert run_legacy.main(["not-python"]) == 2
    assert capfd.readouterr().err.splitlines() == [
        f"elmo-run-legacy: error: not-python: {scripts / 'not-python'} is not a Python program, so it cannot use "
        "Python module names"
    ]


@pytest.mark.integration
def test_every_served_name_is_modeling_elmo_allennlps_own(tmp_path, capfd):
    """Each module of the table imports in the program and holds the very objects of `modeling_elmo.allennlp`; a
    package holds its submodules (`allennlp.nn.util` after `import allennlp.nn`, as in AllenNLP 0.9)."""
    program = write_program(
        tmp_path,
        "program.py",
        """
        import importlib, sys
        from allennlp.commands.elmo import ElmoEmbedder
        from allennlp.modules.elmo import Elmo, _ElmoBiLm, _ElmoCharacterEncoder, batch_to_ids
        from allennlp.nn.util import remove_sentence_boundaries, add_sentence_boundary_token_ids
        from allennlp.data.token_indexers.elmo_indexer import ELMoCharacterMapper
        import allennlp.nn
        import modeling_elmo.allennlp as served
        objects = {name: id(obj) for name, obj in vars(served).items()}
        for module_name in sys.argv[1:]:
            module = importlib.import_module(module_name)
            for name in module.__all__:
                value = getattr(module, name)
                print(module_name, name, objects.get(name) == id(value) or getattr(value, "__qualname__", repr(value)))
        print("nn.util", allennlp.nn.util.remove_sentence_boundaries is served.remove_sentence_boundaries)
        print("allennlp", allennlp.__name__, allennlp.__doc__.startswith("Not AllenNLP"))
        """,
    )
    assert run_legacy.main([str(program), *LEGACY_MODULES]) == 0
    lines = capfd.readouterr().out.splitlines()
    expected = [
        f"{module} {name} {True if hasattr(served, name) else getattr(value, '__qualname__', repr(value))}"
        for module, names in LEGACY_MODULES.items()
        for name, value in names.items()
    ]
    assert lines == [*expected, "nn.util True", "allennlp allennlp True"]
    assert {"allennlp.commands.elmo ElmoEmbedder True", "allennlp.modules.elmo _ElmoBiLm True"} <= set(lines)


@pytest.mark.integration
def test_what_is_not_served_says_so(tmp_path, capfd):
    program = write_program(
        tmp_path,
        "program.py",
        """
        import allennlp.modules.elmo
        try:
            import allennlp.models
        except ModuleNotFoundError as error:
            print("module:", error.name, "|", error)
        try:
            allennlp.modules.elmo.ElmoLstm
        except AttributeError as error:
            print("name:", error)
        from allennlp.modules.elmo import ElmoLstm
        """,
    )
    assert run_legacy.main([str(program)]) == 1
    captured = capfd.readouterr()
    module_line, name_line = captured.out.splitlines()
    assert module_line.startswith(
        "module: allennlp.models | No module named 'allennlp.models': elmo run-legacy serves"
    )
    assert "allennlp.commands.elmo" in module_line and "docs/migrate-seqvec.md" in module_line
    assert name_line.startswith("name: module 'allennlp.modules.elmo' has no attribute 'ElmoLstm'")
    assert "Elmo, _ElmoBiLm, _ElmoCharacterEncoder, batch_to_ids" in name_line
    assert "ImportError: cannot import name 'ElmoLstm' from 'allennlp.modules.elmo'" in captured.err


@pytest.mark.integration
def test_the_names_exist_only_inside_run_legacy():
    """Importing modeling_elmo (and its AllenNLP module) never makes `allennlp` importable."""
    probe = "import modeling_elmo, modeling_elmo.allennlp, importlib.util; print(importlib.util.find_spec('allennlp'))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip().splitlines()[-1] == "None", result.stderr


@pytest.mark.parametrize("where", ["beside the program", "on PYTHONPATH"])
def test_a_real_allennlp_is_never_shadowed(tmp_path, capfd, monkeypatch, where):
    """An importable `allennlp` (here a stand-in package) is refused in one line, and the program does not run."""
    folder = tmp_path / ("program" if where == "beside the program" else "site")
    real = write_program(folder, "allennlp/__init__.py", "")
    if where == "on PYTHONPATH":
        monkeypatch.setenv("PYTHONPATH", str(folder))
    program = write_program(tmp_path, "program/program.py", f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    assert run_legacy.main([str(program)]) == 2
    captured = capfd.readouterr()
    assert captured.err.splitlines() == [
        f"elmo-run-legacy: error: allennlp is importable by {program} ({real}): run-legacy never shadows a real "
        "AllenNLP; run the program without it, or uninstall allennlp (or take it off PYTHONPATH) to use "
        "modeling_elmo's names"
    ]
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: PROGRAM (see elmo-run-legacy --help)"),
        (["--verbose", "seqvec"], "unknown option --verbose: the only option is --help"),
        (["no-such-program", "-i", "x"], "no-such-program: no such script, and no console script of that name in"),
        (["missing/script.py"], "missing/script.py: no such script"),
        (["{folder}"], "{folder}: a folder, not a Python script (name the script, or a console script)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capfd, argv, message):
    argv = [argument.format(folder=tmp_path) for argument in argv]
    try:
        status = run_legacy.main(argv)
    except SystemExit as stop:  # argparse's errors
        status = stop.code
    errors = capfd.readouterr().err.splitlines()
    assert status == 2 and len(errors) == 1 and message.format(folder=tmp_path) in errors[0], errors


def test_help_is_run_legacys_own_before_program(capfd):
    with pytest.raises(SystemExit) as stop:
        run_legacy.main(["--help"])
    assert stop.value.code == 0
    shown = capfd.readouterr().out
    assert shown.startswith("usage: elmo-run-legacy [-h] PROGRAM [ARGS ...]") and "seqvec" in shown
    assert "run-legacy" in SUBCOMMANDS and SUBCOMMANDS["run-legacy"].check is None


@pytest.mark.parametrize("typed", ["elmo run-legacy", "elmo-run-legacy"])
def test_errors_name_the_command_as_typed(tmp_path, capsys, monkeypatch, typed):
    """`elmo run-legacy ...` and `elmo-run-legacy ...` each begin their errors (argument and input) with their name."""
    from modeling_elmo.commands import elmo

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the thread chooser leaves this process as it is

    def run(*arguments: str) -> int:
        if typed == "elmo run-legacy":
            return elmo.main(["run-legacy", *arguments])
        monkeypatch.setattr(sys, "argv", ["elmo-run-legacy", *arguments])
        return elmo.run_legacy()

    missing = tmp_path / "missing.py"
    assert run(str(missing)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{typed}: error: {missing}: no such script, and no console script of that name in "
        f"{run_legacy.environment_scripts_folder()}"
    ]
    with pytest.raises(SystemExit) as exited:
        run("--bogus")
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(f"{typed}: error: unknown option --bogus: ")
