"""`elmo-convert`: original ELMo options JSON + HDF5 weights -> a complete Transformers model folder; `--model-dir`
reads the same weights as the NLPL vector repository ships them (`nlpl.py`) or an ELMoForManyLangs model
(`efml_convert.py`).

The folder holds `config.json` (with a complete `auto_map`), `model.safetensors` (float32), the tokenizer files, the
code files for `trust_remote_code=True` and a `README.md` model card: a complete Hub repo, checked before it is renamed
into place. `--push-to-hub` then uploads exactly that folder (see `modeling_elmo.hub.push`).

Writing is all or nothing. The folder is built in a hidden work folder beside the output, `.OUTPUT.partial-XXXX`, that
holds an owner file (host and pid); a later run removes such folders once their process is gone. Every file gets the
permissions the umask gives a new file. `--overwrite` replaces only a folder that elmo-convert could have written (an
ELMo `config.json` and nothing but the files listed in `OUTPUT_FILES` and the package's code files) or an empty one,
and never the current directory or one of its parents; the old folder is removed only once the new one is in place.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import torch
from safetensors import SafetensorError
from transformers.utils import logging

from ..configuration_elmo import ElmoConfig
from ..hub.model_card import ALLENNLP_SOURCE, ModelCardError, SourceFacts, render_base_model_card
from ..hub.push import HubError, check_push_target, config_problems, model_repo_problems, push_folder
from ..modeling_elmo import ElmoModel
from ..runtime.cpu_threads import configure_cpu_threads
from ..tokenization_elmo import ElmoTokenizer
from .efml import EfmlFormatError
from .original_checkpoint import OriginalCheckpointError, load_original_checkpoint
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
OWNER_FILE = "owner.json"  # in a work folder: {"host": ..., "pid": ...} of the elmo-convert process writing it


VERIFICATION_SENTENCES = [
    ["The", "bank", "closed", "its", "doors", "."],
    ["We", "sat", "on", "the", "river", "bank", "and", "watched", "the", "boats", "go", "by", "."],
    ["Zürich", "'s", "naïve", "café", "—", "日本語", "!"],
    ["A"],
]
VERIFICATION_TOLERANCE = 1e-5
SOURCE_FORMATS = ("original", "elmoformanylangs", "nlpl")  # `--from`


class ConversionError(RuntimeError):
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
        partial = tempfile.NamedTemporaryFile(dir=target.parent, prefix=".download-", delete=False)
    except OSError as error:
        raise ConversionError(f"Cannot write to the download cache {cache_root}: {_reason(error)}") from error
    try:
        with partial:
            if offline:
                raise ConnectionError("offline mode is enabled (HF_HUB_OFFLINE).")
            http_get(location, partial, displayed_filename=target.name)
        os.replace(partial.name, target)
    except Exception as error:  # any network / HTTP / offline-mode failure
        raise ConversionError(f"Could not download {location}: {error}") from error
    finally:  # Ctrl-C included: no partial download stays in the cache
        if os.path.exists(partial.name):
            os.unlink(partial.name)
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
    reference.set_implementation("reference")
    with torch.no_grad():
        expected = reference(**batch, output_hidden_states=True).hidden_states
        found = reloaded(**batch, output_hidden_states=True).hidden_states
    # torch's max keeps a NaN wherever it is; Python's max() would drop it unless it came first.
    return float(torch.stack([(a - b).abs().max() for a, b in zip(expected, found, strict=True)]).max())


def _reason(error: OSError | SafetensorError) -> str:
    """The cause of a failed write, on one line."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror} ({error.filename})" if error.filename else error.strerror
    return " ".join(str(error).split())


def _architecture_problems(folder: Path) -> list[str]:
    """Why `folder` (with a readable ELMo `config.json`) is not a converted biLM: a fine-tuned model is never one."""
    architectures = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures")
    if architectures != ["ElmoModel"]:
        return [f"its config.json describes {architectures}, not a converted ElmoModel (a fine-tuned model?)"]
    return []


@dataclass(frozen=True)
class OutputKind:
    """What a tool writes as its output folder, for `--overwrite`: `tool` names it in messages, the folder holds
    nothing but `files`, and `problems(folder)` says why a folder of such files is still not one the tool wrote."""

    tool: str
    files: frozenset[str]
    problems: Callable[[Path], list[str]]


# elmo-convert's folder: an ELMo `config.json` of an ElmoModel and nothing but `OUTPUT_FILES` and code files.
CONVERTED_FOLDER = OutputKind(
    "elmo-convert", OUTPUT_FILES | CODE_FILES, lambda folder: config_problems(folder) or _architecture_problems(folder)
)


