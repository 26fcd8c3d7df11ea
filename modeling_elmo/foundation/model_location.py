"""The rules of a model argument (a folder or a Hub id `namespace/name`), shared by the commands' argument checks
and the one loader (`inference.pretrained`): a name that is neither an existing path nor a Hub id is a mistyped local
path, refused at once instead of after the Hub's retries (see docs/bad-input.md). It imports only the standard
library (huggingface_hub when a name is checked as a Hub id), so a command checks its arguments before torch loads.
"""

import os
from pathlib import Path

# A model argument is a Hub repo id only in its `namespace/name` form: ELMo models on the Hub all have a namespace
# (the legacy namespace-less ids are Transformers' own canonical models). Anything else that is not an existing folder
# is a mistyped local path, refused at once instead of after the Hub's retries (see docs/bad-input.md).
NO_SUCH_FOLDER = "no such folder; a Hub model is named 'namespace/name'"
# A folder without config.json, most often an original checkpoint's (options JSON + HDF5 weights).
NOT_A_MODEL_FOLDER = "not a model folder: it has no config.json (convert an original checkpoint with elmo-convert)"


def is_hub_repo_id(value: str) -> bool:
    """Whether `value` reads as a Hub model id `namespace/name` (and so not as a local path)."""
    if value.count("/") != 1 or value.startswith((".", "~")) or os.sep != "/" and os.sep in value:
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(value)
    except HFValidationError:
        return False
    return True


def missing_model_folder(value: str) -> bool:
    """Whether the model argument `value` names a local folder that does not exist (see `NO_SUCH_FOLDER`)."""
    if not value.strip():
        return True  # `Path("")` is the current folder
    return not Path(value).expanduser().exists() and not is_hub_repo_id(value)


def model_folder_problem(model_dir: str | os.PathLike) -> str | None:
    """Why `model_dir` is not a model folder (it has no config.json), or None."""
    if (Path(model_dir) / "config.json").is_file():
        return None
    return f"{Path(model_dir)} is {NOT_A_MODEL_FOLDER}."
