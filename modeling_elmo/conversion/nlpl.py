"""`elmo-convert --model-dir`: a model of the NLPL vector repository (http://vectors.nlpl.eu/repository/) as it is
downloaded, a ZIP archive, or the folder it was extracted to.

The layout is the one simple_elmo (the NLPL's own ELMo loader) reads, at the top level of the archive or folder:
- `options.json`: bilm-tf options. `char_cnn.n_characters` may be 261 (as trained) or 262 (as bilm-tf runs it):
  the HDF5 holds 261 character rows either way, so both convert to the same model.
- the weights: `model.hdf5`, or else the only `*.hdf5` (several and none named `model.hdf5` is refused; simple_elmo
  would take whichever the folder listing gives first).
- optionally the vocabulary `vocab.txt.gz` or else `vocab.txt` (one word per line, most frequent first): kept in the
  converted folder as `vocab.txt`, from which `cache_vocabulary` precomputes a token-embedding table.
- optionally `meta.json` (the repository's catalogue entry: corpus, its language and size, model id) and a `README`,
  read for the model card.

Nothing is extracted where an archive says: an archive with a member whose name is absolute or climbs out of the
archive (`..`) is refused as a whole, and the members needed are copied under fixed names into a private temporary
folder that is removed afterwards.
"""

import gzip
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..formats.original_checkpoint import OriginalCheckpointError, read_options_json
from ..hub.source_facts import ELMO_CITATION, SourceFacts
from .convert import (
    ConversionError,
    ConversionResult,
    max_difference_to_original,
    model_from_original,
    prepare_converted_output,
    resolve_source,
    sha256_of,
    write_model_folder,
)
from .presets import NLPL_CITATION, card_language_code

OPTIONS_FILE, WEIGHTS_FILE, META_FILE = "options.json", "model.hdf5", "meta.json"
VOCABULARY_FILES = ("vocab.txt.gz", "vocab.txt")  # simple_elmo's order of preference
README_FILES = ("README", "README.txt", "README.md")
README_LIMIT = 4000  # characters of the source's README quoted on the card
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


class NlplModelError(ConversionError):
    """An NLPL model that cannot be read; the message names the archive or folder and the file at fault."""


@dataclass
class NlplModel:
    """The files of an NLPL model, as local paths in `files_folder` (the model's folder, or the temporary folder
    its archive's members were extracted to).

    `sources`: every source file read, as the card lists it: name -> (location shown, local path): an archive and
    each member read from it, a member as stored (e.g. still gzipped).
    """

    location: str
    files_folder: Path
    options: Path
    weights: Path
    vocabulary: Path | None
    meta: dict[str, Any] | None
    readme: str | None
    sources: dict[str, tuple[str, Path]]


@dataclass(frozen=True)
class _Layout:
    """Which of the top-level file names of a model are its weights, vocabulary, metadata and README."""

    weights: str
    vocabulary: str | None
    meta: str | None
    readme: str | None

    @property
    def names(self) -> list[str]:
        return [OPTIONS_FILE, *(name for name in (self.weights, self.vocabulary, self.meta, self.readme) if name)]


def _layout(names: set[str], where: str) -> _Layout:
    """Pick the model's files among the top-level file `names` of `where` (an archive or folder)."""
    if OPTIONS_FILE not in names:
        raise NlplModelError(f"{where}: no {OPTIONS_FILE} (an NLPL ELMo model has options.json and model.hdf5).")
    weights = sorted(name for name in names if name.endswith(".hdf5"))
    if WEIGHTS_FILE in names:
        weights = [WEIGHTS_FILE]
    if not weights:
        raise NlplModelError(f"{where}: no .hdf5 weights file (expected {WEIGHTS_FILE}).")
    if len(weights) > 1:
        raise NlplModelError(
            f"{where}: several .hdf5 files ({', '.join(weights)}) and none named {WEIGHTS_FILE}, so which one holds "
            f"the weights is unknown; rename it to {WEIGHTS_FILE}."
        )
    return _Layout(
        weights=weights[0],
        vocabulary=next((name for name in VOCABULARY_FILES if name in names), None),
        meta=META_FILE if META_FILE in names else None,
        readme=next((name for name in README_FILES if name in names), None),
    )


