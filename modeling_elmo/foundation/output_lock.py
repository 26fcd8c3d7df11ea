"""One live run per output folder: a Trainer command holds its `--output_dir`'s claim (`owned_files.output_claimed`,
the one claim and the one lock of every output) while it writes there. The kernel releases the lock when the process
ends, however it ends (a killed run leaves nothing stuck), and no lock file is written into the folder (the claim
lies beside it)."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import ToolInputError
from .output_folder import parent_folders
from .owned_files import output_claimed


class OutputFolderInUseError(ToolInputError, ValueError):
    """The `--output_dir` is being written by another live run."""


@contextlib.contextmanager
def locked_output_dir(output_dir: str | os.PathLike, prog: str) -> Iterator[Path]:
    """Create `output_dir` (and its parents) and hold its claim for the `with` block; raise `OutputFolderInUseError`
    at once if another process holds it. The folders created are removed again where the block fails and leaves
    them empty."""
    folder = Path(output_dir)
    busy = f"--output_dir {output_dir} is in use by another running {prog}"
    with (
        parent_folders(folder / "entry"),  # the folder and its parents, removed again if the run fails at once
        output_claimed(folder, prog, OutputFolderInUseError, busy=busy),
    ):
        yield folder


def run_output_dir_lock(training_args: Any, prog: str) -> contextlib.AbstractContextManager:
    """The lock of a Trainer run's `--output_dir` (`training_args.output_dir`), held by the run's main process (the
    others of a multi-process run write beside it)."""
    if training_args.process_index != 0:
        return contextlib.nullcontext()
    return locked_output_dir(training_args.output_dir, prog)
