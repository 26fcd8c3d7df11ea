"""Plumbing shared by the console commands (`elmo-*`): argument parsing, model arguments, output-folder locks.

A command in `LIGHT_START_COMMANDS` answers `--help` and argument errors before importing torch and Transformers
(seconds of start-up): in its process `import modeling_elmo` leaves the Auto-class registration to `start_work`, which
the command calls once its arguments are parsed (see `modeling_elmo/__init__.py`). The other commands import what
they use at their start, and the package registers on import as for any user.
"""

import os
import sys

# the console scripts (pyproject.toml's [project.scripts]) whose start imports neither torch nor Transformers
LIGHT_START_COMMANDS = frozenset({"elmo-embed"})


def light_start() -> bool:
    """Whether this process is a console command of `LIGHT_START_COMMANDS` (its script's name is `sys.argv[0]`)."""
    argv = getattr(sys, "argv", None) or [""]
    return os.path.basename(argv[0]) in LIGHT_START_COMMANDS


def start_work() -> None:
    """Register ELMo with the Auto classes (importing torch and Transformers): a command of `LIGHT_START_COMMANDS`
    calls this once its arguments are parsed, before it loads or saves a model."""
    import modeling_elmo

    modeling_elmo.register_auto_classes()