def _escapes(name: str) -> bool:
    """Whether the archive member `name` would land outside the folder it is extracted to."""
    path = PurePosixPath(name.replace("\\", "/"))
    return path.is_absolute() or bool(_WINDOWS_DRIVE.match(name)) or ".." in path.parts


@contextmanager
def _checked_zip(archive_path: Path) -> Iterator[tuple[zipfile.ZipFile, dict[str, zipfile.ZipInfo]]]:
    """The open ZIP and its members by name, refused as a whole when it is unreadable or a member's name would land
    outside the folder it is extracted to."""
    try:
        archive = zipfile.ZipFile(archive_path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise NlplModelError(f"{archive_path}: not a readable ZIP archive ({error}).") from error
    with archive:
        members = archive.infolist()
        escaping = [member.filename for member in members if _escapes(member.filename)]
        if escaping:
            raise NlplModelError(
                f"{archive_path}: member {escaping[0]!r} has a path outside the archive (absolute or with '..'); "
                "refusing the whole archive."
            )
        yield archive, {member.filename.replace("\\", "/"): member for member in members if not member.is_dir()}


def _copy_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, where: Path) -> None:
    try:
        with archive.open(member) as source, open(target, "wb") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as error:
        raise NlplModelError(
            f"{where}: cannot read its member {member.filename} ({error}); the archive is damaged."
        ) from error


def _extract(archive_path: Path, work: Path) -> dict[str, Path]:
    """Copy the NLPL model's members of the ZIP `archive_path` into `work`; returns their name -> path."""
    with _checked_zip(archive_path) as (archive, members):
        top_level = {name: member for name, member in members.items() if "/" not in name}
        files = {}
        for name in _layout(set(top_level), str(archive_path)).names:
            _copy_member(archive, top_level[name], work / name, archive_path)
            files[name] = work / name
    return files


EFML_MARKERS = ("config.json", "encoder.pkl")  # files every ELMoForManyLangs model folder holds
EFML_UNUSED = ("classifier.pkl",)  # the LM softmax: not needed to embed


def efml_archive_folder(archive_path: Path) -> str | None:
    """The folder inside the ZIP `archive_path` that holds an ELMoForManyLangs model ("" for the top level), or
    None when it holds none at the top level or in a single top-level folder."""
    with _checked_zip(archive_path) as (_, members):
        folders = {name.rpartition("/")[0] for name in members if name.count("/") <= 1}
    found = [folder for folder in sorted(folders) if all(f"{folder}/{m}".lstrip("/") in members for m in EFML_MARKERS)]
    return found[0] if len(found) == 1 else None


def extract_efml_archive(archive_path: Path, work: Path) -> Path:
    """Copy the ELMoForManyLangs model folder of the ZIP `archive_path` (`efml_archive_folder`: its files, without
    the unused softmax) into `work / <archive name>`; returns that folder."""
    folder = efml_archive_folder(archive_path)
    if folder is None:
        raise NlplModelError(f"{archive_path}: no ELMoForManyLangs model folder (config.json and encoder.pkl).")
    target = work / archive_path.name.rpartition(".")[0]
    target.mkdir()
    with _checked_zip(archive_path) as (archive, members):
        for name, member in members.items():
            parent, _, base = name.rpartition("/")
            if parent == folder and base not in EFML_UNUSED:
                _copy_member(archive, member, target / base, archive_path)
    return target


def archive_sources(
    sources: dict[str, dict[str, str]], extracted: Path, location: str, archive_path: Path
) -> dict[str, dict[str, str]]:
    """A card's `sources` of a model read from `extracted`, the folder that `archive_path` (given as `location`)
    was extracted to: the archive with its sha256 first, then each file named as a member of it."""
    prefix = f"{extracted}{os.sep}"
    relabelled = {
        f"{archive_path.name}: {name}": {
            **entry,
            "location": entry["location"].replace(prefix, f"member of {location}: "),
        }
        for name, entry in sources.items()
    }
    return {archive_path.name: {"location": location, "sha256": sha256_of(archive_path)}, **relabelled}


