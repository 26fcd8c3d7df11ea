"""One live run per output folder: a command holds an exclusive `flock` on its `--output_dir` while it writes there.
The kernel releases the lock when the process ends, however it ends (a killed run leaves nothing stuck), and no lock
file is written into the folder."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import ToolInputError
from .owned_files import claimed


class OutputFolderInUseError(ToolInputError, ValueError):
    """The `--output_dir` is being written by another live run."""


@contextlib.contextmanager
def locked_output_dir(output_dir: str | os.PathLike, prog: str) -> Iterator[Path]:
    """Create `output_dir` (and its parents) and hold its lock for the `with` block; raise `OutputFolderInUseError`
    at once if another process holds it."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    busy = f"--output_dir {output_dir} is in use by another running {prog}; wait for it to end, or choose another "
    busy += "folder."
    with claimed(folder, busy, OutputFolderInUseError):
        yield folder


def run_output_dir_lock(training_args: Any, prog: str) -> contextlib.AbstractContextManager:
    """The lock of a Trainer run's `--output_dir` (`training_args.output_dir`), held by the run's main process (the
    others of a multi-process run write beside it)."""
    if training_args.process_index != 0:
        return contextlib.nullcontext()
    return locked_output_dir(training_args.output_dir, prog)
