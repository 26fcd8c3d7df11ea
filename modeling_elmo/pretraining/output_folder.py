"""The `--output_dir` of `elmo-pretrain`, checked before anything runs: a new or empty folder that can be written,
or the folder of the run being resumed. A second run never writes over a first one's files (Transformers 5 has no
`--overwrite_output_dir`; choose another folder or delete the old one yourself)."""

import os
from pathlib import Path

from ..commands.errors import ToolInputError


class OutputFolderError(ToolInputError, ValueError):
    """An `--output_dir` that this run must not or cannot write to."""


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output_dir(output_dir: str, resumed_checkpoint: Path | None) -> None:
    """Refuse an `output_dir` that is a file, that cannot be created or written, or that holds files, unless the
    run resumes from a checkpoint inside it."""
    path = Path(output_dir)
    if path.is_dir():
        content = sorted(entry.name for entry in path.iterdir())
        resuming_here = resumed_checkpoint is not None and resumed_checkpoint.absolute().parent == path.absolute()
        if content and not resuming_here:
            shown = ", ".join(content[:3]) + (f" and {len(content) - 3} more" if len(content) > 3 else "")
            raise OutputFolderError(
                f"--output_dir {output_dir} is not empty (it holds {shown}); choose a new folder, or continue the "
                "run saved there with --resume_from_checkpoint last."
            )
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise OutputFolderError(f"--output_dir {output_dir}: {existing} is a file, not a folder.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputFolderError(f"--output_dir {output_dir}: {existing} is not writable.")
