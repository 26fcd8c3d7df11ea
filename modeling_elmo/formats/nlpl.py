"""Read a model of the NLPL vector repository (http://vectors.nlpl.eu/repository/) as it is downloaded, a ZIP
archive, or the folder it was extracted to; and find the ELMoForManyLangs model folder in a ZIP.

The layout is the one simple_elmo (the NLPL's own ELMo loader) reads, at the top level of the archive or folder:
- `options.json`: bilm-tf options. `char_cnn.n_characters` may be 261 (as trained) or 262 (as bilm-tf runs it):
  the HDF5 holds 261 character rows either way, so both convert to the same model.
- the weights: `model.hdf5`, or else the only `*.hdf5` (several and none named `model.hdf5` is refused; simple_elmo
  would take whichever the folder listing gives first).
- optionally the vocabulary `vocab.txt.gz` or else `vocab.txt` (one word per line, most frequent first).
- optionally `meta.json` (the repository's catalogue entry: corpus, its language and size, model id) and a `README`.

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

from ..foundation.errors import ToolError
from ..foundation.output_folder import reason_of
from .original_checkpoint import read_options_json

OPTIONS_FILE, WEIGHTS_FILE, META_FILE = "options.json", "model.hdf5", "meta.json"
VOCABULARY_FILES = ("vocab.txt.gz", "vocab.txt")  # simple_elmo's order of preference
README_FILES = ("README", "README.txt", "README.md")
README_LIMIT = 4000  # characters of the source's README quoted on the card
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


class NlplModelError(ToolError, RuntimeError):
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


def _top_level_files(folder: Path) -> dict[str, Path]:
    try:
        return {path.name: path for path in folder.iterdir() if path.is_file()}
    except OSError as error:
        raise NlplModelError(f"{folder}: cannot list the folder ({reason_of(error, with_file=False)}).") from error


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
def open_nlpl_model(path: Path, location: str) -> Iterator[NlplModel]:
    """The files of the NLPL model in the folder or ZIP `path` (named `location` in messages and on the card: the
    path or URL given), valid inside the `with` block."""
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


__all__ = [
    "EFML_MARKERS",
    "META_FILE",
    "NlplModel",
    "NlplModelError",
    "efml_archive_folder",
    "extract_efml_archive",
    "model_message",
    "open_nlpl_model",
]