def _top_level_files(folder: Path) -> dict[str, Path]:
    try:
        return {path.name: path for path in folder.iterdir() if path.is_file()}
    except OSError as error:
        raise NlplModelError(f"{folder}: cannot list the folder ({error.strerror}).") from error


def _plain_vocabulary(path: Path, work: Path) -> Path:
    """The vocabulary `path` as plain UTF-8 text: decompressed into `work` when it is gzipped; refused when it is
    not UTF-8 text."""
    target = work / "vocab.plain.txt"
    try:
        opened = gzip.open(path, "rt", encoding="utf-8") if path.name.endswith(".gz") else open(path, encoding="utf-8")
        with opened as source, open(target, "w", encoding="utf-8") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
    except (OSError, EOFError, zlib.error) as error:
        raise NlplModelError(f"{path}: cannot read the vocabulary ({error}).") from error
    except UnicodeDecodeError as error:
        raise NlplModelError(f"{path}: the vocabulary is not UTF-8 text ({error.reason}).") from None
    return target


def _meta(path: Path) -> dict[str, Any]:
    meta = read_options_json(str(path), NlplModelError)
    if not isinstance(meta, dict):
        raise NlplModelError(f"{path}: must be a JSON object (the NLPL catalogue entry of the model).")
    return meta


@contextmanager
def open_nlpl_model(location: str, cache_dir: str | os.PathLike | None = None) -> Iterator[NlplModel]:
    """The files of the NLPL model at `location` (a folder, a ZIP, or a ZIP's http(s) URL, downloaded once into
    the cache), valid inside the `with` block."""
    path = resolve_source(location, cache_dir)
    if not path.exists():
        raise NlplModelError(f"{location}: no such folder or ZIP archive.")
    with tempfile.TemporaryDirectory(prefix="elmo-nlpl-") as work:
        work = Path(work)
        if path.is_dir():
            files = _top_level_files(path)
            files = {name: files[name] for name in _layout(set(files), str(path)).names}
            sources = {name: (str(file), file) for name, file in files.items()}
        else:
            files = _extract(path, work)
            sources = {path.name: (location, path)}
            sources |= {f"{path.name}: {name}": (f"member of {path.name}", file) for name, file in files.items()}
        layout = _layout(set(files), location)
        readme = files[layout.readme].read_text(encoding="utf-8", errors="replace").strip() if layout.readme else None
        try:
            model = NlplModel(
                location=location,
                files_folder=files[OPTIONS_FILE].parent,
                options=files[OPTIONS_FILE],
                weights=files[layout.weights],
                vocabulary=_plain_vocabulary(files[layout.vocabulary], work) if layout.vocabulary else None,
                meta=_meta(files[layout.meta]) if layout.meta else None,
                readme=readme[:README_LIMIT] + ("\n[...]" if len(readme) > README_LIMIT else "") if readme else None,
                sources=sources,
            )
        except NlplModelError as error:
            raise NlplModelError(model_message(str(error), files[OPTIONS_FILE].parent, location)) from None
        yield model


def model_message(message: str, files_folder: Path, location: str) -> str:
    """`message` about a file in `files_folder` naming it as a file of the model at `location` instead (for an
    archive: not the temporary folder its members were extracted to)."""
    return message.replace(f"{files_folder}{os.sep}", f"{location}: ")


def _corpora(meta: dict[str, Any]) -> list[dict[str, Any]]:
    corpora = meta.get("corpus", [])
    corpora = [corpora] if isinstance(corpora, dict) else corpora
    if not isinstance(corpora, list) or not all(isinstance(corpus, dict) for corpus in corpora):
        raise NlplModelError(f"{META_FILE}: 'corpus' must be a list of objects, got {type(corpora).__name__}.")
    return corpora


def _corpus_text(index: int, corpus: dict[str, Any]) -> str:
    description, tokens = corpus.get("description"), corpus.get("tokens")
    if not isinstance(description, str) or not description.strip():
        description = f"corpus {corpus['id']}" if "id" in corpus else "a corpus without a description"
    if tokens is None:
        return description.strip()
    if type(tokens) is not int or tokens < 0:
        raise NlplModelError(f"{META_FILE}: corpus[{index}].tokens must be a count of tokens, got {tokens!r}.")
    return f"{description.strip()} ({tokens:,} tokens)"


