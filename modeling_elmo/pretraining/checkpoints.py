"""Resuming `elmo-pretrain`: which folder `--resume_from_checkpoint` means, and whether it is complete.

The Trainer writes a `checkpoint-N` folder file by file: weights, optimizer, random and stream states, and
`trainer_state.json` last. A run killed while saving leaves a folder without that file, or with it cut short, and a
re-save over an older `checkpoint-N` first removes it (`ElmoPretrainingTrainer._save_checkpoint`), so a folder is
complete exactly when its `trainer_state.json` reads back with the step of its name. `last` takes the newest complete
checkpoint (skipping incomplete ones with a warning); naming an incomplete one is refused. The files of a complete
folder are read back before resuming (`check_checkpoint_files`), so damaged weights, optimizer or stream states are
refused with one line naming the file instead of a traceback from deep inside the Trainer.
"""

import json
import logging
import pickle
import re
import zipfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..foundation.errors import ToolInputError

logger = logging.getLogger("elmo-pretrain")

TRAINER_STATE_NAME = "trainer_state.json"
WEIGHTS_NAME = "model.safetensors"
STREAM_STATES_PATTERN = "stream_states_*.pt"
_CHECKPOINT_NAME = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


class CheckpointError(ToolInputError, ValueError):
    """A `--resume_from_checkpoint` that cannot be resumed from: the message names the folder."""


def saved_state(checkpoint: Path) -> dict | None:
    """The checkpoint's `trainer_state.json` when the folder is complete (see the module docstring), else None."""
    try:
        state = json.loads((checkpoint / TRAINER_STATE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or type(state.get("global_step")) is not int:
        return None
    named = _CHECKPOINT_NAME.match(checkpoint.name)
    if named and int(named.group(1)) != state["global_step"]:
        return None
    return state


def last_complete_checkpoint(output_dir: Path) -> Path | None:
    """The complete `checkpoint-N` folder of `output_dir` with the largest N, or None."""
    if not output_dir.is_dir():
        return None
    numbered = [
        (int(match.group(1)), path)
        for path in output_dir.iterdir()
        if (match := _CHECKPOINT_NAME.match(path.name)) and path.is_dir()
    ]
    for _, path in sorted(numbered, reverse=True):
        if saved_state(path) is not None:
            return path
        logger.warning(
            f"Skipping {path}: incomplete (no readable {TRAINER_STATE_NAME}; was the run killed while saving it?)."
        )
    return None


def resolve_checkpoint(value: str | None, output_dir: str) -> Path | None:
    """The checkpoint folder `--resume_from_checkpoint value` means (`last`: the newest complete one in `output_dir`),
    checked to be complete; None when not resuming."""
    if not value:
        return None
    if value == "last":
        checkpoint = last_complete_checkpoint(Path(output_dir))
        if checkpoint is None:
            raise CheckpointError(f"--resume_from_checkpoint last: no complete checkpoint in {output_dir}.")
        return checkpoint
    checkpoint = Path(value)
    if not checkpoint.is_dir():
        raise CheckpointError(f"--resume_from_checkpoint {value}: no such folder.")
    if saved_state(checkpoint) is None:
        raise CheckpointError(
            f"--resume_from_checkpoint {value}: incomplete checkpoint (no readable {TRAINER_STATE_NAME}; the run was "
            "probably killed while saving it); resume from an earlier one, or use 'last'."
        )
    return checkpoint


def _check_weights(path: Path, expected_shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse a checkpoint's weights file that is missing, unreadable or cut short, or whose tensors are not the
    model's (names and shapes)."""
    if not path.is_file():
        raise CheckpointError(f"Cannot resume from {path.parent}: no {path.name} (its weights) in it.")
    try:
        with safe_open(path, framework="pt") as weights:
            shapes = {name: tuple(weights.get_slice(name).get_shape()) for name in weights.keys()}
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"Cannot resume from {path.parent}: {path} is damaged or cut short ({error}).") from None
    for name, shape in expected_shapes.items():
        if shapes.get(name) != shape:
            found = f"has shape {shapes[name]}" if name in shapes else "is missing"
            raise CheckpointError(
                f"Cannot resume from {path.parent}: in {path}, {name} {found} (the model needs {shape})."
            )


def _check_archive(path: Path) -> None:
    """Refuse a file `torch.save` wrote (a zip archive) whose content is damaged or cut short (CRC of every member)."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise CheckpointError(f"Cannot resume from {path.parent}: {path} is damaged or cut short ({error}).") from None
    if damaged is not None:
        raise CheckpointError(f"Cannot resume from {path.parent}: {path} is damaged ({damaged} fails its checksum).")


def _is_tensor(value: object) -> bool:
    return isinstance(value, torch.Tensor)


def _check_stream_states(path: Path, layers: int, rows: int) -> None:
    """Refuse stream states that are not, per biLM layer, a hidden and a cell state of `rows` rows per direction."""
    _check_archive(path)
    try:
        states = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError) as error:
        raise CheckpointError(f"Cannot resume from {path.parent}: {path} is not readable ({error}).") from None
    well_formed = (
        isinstance(states, (list, tuple))
        and len(states) == layers
        and all(
            isinstance(state, (list, tuple))
            and len(state) == 2
            and all(_is_tensor(part) and part.dim() == 3 and part.shape[:2] == (2, rows) for part in state)
            for state in states
        )
    )
    if not well_formed:
        raise CheckpointError(
            f"Cannot resume from {path.parent}: {path} does not hold the LSTM states of {layers} layers x "
            f"(hidden, cell) of {rows} rows per direction."
        )


def check_checkpoint_files(
    checkpoint: Path, expected_shapes: dict[str, tuple[int, ...]], layers: int, rows: int
) -> None:
    """Read back what resuming from `checkpoint` loads: the weights (`expected_shapes`: the model's state dict
    shapes), every archive `torch.save` wrote (optimizer, scheduler, random states) and the carried LSTM states
    (`layers` biLM layers, `rows` rows per batch). Raises `CheckpointError` naming the file."""
    _check_weights(checkpoint / WEIGHTS_NAME, expected_shapes)
    for path in sorted([*checkpoint.glob("*.pt"), *checkpoint.glob("*.pth")]):
        if path.match(STREAM_STATES_PATTERN):
            _check_stream_states(path, layers, rows)
        else:
            _check_archive(path)
