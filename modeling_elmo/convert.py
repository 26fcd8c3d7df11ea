"""`elmo-convert`: original ELMo options JSON + HDF5 weights -> a complete Transformers model folder.

The folder holds `config.json` (with a complete `auto_map`), `model.safetensors` (float32), the tokenizer files, the
code files for `trust_remote_code=True` and a `README.md` model card: a complete Hub repo, checked before it is renamed
into place from a temporary sibling directory. `--push-to-hub` then uploads exactly that folder (see `hub.py`).
"""

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import torch

from .configuration_elmo import ElmoConfig
from .hub import HubError, check_push_target, model_repo_problems, push_folder
from .model_card import ModelCardError, render_base_model_card
from .modeling_elmo import ElmoModel
from .original_checkpoint import OriginalCheckpointError, load_original_checkpoint
from .remote_code import CONFIG_AUTO_MAP
from .tokenization_elmo import ElmoTokenizer

ALLENNLP_ELMO_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"


@dataclass(frozen=True)
class Preset:
    """One of the official English ELMo models released by AllenNLP."""

    name: str
    stem: str
    corpus: str
    datasets: tuple[str, ...] = ()  # Hub dataset ids of the training corpus, for the model card metadata

    def source_urls(self, base_url: str = ALLENNLP_ELMO_URL) -> tuple[str, str]:
        """(options URL, weights URL) under `base_url`, laid out as on AllenNLP's server."""
        prefix = f"{base_url.rstrip('/')}/{self.stem}/elmo_{self.stem}"
        return f"{prefix}_options.json", f"{prefix}_weights.hdf5"

    @property
    def options_url(self) -> str:
        return self.source_urls()[0]

    @property
    def weights_url(self) -> str:
        return self.source_urls()[1]


ONE_BILLION_WORD = "1 Billion Word Language Model Benchmark (~800M tokens of news text)"
PRESETS = {
    preset.name: preset
    for preset in (
        Preset("small", "2x1024_128_2048cnn_1xhighway", ONE_BILLION_WORD, ("lm1b",)),
        Preset("medium", "2x2048_256_2048cnn_1xhighway", ONE_BILLION_WORD, ("lm1b",)),
        Preset("original", "2x4096_512_2048cnn_2xhighway", ONE_BILLION_WORD, ("lm1b",)),
        Preset(
            "original-5.5b",
            "2x4096_512_2048cnn_2xhighway_5.5B",
            "5.5B tokens: Wikipedia (1.9B) and WMT 2008-2012 monolingual news crawl (3.6B)",
            ("wikipedia",),
        ),
    )
}

VERIFICATION_SENTENCES = [
    ["The", "bank", "closed", "its", "doors", "."],
    ["We", "sat", "on", "the", "river", "bank", "and", "watched", "the", "boats", "go", "by", "."],
    ["Zürich", "'s", "naïve", "café", "—", "日本語", "!"],
    ["A"],
]
VERIFICATION_TOLERANCE = 1e-5


class ConversionError(RuntimeError):
    """A conversion that cannot proceed; the message names the file, URL or argument."""


