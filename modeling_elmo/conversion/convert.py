"""The conversion of `elmo-convert` (its command: `convert_command.py`): original ELMo options JSON + HDF5 weights ->
a complete Transformers model folder; `--model-dir` reads the same weights as the NLPL vector repository ships them
(`nlpl.py`) or an ELMoForManyLangs model (`efml_convert.py`).

The folder holds `config.json` (with a complete `auto_map`), `model.safetensors` (float32), the tokenizer files, the
code files for `trust_remote_code=True` and a `README.md` model card: a complete Hub repo, checked before it is renamed
into place. `--push-to-hub` then uploads exactly that folder (see `modeling_elmo.hub.push`).

Writing is all or nothing (`modeling_elmo.foundation.output_folder`'s policy). The folder is built in a hidden work
folder beside the output, `.OUTPUT.partial-XXXX`, whose record names its owner (host and pid); a later run removes
such folders once their process is gone. Every file gets the permissions the umask gives a new file. `--overwrite`
replaces only a folder that elmo-convert could have written (an ELMo `config.json` and nothing but the files listed
in `OUTPUT_FILES` and the package's code files) or an empty one, and never the current directory or one of its
parents; the old folder is removed only once the new one is in place.
"""

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import torch
from safetensors import SafetensorError
from transformers.utils import logging

from ..configuration_elmo import ElmoConfig
from ..formats.original_checkpoint import load_original_checkpoint
from ..foundation.errors import ToolError
from ..foundation.file_hash import sha256_of
from ..foundation.output_folder import (
    OutputKind,
    move_into_place,
    new_file_mode,
    reason_of,
    replaced_atomically,
    work_folder,
)
from ..foundation.owned_files import output_folder_claimed, record_folder
from ..hub.model_card import render_base_model_card
from ..hub.push import config_problems, model_repo_problems
from ..hub.source_facts import ALLENNLP_SOURCE, SourceFacts
from ..modeling_elmo import ElmoModel
from ..tokenization_elmo import ElmoTokenizer
from .presets import PRESETS

logger = logging.get_logger(__name__)

# What a converted folder holds: these files and the package's code files. `--overwrite` replaces nothing else.
# `vocab.txt`: the source's word list when it has one (NLPL models), for the token-embedding table;
# `special_tokens_map.json`: written with the tokenizer by Transformers 4.x.
VOCABULARY_FILE = "vocab.txt"
OUTPUT_FILES = frozenset(
    {
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "README.md",
        VOCABULARY_FILE,
    }
)
CODE_FILES = frozenset(path.name for path in Path(__file__).parent.parent.glob("*.py"))  # the remote code


VERIFICATION_SENTENCES = [
    ["The", "bank", "closed", "its", "doors", "."],
    ["We", "sat", "on", "the", "river", "bank", "and", "watched", "the", "boats", "go", "by", "."],
    ["Zürich", "'s", "naïve", "café", "—", "日本語", "!"],
    ["A"],
]
VERIFICATION_TOLERANCE = 1e-5


class ConversionError(ToolError, RuntimeError):
    """A conversion that cannot proceed; the message names the file, URL or argument."""


@dataclass
class ConversionResult:
    """What a conversion wrote: the folder, its config, the source files (location and sha256 by name) and, with
    `--verify`, the largest difference between the folder's layers and the original's."""

    output_dir: Path
    config: ElmoConfig
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    max_abs_difference: float | None = None


def _is_url(location: str) -> bool:
    return urlparse(location).scheme in ("http", "https")