def _check_replaceable(output_dir: Path, kind: OutputKind = CONVERTED_FOLDER) -> None:
    """Refuse to replace `output_dir` unless it is empty or a folder `kind.tool` wrote (see `OutputKind`)."""
    try:
        entries = sorted(output_dir.iterdir(), key=lambda path: path.name)
    except OSError as error:
        raise ConversionError(f"Cannot read the output folder {output_dir}: {_reason(error)}.") from error
    unexpected = [
        path.name + ("/" if path.is_dir() else "")
        for path in entries
        if path.name not in kind.files or path.is_symlink() or not path.is_file()
    ]
    if unexpected:
        more = f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else ""
        problems = [f"it holds {', '.join(unexpected[:5])}{more}"]
    else:
        problems = kind.problems(output_dir) if entries else []
    if problems:
        raise ConversionError(
            f"--overwrite replaces only a folder {kind.tool} wrote, or an empty one, and {output_dir} is not one "
            f"({problems[0]}). Choose another --output, or move those files away."
        )


def _check_output(
    output_dir: Path, overwrite: bool, inputs: tuple[str, ...], kind: OutputKind = CONVERTED_FOLDER
) -> None:
    """Refuse an output location the new folder cannot or must not replace, before any work is done."""
    resolved, cwd = output_dir.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ConversionError(
            f"--output {output_dir} is the current directory or one of its parents ({resolved}); the converted "
            "folder replaces the output folder as a whole, which cannot be done to the directory you are in. "
            "Give a folder outside the current directory's path, e.g. a new subfolder."
        )
    if output_dir.is_symlink():
        raise ConversionError(f"Output path {output_dir} is a symbolic link; give the folder it points to instead.")
    if not output_dir.exists():
        ancestor = next(path for path in resolved.parents if path.exists())
        if not ancestor.is_dir():
            raise ConversionError(f"Cannot create {output_dir}: {ancestor} is not a directory.")
        return
    if not output_dir.is_dir():
        raise ConversionError(f"Output path {output_dir} exists and is not a directory.")
    if not overwrite:
        raise ConversionError(f"Output directory {output_dir} already exists; pass --overwrite to replace it.")
    for location in inputs:
        if not _is_url(location) and Path(location).resolve().is_relative_to(resolved):
            raise ConversionError(f"{output_dir} contains the input {location}; --overwrite would delete it.")
    _check_replaceable(output_dir, kind)


