"""Publish a saved ELMo folder on the Hugging Face Hub, after checking that it is a complete, self-describing repo.

The check runs before anything is uploaded. The upload is one `upload_folder` call that makes the target revision
mirror the folder (files no longer in the folder are deleted from it; `.gitattributes` is kept). The local folder is
only read, so a failed push leaves it as it was and can simply be retried.
"""

import json
import os
from pathlib import Path

import yaml
from huggingface_hub import HfApi, ModelCard, constants, get_token
from huggingface_hub.errors import HFValidationError, HTTPError
from huggingface_hub.utils import validate_repo_id

from ..foundation.errors import ToolError
from ..foundation.output_folder import reason_of
from .remote_code import remote_code_problems

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"


class HubError(ToolError, RuntimeError):
    """A push that cannot proceed or failed; the message names the repo, folder or setting at fault."""


class IncompleteRepoError(HubError):
    """The folder lacks something a published ELMo repo needs; nothing was uploaded."""


def check_push_target(repo_id: str, token: str | None = None) -> str:
    """Check what a push needs before any work is done; returns the token to push with.

    Raises `HubError` for an invalid repo id (`name` or `namespace/name`), offline mode, or no token (`token`, else
    `HF_TOKEN` or the one saved by `hf auth login`).
    """
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise HubError(f"Invalid repo id {repo_id!r}: {error}") from None
    if constants.HF_HUB_OFFLINE:
        raise HubError(f"Cannot push to {repo_id}: HF_HUB_OFFLINE is set; unset it to reach the Hub.")
    token = token or get_token()
    if not token:
        raise HubError(
            f"No Hugging Face token to push to {repo_id} with: pass --token (token=...), set HF_TOKEN, "
            "or run `hf auth login`."
        )
    return token


def _weights_problems(folder: Path) -> list[str]:
    if (folder / WEIGHTS_FILE).is_file():
        return []
    index_file = folder / WEIGHTS_INDEX_FILE
    if not index_file.is_file():
        return [f"no weights: neither {WEIGHTS_FILE} nor {WEIGHTS_INDEX_FILE}"]
    try:
        shards = set(json.loads(index_file.read_text(encoding="utf-8"))["weight_map"].values())
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        return [f"{WEIGHTS_INDEX_FILE}: no readable weight_map ({error!r})"]
    return [
        f"{WEIGHTS_INDEX_FILE} lists {shard}, which is missing"
        for shard in sorted(shards)
        if not (folder / shard).is_file()
    ]


def config_problems(folder: Path) -> list[str]:
    """Why `folder/config.json` is not an ELMo config; empty when it is one."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ["config.json is missing"]
    except OSError as error:
        return [f"config.json is unreadable ({reason_of(error, with_file=False)})"]
    except ValueError as error:
        return [f"config.json is not valid JSON ({error})"]
    model_type = config.get("model_type") if isinstance(config, dict) else None
    return [] if model_type == "elmo" else [f"config.json: model_type must be 'elmo', got {model_type!r}"]


def _card_problems(folder: Path) -> list[str]:
    card_file = folder / "README.md"
    if not card_file.is_file():
        return ["README.md (the model card) is missing"]
    try:
        card = ModelCard.load(card_file)
    except (ValueError, yaml.YAMLError) as error:
        return [f"README.md: unreadable YAML metadata ({error})"]
    if card.data.library_name != "transformers":
        return ["README.md: the metadata must say `library_name: transformers`"]
    return []


def model_repo_problems(folder: str | os.PathLike) -> list[str]:
    """Everything that keeps `folder` from being a complete ELMo model repo; empty when it is complete."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder} is not a directory"]
    problems = config_problems(folder) + _weights_problems(folder)
    if not (folder / "tokenizer_config.json").is_file():
        problems.append("tokenizer_config.json is missing")
    return problems + _card_problems(folder) + remote_code_problems(folder)


def check_model_repo(folder: str | os.PathLike) -> None:
    """Raise `IncompleteRepoError` listing every problem unless `folder` is a complete ELMo model repo."""
    problems = model_repo_problems(folder)
    if problems:
        listing = "\n".join(f"  - {problem}" for problem in problems)
        raise IncompleteRepoError(f"{folder} is not a complete ELMo model repo; nothing was uploaded:\n{listing}")


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Check `folder`, create `repo_id` if needed (and the branch `revision`), upload; returns the commit URL.

    `private=None` keeps an existing repo's visibility (new repos are public). The endpoint is `HF_ENDPOINT`.
    """
    folder = Path(folder)
    token = check_push_target(repo_id, token)
    check_model_repo(folder)
    api = HfApi(token=token)
    try:
        repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
        if revision is not None:
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            revision=revision,
            commit_message=commit_message or f"Upload ELMo model from {folder.name}",
            delete_patterns="*",
        )
    except (HTTPError, OSError, ValueError, RuntimeError) as error:  # HTTP, network, malformed responses
        raise HubError(
            f"Pushing {folder} to {api.endpoint}/{repo_id} failed: {error}\n"
            f"The local folder is unchanged; run the same command again to retry."
        ) from error
    return commit.commit_url


__all__ = [
    "HubError",
    "IncompleteRepoError",
    "check_model_repo",
    "check_push_target",
    "config_problems",
    "model_repo_problems",
    "push_folder",
]