def resolve_source(location: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """A local path as is; an http(s) URL downloaded once (with a progress bar) into the HF cache and reused."""
    if not _is_url(location):
        return Path(location)
    from huggingface_hub import constants
    from huggingface_hub.file_download import http_get

    cache_root = Path(cache_dir) if cache_dir else Path(constants.HF_HOME) / "elmo-original"
    target = cache_root / hashlib.sha256(location.encode()).hexdigest()[:16] / Path(urlparse(location).path).name
    if target.is_file():
        return target
    # huggingface_hub 1.x refuses downloads itself in offline mode; 0.x (beside Transformers 4.x) may not
    offline = constants.is_offline_mode() if hasattr(constants, "is_offline_mode") else constants.HF_HUB_OFFLINE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConversionError(f"Cannot write to the download cache {cache_root}: {reason_of(error)}") from error
    with replaced_atomically(target, ConversionError) as stream:  # Ctrl-C included: no partial download stays
        try:
            if offline:
                raise ConnectionError("offline mode is enabled (HF_HUB_OFFLINE).")
            http_get(location, stream, displayed_filename=target.name)
        except Exception as error:  # any network / HTTP / offline-mode failure
            raise ConversionError(f"Could not download {location}: {error}") from error
    return target


def _verification_batch(tokenizer: ElmoTokenizer) -> dict[str, torch.Tensor]:
    return tokenizer(VERIFICATION_SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")


def max_difference_to_original(folder: Path, reference: ElmoModel) -> float:
    """Reload `folder` with the Auto classes and compare all layers with `reference` (built from the HDF5)."""
    from transformers import AutoModel, AutoTokenizer

    reloaded = AutoModel.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = _verification_batch(tokenizer)
    reference.set_implementation("reference")
    with torch.no_grad():
        expected = reference(**batch, output_hidden_states=True).hidden_states
        found = reloaded(**batch, output_hidden_states=True).hidden_states
    # torch's max keeps a NaN wherever it is; Python's max() would drop it unless it came first.
    return float(torch.stack([(a - b).abs().max() for a, b in zip(expected, found, strict=True)]).max())


def _architecture_problems(folder: Path) -> list[str]:
    """Why `folder` (with a readable ELMo `config.json`) is not a converted biLM: a fine-tuned model is never one."""
    architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures")
    if architectures != ["ElmoModel"]:
        return [f"its config.json describes {architectures}, not a converted ElmoModel (a fine-tuned model?)"]
    return []


# elmo-convert's folder: an ELMo `config.json` of an ElmoModel and nothing but `OUTPUT_FILES` and code files.
CONVERTED_FOLDER = OutputKind(
    "elmo-convert",
    OUTPUT_FILES | CODE_FILES,
    lambda folder: config_problems(folder) or _architecture_problems(folder),
    ConversionError,
)


def converted_output_claimed(
    output_dir: Path, overwrite: bool, inputs: tuple[str, ...]
) -> contextlib.AbstractContextManager[None]:
    """`output_folder_claimed` for a converted folder: before any work, refuse an output it must not replace (the
    inputs that are URLs are nothing to protect), then hold the output's claim for the block, which converts."""
    local_inputs = tuple(location for location in inputs if not _is_url(location))
    return output_folder_claimed(output_dir, overwrite, local_inputs, CONVERTED_FOLDER)


def model_from_original(options_path: Path, weights_path: Path) -> tuple[ElmoModel, ElmoTokenizer]:
    """The model (in eval mode) and tokenizer of a local original checkpoint (options JSON + HDF5 weights)."""
    config, state_dict = load_original_checkpoint(options_path, weights_path)
    model = ElmoModel(config)
    model.load_state_dict(state_dict, strict=True)
    return model.eval(), ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)


def convert_checkpoint(
    options: str,
    weights: str,
    output_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    cache_dir: str | os.PathLike | None = None,
    preset: str | None = None,
    repo_id: str | None = None,
) -> ConversionResult:
    """Convert an original checkpoint (local paths or URLs) into a model folder; see the module docstring.

    `repo_id` is the Hub repo the folder is meant for; the model card's usage snippets load it by that name.
    """
    output_dir = Path(output_dir)
    with converted_output_claimed(output_dir, overwrite, (options, weights)):
        options_path, weights_path = resolve_source(options, cache_dir), resolve_source(weights, cache_dir)
        model, tokenizer = model_from_original(options_path, weights_path)
        result = ConversionResult(
            output_dir=output_dir,
            config=model.config,
            sources={
                "options": {"location": options, "sha256": sha256_of(options_path)},
                "weights": {"location": weights, "sha256": sha256_of(weights_path)},
            },
        )
        verify_against = (lambda folder: max_difference_to_original(folder, model)) if verify else None
        facts = PRESETS[preset].facts if preset else ALLENNLP_SOURCE
        write_model_folder(model, tokenizer, result, verify_against, facts=facts, repo_id=repo_id)
    return result


def write_model_folder(
    model: ElmoModel,
    tokenizer: ElmoTokenizer,
    result: ConversionResult,
    verify_against: Callable[[Path], float] | None = None,
    *,
    facts: SourceFacts = ALLENNLP_SOURCE,
    repo_id: str | None = None,
    vocabulary: Path | None = None,
) -> None:
    """Write `model`, `tokenizer`, the card and the remote code to `result.output_dir`, all or nothing (see the module
    docstring; the caller holds the output's claim, `converted_output_claimed`). `verify_against(folder)` gives the
    max abs difference of the written folder to the source, which must be within `VERIFICATION_TOLERANCE`; it is kept
    in `result`. `facts`: what the card states about the source; `vocabulary`: the source's word list, copied to
    `vocab.txt`."""
    output_dir, config = result.output_dir, result.config
    try:
        with work_folder(output_dir, CONVERTED_FOLDER.tool) as folder:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            if vocabulary is not None:
                shutil.copyfile(vocabulary, folder / VOCABULARY_FILE)
            if verify_against is not None:
                result.max_abs_difference = verify_against(folder)
                if not result.max_abs_difference <= VERIFICATION_TOLERANCE:  # NaN fails too
                    raise ConversionError(
                        f"Verification failed: the converted model differs from the original weights by "
                        f"{result.max_abs_difference:.3g} (tolerance {VERIFICATION_TOLERANCE:g})."
                    )
            card = render_base_model_card(
                config,
                sources=result.sources,
                max_abs_difference=result.max_abs_difference,
                source=facts,
                repo_id=repo_id,
            )
            (folder / "README.md").write_text(card, encoding="utf-8")
            problems = model_repo_problems(folder)
            if problems:
                raise ConversionError("The converted folder is incomplete: " + "; ".join(problems))
            mode = new_file_mode()  # safetensors writes model.safetensors 0600
            for path in folder.iterdir():
                if path.is_file():
                    path.chmod(mode)
            record_folder(folder, CONVERTED_FOLDER.tool, ConversionError)
            move_into_place(folder, output_dir, CONVERTED_FOLDER)
    except (OSError, SafetensorError) as error:
        kept = "; the existing folder is unchanged" if output_dir.exists() else ""
        raise ConversionError(f"Could not write {output_dir}: {reason_of(error)}{kept}.") from error
