"""The workshop of the console commands: `elmo` and its subcommands (`elmo`, with the `elmo-*` scripts as
aliases), argument parsing (`arguments`, `trainer_flags`, `trainer_command`), output-folder locks, memory checks.

Every console script answers `--help` and argument errors before importing torch and Transformers (seconds of
start-up): in its process `import modeling_elmo` leaves the Auto-class registration to `start_work`, which `elmo`
calls once the arguments are parsed (see `modeling_elmo/__init__.py` and `commands/elmo.py`). Any other process
registers on import, as a library user expects.
"""

import os
import sys

# the console scripts (pyproject.toml's [project.scripts]): `elmo` and its aliases (`elmo.ALIASES`)
LIGHT_START_COMMANDS = frozenset(
    {
        "elmo",
        "elmo-convert",
        "elmo-embed",
        "elmo-export",
        "elmo-export-onnx",
        "elmo-pretrain",
        "elmo-publish",
        "elmo-run-legacy",
        "elmo-serve",
        "elmo-train-classifier",
        "elmo-train-ner",
    }
)


def light_start() -> bool:
    """Whether this process is a console command of `LIGHT_START_COMMANDS` (its script's name is `sys.argv[0]`)."""
    argv = getattr(sys, "argv", None) or [""]
    return os.path.basename(argv[0]) in LIGHT_START_COMMANDS


def start_work() -> None:
    """Register ELMo with the Auto classes (importing torch and Transformers): a console command calls this once its
    arguments are parsed, before it loads or saves a model."""
    import modeling_elmo

    modeling_elmo.register_auto_classes()
