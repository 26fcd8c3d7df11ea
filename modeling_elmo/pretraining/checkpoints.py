"""Resuming `elmo-pretrain`: which folder `--resume_from_checkpoint` means, and whether it is complete.

The Trainer writes a `checkpoint-N` folder file by file: weights, optimizer, random and stream states, and
`trainer_state.json` last. A run killed while saving leaves a folder without that file, or with it cut short, and a
re-save over an older `checkpoint-N` first removes it (`ElmoPretrainingTrainer._save_checkpoint`), so a folder is
complete exactly when its `trainer_state.json` reads back with the step of its name. `last` takes the newest complete
checkpoint (skipping incomplete ones with a warning); naming an incomplete one is refused.
"""

import json
import logging
import re
from pathlib import Path

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

logger = logging.getLogger("elmo-pretrain")

TRAINER_STATE_NAME = "trainer_state.json"
_CHECKPOINT_NAME = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


class CheckpointError(ValueError):
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