def meta_languages(meta: dict[str, Any]) -> list[str]:
    """The card language codes of the corpora of a `meta.json` (ISO 639-1 where one exists, else 639-3)."""
    codes = []
    for index, corpus in enumerate(_corpora(meta)):
        if "language" not in corpus:
            continue
        try:
            codes.append(card_language_code(str(corpus["language"])))
        except ValueError as error:
            raise NlplModelError(f"{META_FILE}: corpus[{index}].language: {error}.") from None
    return list(dict.fromkeys(codes))


def nlpl_source_facts(model: NlplModel, fallback_language: str | None = None) -> SourceFacts:
    """What the card of a converted NLPL model states, from its `meta.json` and README (nothing is assumed: a fact
    the source does not state is written as not stated). `fallback_language`: the card's language code when
    `meta.json` names none."""
    meta = model.meta or {}
    corpora = [_corpus_text(index, corpus) for index, corpus in enumerate(_corpora(meta))]
    languages = meta_languages(meta) or ([fallback_language] if fallback_language else [])
    model_id, license_name = meta.get("id"), meta.get("license")
    entry = (
        f"model {model_id} of the NLPL vector repository"
        if model_id is not None
        else "an NLPL vector repository model"
    )
    handle = meta.get("handle")
    return SourceFacts(
        title=f"ELMo (NLPL {model_id})" if model_id is not None else "ELMo (NLPL)",
        origin=f"{entry} ({handle})" if isinstance(handle, str) else entry,
        corpus="; ".join(corpora) if corpora else f"not stated (no corpus in {model.location}'s {META_FILE})",
        language=languages[0] if len(languages) == 1 else languages or None,
        license="other" if isinstance(license_name, str) and license_name.strip() else None,
        license_text=(
            license_name.strip()
            if isinstance(license_name, str) and license_name.strip()
            else f"not stated in {META_FILE}; see the model's README and its NLPL repository entry"
        ),
        citations=(ELMO_CITATION, NLPL_CITATION),
        source_notes=model.readme,
    )


def convert_nlpl_model(
    model_dir: str,
    output_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    cache_dir: str | os.PathLike | None = None,
    repo_id: str | None = None,
    fallback_language: str | None = None,
    language_required: bool = False,
) -> ConversionResult:
    """Convert the NLPL model `model_dir` (folder, ZIP or ZIP URL) into a model folder, as `convert_checkpoint`
    does an options + weights pair. The card's language comes from `meta.json`, else `fallback_language`; with
    `language_required`, a model with neither is refused."""
    output_dir = Path(output_dir)
    prepare_converted_output(output_dir, overwrite, (model_dir,))
    with open_nlpl_model(model_dir, cache_dir) as nlpl:
        facts = nlpl_source_facts(nlpl, fallback_language)
        if language_required and not facts.language:
            raise NlplModelError(
                f"{model_dir}: cannot tell the model's language: no language in a {META_FILE}, and the name is not "
                "an NLPL id, ISO 639 code or language name of the table in docs/conversion-sources.md."
            )
        try:
            model, tokenizer = model_from_original(nlpl.options, nlpl.weights)
        except OriginalCheckpointError as error:  # name the archive, not the temporary folder it was extracted to
            raise NlplModelError(model_message(str(error), nlpl.files_folder, nlpl.location)) from None
        sources = {
            name: {"location": location, "sha256": sha256_of(path)} for name, (location, path) in nlpl.sources.items()
        }
        result = ConversionResult(output_dir=output_dir, config=model.config, sources=sources)
        verify_against = (lambda folder: max_difference_to_original(folder, model)) if verify else None
        write_model_folder(
            model, tokenizer, result, verify_against, facts=facts, repo_id=repo_id, vocabulary=nlpl.vocabulary
        )
    return result


__all__ = ["NlplModel", "NlplModelError", "convert_nlpl_model", "nlpl_source_facts", "open_nlpl_model"]