def _owner_is_gone(work: Path) -> bool:
    """Whether `work` is an elmo-convert work folder whose process is known to be gone: its owner file names this
    host and a pid that no longer runs. Anything else (no or unreadable owner file, another host) is left alone."""
    try:
        owner = json.loads((work / OWNER_FILE).read_text(encoding="utf-8"))
        host, pid = owner["host"], owner["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if host != socket.gethostname() or type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # alive under another user, or not a pid at all
        return False
    return False


def _remove_stale_work_folders(output_dir: Path) -> None:
    """Remove the work folders that killed conversions to `output_dir` left beside it.

    A run killed between moving the old output aside and moving the new one in left the old folder in `old/`: it is put
    back where it was.
    """
    prefix = f".{output_dir.name}.partial-"
    try:
        candidates = sorted(output_dir.parent.iterdir())
    except OSError:  # no parent folder yet, or an unreadable one: nothing of ours there
        return
    for work in candidates:
        if not work.name.startswith(prefix) or work.is_symlink() or not work.is_dir() or not _owner_is_gone(work):
            continue
        old = work / "old"
        if old.is_dir() and not os.path.lexists(output_dir):
            try:
                os.replace(old, output_dir)
            except OSError:
                continue  # the only copy of the previous output: leave it
        shutil.rmtree(work, ignore_errors=True)
        logger.warning(f"Removed {work}, left behind by an interrupted elmo-convert or elmo-export run.")


def _umask() -> int:
    umask = os.umask(0o077)  # briefly the strictest mask, so that a file created meanwhile is never too open
    os.umask(umask)
    return umask


@contextmanager
def parent_folders(path: Path) -> Iterator[None]:
    """Create the missing parent folders of `path`; when the block fails, remove again those that this call created
    and that are still empty, so that a failed command leaves the file system as it found it."""
    created = [parent for parent in path.parents if not parent.exists()]  # the deepest first
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for parent in created:
            try:
                parent.rmdir()
            except OSError:  # not empty (something else wrote there meanwhile) or already gone: leave it
                break
        raise


@contextmanager
def _work_folder(output_dir: Path) -> Iterator[Path]:
    """Yield an empty `model/` folder inside a new hidden work folder beside `output_dir`, marked with this process's
    owner file. The work folder is removed on exit, unless it holds the previous output that could not be put back;
    parent folders created for it are removed again when the block fails."""
    with parent_folders(output_dir):
        work = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}.partial-"))
        try:
            (work / OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
            model = work / "model"
            model.mkdir()  # unlike the mkdtemp folder (0700), with the umask's permissions
            yield model
        finally:
            if not (work / "old").exists():
                shutil.rmtree(work, ignore_errors=True)


def _move_into_place(model: Path, output_dir: Path, kind: OutputKind = CONVERTED_FOLDER) -> None:
    """Rename the finished `model` folder to `output_dir`. An existing output is moved aside into the work folder first
    and removed once the new folder is in place, or put back if that fails."""
    if not output_dir.exists():
        os.replace(model, output_dir)
        return
    _check_replaceable(output_dir, kind)  # again: it may have changed while the conversion ran
    old = model.parent / "old"
    os.replace(output_dir, old)
    try:
        os.replace(model, output_dir)
    except OSError as error:
        try:
            os.replace(old, output_dir)
        except OSError:
            raise ConversionError(
                f"Could not move the new folder to {output_dir} ({_reason(error)}) nor the previous one back; the "
                f"previous one is in {old}."
            ) from error
        raise
    shutil.rmtree(old, ignore_errors=True)


def prepare_output(
    output_dir: Path, overwrite: bool, inputs: tuple[str, ...], kind: OutputKind = CONVERTED_FOLDER
) -> None:
    """Before any work: clean up after killed runs, then refuse an output that a new folder of `kind` must not
    replace (what `elmo-convert`, its ELMoForManyLangs path and `elmo-export` all call first)."""
    _remove_stale_work_folders(output_dir)  # first: it may put back an output that a killed run had moved aside
    _check_output(output_dir, overwrite, inputs, kind)


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
    prepare_output(output_dir, overwrite, (options, weights))
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
    docstring; the output was checked with `prepare_output`). `verify_against(folder)` gives the max abs difference of
    the written folder to the source, which must be within `VERIFICATION_TOLERANCE`; it is kept in `result`. `facts`:
    what the card states about the source; `vocabulary`: the source's word list, copied to `vocab.txt`."""
    output_dir, config = result.output_dir, result.config
    try:
        with _work_folder(output_dir) as folder:
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
            mode = 0o666 & ~_umask()  # what a new file gets; safetensors writes model.safetensors 0600
            for path in folder.iterdir():
                if path.is_file():
                    path.chmod(mode)
            _move_into_place(folder, output_dir)
    except (OSError, SafetensorError) as error:
        kept = "; the existing folder is unchanged" if output_dir.exists() else ""
        raise ConversionError(f"Could not write {output_dir}: {_reason(error)}{kept}.") from error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-convert",
        description="Convert an ELMo checkpoint (bilm-tf options JSON + HDF5 weights, an NLPL vector repository model "
        "or an ELMoForManyLangs model) to a Transformers folder. See docs/conversion-sources.md.",
    )
    parser.add_argument(
        "--from",
        dest="source_format",
        choices=SOURCE_FORMATS,
        help="format of the source: 'original' (bilm-tf/AllenNLP options JSON + HDF5; the default without "
        "--model-dir), 'nlpl' (an NLPL vector repository model, ZIP or folder; the default with --model-dir) or "
        "'elmoformanylangs' (an ELMoForManyLangs model folder)",
    )
    parser.add_argument("--model-dir", help="the source model: folder, or ZIP / ZIP URL for --from nlpl")
    source = parser.add_argument_group("source (give --preset, both --options and --weights, or --model-dir)")
    source.add_argument("--options", help="options JSON: local path or http(s) URL")
    source.add_argument("--weights", help="HDF5 weights: local path or http(s) URL")
    source.add_argument("--preset", choices=sorted(PRESETS), help="one of the official English models")
    parser.add_argument("--output", required=True, help="folder to write (must not exist unless --overwrite)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing output folder written by elmo-convert (or empty)"
    )
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
    if argv is None:  # the command: this process is its own
        configure_cpu_threads()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.source_format = args.source_format or ("nlpl" if args.model_dir else "original")
    if args.source_format != "original":
        refused = ["--options", "--weights", "--preset"]
        refused += ["--cache-dir"] if args.source_format == "elmoformanylangs" else []  # a folder: nothing to download
        if not args.model_dir or any(getattr(args, flag[2:].replace("-", "_")) for flag in refused):
            parser.error(f"--from {args.source_format} takes --model-dir (and no {', '.join(refused)})")
    elif args.model_dir:
        parser.error("--model-dir: give --from nlpl (the default with --model-dir) or --from elmoformanylangs")
    elif args.preset:
        preset = PRESETS[args.preset]
        args.options = args.options or preset.options_url
        args.weights = args.weights or preset.weights_url
    if args.source_format == "original" and not (args.options and args.weights):
        parser.error("give --preset, both --options and --weights, or --model-dir")
    publishing = {"--private": args.private, "--revision": args.revision, "--commit-message": args.commit_message}
    given = [flag for flag, value in {**publishing, "--token": args.token}.items() if value]
    if given and not args.push_to_hub:
        parser.error(f"{', '.join(given)}: only used with --push-to-hub")
    try:
        token = check_push_target(args.push_to_hub, args.token) if args.push_to_hub else None
        if args.source_format == "elmoformanylangs":
            from .efml_convert import convert_efml

            result = convert_efml(
                args.model_dir, args.output, overwrite=args.overwrite, verify=args.verify, repo_id=args.push_to_hub
            )
        elif args.source_format == "nlpl":
            from .nlpl import convert_nlpl_model  # nlpl.py builds on this module

            result = convert_nlpl_model(
                args.model_dir,
                args.output,
                overwrite=args.overwrite,
                verify=args.verify,
                cache_dir=args.cache_dir,
                repo_id=args.push_to_hub,
            )
        else:
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
    except (ConversionError, OriginalCheckpointError, EfmlFormatError, HubError, ModelCardError) as error:
        print(f"elmo-convert: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