@dataclass
class ConversionResult:
    """What a conversion wrote and measured."""

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
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".download-", delete=False) as partial:
        try:
            http_get(location, partial, displayed_filename=target.name)
        except Exception as error:  # any network / HTTP / offline-mode failure
            partial.close()
            os.unlink(partial.name)
            raise ConversionError(f"Could not download {location}: {error}") from error
    os.replace(partial.name, target)
    return target


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verification_batch(tokenizer: ElmoTokenizer) -> dict[str, torch.Tensor]:
    return tokenizer(VERIFICATION_SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")


def max_difference_to_original(folder: Path, reference: ElmoModel) -> float:
    """Reload `folder` with the Auto classes and compare all layers with `reference` (built from the HDF5)."""
    from transformers import AutoModel, AutoTokenizer

    reloaded = AutoModel.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = _verification_batch(tokenizer)
    reference.bilm.use_reference_implementation = True
    with torch.no_grad():
        expected = reference(**batch, output_hidden_states=True).hidden_states
        found = reloaded(**batch, output_hidden_states=True).hidden_states
    reference.bilm.use_reference_implementation = False
    return max(float((a - b).abs().max()) for a, b in zip(expected, found, strict=True))


def _prepare_output(output_dir: Path, overwrite: bool) -> None:
    if output_dir.exists() and not overwrite:
        raise ConversionError(f"Output directory {output_dir} already exists; pass --overwrite to replace it.")
    if output_dir.exists() and not output_dir.is_dir():
        raise ConversionError(f"Output path {output_dir} exists and is not a directory.")
    output_dir.parent.mkdir(parents=True, exist_ok=True)


def _move_into_place(staging: Path, output_dir: Path) -> None:
    """Rename the finished `staging` folder to `output_dir`, replacing an old one only after success."""
    if output_dir.exists():
        retired = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}.old-"))
        os.replace(output_dir, retired / "old")
        os.replace(staging, output_dir)
        shutil.rmtree(retired)
    else:
        os.replace(staging, output_dir)


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
    _prepare_output(output_dir, overwrite)
    options_path, weights_path = resolve_source(options, cache_dir), resolve_source(weights, cache_dir)
    config, state_dict = load_original_checkpoint(options_path, weights_path)
    model = ElmoModel(config)
    model.load_state_dict(state_dict, strict=True)
    model.eval()
    model.config.auto_map = dict(CONFIG_AUTO_MAP)
    tokenizer = ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)
    result = ConversionResult(
        output_dir=output_dir,
        config=config,
        sources={
            "options": {"location": options, "sha256": sha256_of(options_path)},
            "weights": {"location": weights, "sha256": sha256_of(weights_path)},
        },
    )

    staging = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}.partial-"))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; the result should look like any new folder
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if verify:
            result.max_abs_difference = max_difference_to_original(staging, model)
            if result.max_abs_difference > VERIFICATION_TOLERANCE:
                raise ConversionError(
                    f"Verification failed: the converted model differs from the original weights by "
                    f"{result.max_abs_difference:.3g} (tolerance {VERIFICATION_TOLERANCE:g})."
                )
        card = render_base_model_card(
            config,
            sources=result.sources,
            max_abs_difference=result.max_abs_difference,
            preset=PRESETS.get(preset),
            repo_id=repo_id,
        )
        (staging / "README.md").write_text(card, encoding="utf-8")
        problems = model_repo_problems(staging)
        if problems:
            raise ConversionError("The converted folder is incomplete: " + "; ".join(problems))
        _move_into_place(staging, output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-convert",
        description="Convert an original ELMo checkpoint (options JSON + HDF5 weights) to a Transformers folder.",
    )
    source = parser.add_argument_group("source (give --preset, or both --options and --weights)")
    source.add_argument("--options", help="options JSON: local path or http(s) URL")
    source.add_argument("--weights", help="HDF5 weights: local path or http(s) URL")
    source.add_argument("--preset", choices=sorted(PRESETS), help="one of the official English models")
    parser.add_argument("--output", required=True, help="folder to write (must not exist unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument(
        "--verify", action="store_true", help="reload the written folder and compare it with the original weights"
    )
    parser.add_argument("--cache-dir", help="where downloaded originals are kept (default: $HF_HOME/elmo-original)")
    publishing = parser.add_argument_group("publishing (the endpoint is $HF_ENDPOINT, default https://huggingface.co)")
    publishing.add_argument(
        "--push-to-hub", metavar="REPO_ID", help="upload the written folder to this Hub repo (org/name)"
    )
    publishing.add_argument(
        "--private", action="store_true", help="create the repo private (an existing one keeps its visibility)"
    )
    publishing.add_argument("--revision", help="branch to push to (created from main if missing; default main)")
    publishing.add_argument("--commit-message", help="message of the Hub commit")
    publishing.add_argument("--token", help="Hub token with write access (default: $HF_TOKEN or `hf auth login`)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.preset:
        preset = PRESETS[args.preset]
        args.options = args.options or preset.options_url
        args.weights = args.weights or preset.weights_url
    if not (args.options and args.weights):
        parser.error("give --preset, or both --options and --weights")
    publishing = {"--private": args.private, "--revision": args.revision, "--commit-message": args.commit_message}
    given = [flag for flag, value in {**publishing, "--token": args.token}.items() if value]
    if given and not args.push_to_hub:
        parser.error(f"{', '.join(given)}: only used with --push-to-hub")
    try:
        token = check_push_target(args.push_to_hub, args.token) if args.push_to_hub else None
        result = convert_checkpoint(
            args.options,
            args.weights,
            args.output,
            overwrite=args.overwrite,
            verify=args.verify,
            cache_dir=args.cache_dir,
            preset=args.preset,
            repo_id=args.push_to_hub,
        )
        print(f"Wrote {result.output_dir}")
        if result.max_abs_difference is not None:
            print(f"Verification: max abs difference to the original weights = {result.max_abs_difference:.3g}")
        if args.push_to_hub:
            commit_url = push_folder(
                result.output_dir,
                args.push_to_hub,
                token=token,
                private=True if args.private else None,
                revision=args.revision,
                commit_message=args.commit_message,
            )
            print(f"Pushed to {args.push_to_hub}: {commit_url}")
    except (ConversionError, OriginalCheckpointError, HubError, ModelCardError) as error:
        print(f"elmo-convert: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
