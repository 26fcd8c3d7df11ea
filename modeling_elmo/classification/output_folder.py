"""The output folder of `elmo-train-classifier`: used only when it is missing, empty or written by this command.

A run records what it owns in a marker file, `.elmo-train-classifier.json` (`{"complete": bool, "files": [...]}`),
written before the first output and completed with the folder's top-level entries at the end. A later run may reuse
a folder whose entries are all listed there (or whose run never completed: everything in it came from that run);
anything else (a user's file) makes the folder refused, so nothing the user did not ask for is overwritten.
"""

import json
import os
from pathlib import Path

from ..commands.errors import ToolInputError

MARKER = ".elmo-train-classifier.json"


class ForeignFilesError(ToolInputError, ValueError):
    """The output folder holds files that this command did not write."""


def _owned(folder: Path) -> set[str] | None:
    """Names the last run recorded (None: every name, the run did not complete); empty without a marker."""
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return None if not record["complete"] else set(record["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def check_output_folder(folder: str | os.PathLike) -> None:
    """Raise `ForeignFilesError` if `folder` exists and holds entries this command did not write."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ForeignFilesError(f"--output_dir {folder} is a file, not a folder.")
    if not folder.is_dir():
        return
    owned = _owned(folder)
    if owned is None:
        return
    foreign = sorted(entry.name for entry in folder.iterdir() if entry.name != MARKER and entry.name not in owned)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ForeignFilesError(
            f"--output_dir {folder} holds files that elmo-train-classifier did not write ({shown}); "
            "choose an empty or new folder."
        )


def write_json(path: Path, value: object) -> None:
    """Write `value` as JSON to `path` through a temporary file (never a half-written file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(partial, path)


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def claim_output_folder(folder: str | os.PathLike) -> None:
    """Create `folder` and mark the run as started (call after every input was checked)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / MARKER, {"complete": False, "files": []})


def seal_output_folder(folder: str | os.PathLike) -> None:
    """Record every top-level entry of `folder` as written by this command."""
    folder = Path(folder)
    files = sorted(entry.name for entry in folder.iterdir() if entry.name != MARKER)
    write_json(folder / MARKER, {"complete": True, "files": files})


__all__ = [
    "MARKER",
    "ForeignFilesError",
    "check_output_folder",
    "claim_output_folder",
    "seal_output_folder",
    "write_json",
    "write_text",
]
