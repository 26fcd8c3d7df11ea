"""
Where `ElmoModel.load` finds its model, as simple_elmo 0.9.2 does (`elmo_helpers.ElmoModel.load`): a ZIP archive
(by its `.zip` suffix) holding `options.json`, `model.hdf5` and optionally `vocab.txt`; or a folder holding
`options.json`, `model.hdf5` (else its only `*.hdf5`) and optionally `vocab.txt.gz` (preferred) or `vocab.txt`.
The files are read by the project's NLPL reader (`formats.nlpl`); a folder converted with `elmo-convert` (no
`options.json`, a `config.json`) or a Hub id loads too, with the converted folder's `vocab.txt`.
"""

import os
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..allennlp import ConfigurationError, load_elmo_model
from ..formats.nlpl import OPTIONS_FILE, NlplModelError, model_message, open_nlpl_model
from ..foundation.errors import one_line
from ..modeling_elmo import ElmoModel as ElmoBiLm
from .characters import archive_vocabulary_lines, folder_vocabulary_lines
from .errors import SimpleElmoError

ARCHIVE_VOCABULARY = "vocab.txt"  # the only vocabulary simple_elmo reads from a ZIP
FOLDER_VOCABULARIES = ("vocab.txt.gz", "vocab.txt")  # in simple_elmo's order of preference
CONVERTED_CONFIG = "config.json"


@dataclass
class LoadedModel:
    """The biLM (eval mode, float32) and, when the model has one, a reader of its vocabulary's lines (called once)."""

    bilm: ElmoBiLm
    vocabulary_lines: Callable[[], Iterable[str]] | None
    vocabulary_name: str | None


def _from_nlpl_files(path: Path, location: str) -> ElmoBiLm:
    """The biLM of the NLPL-layout folder or ZIP `path`; errors name `location` and the file at fault."""
    try:
        with open_nlpl_model(path, location) as files:
            try:
                return load_elmo_model(files.options, files.weights)
            except ConfigurationError as error:  # name the archive, not the folder its members were copied to
                raise SimpleElmoError(model_message(one_line(error), files.files_folder, location)) from None
    except NlplModelError as error:
        raise SimpleElmoError(one_line(error)) from None


def _converted(location: str) -> ElmoBiLm:
    try:
        return load_elmo_model(location, None)
    except ConfigurationError as error:
        raise SimpleElmoError(one_line(error)) from None


def _archive(path: Path, location: str) -> LoadedModel:
    bilm = _from_nlpl_files(path, location)
    with zipfile.ZipFile(path) as archive:  # readable: open_nlpl_model has read it
        members = set(archive.namelist())
    if ARCHIVE_VOCABULARY not in members:
        return LoadedModel(bilm, None, None)
    return LoadedModel(
        bilm, lambda: archive_vocabulary_lines(path, ARCHIVE_VOCABULARY), f"{location}: {ARCHIVE_VOCABULARY}"
    )


def _folder(path: Path, location: str) -> LoadedModel:
    if not (path / OPTIONS_FILE).is_file() and (path / CONVERTED_CONFIG).is_file():
        bilm, vocabularies = _converted(location), ("vocab.txt",)
    else:
        bilm, vocabularies = _from_nlpl_files(path, location), FOLDER_VOCABULARIES
    vocabulary = next((path / name for name in vocabularies if (path / name).is_file()), None)
    if vocabulary is None:
        return LoadedModel(bilm, None, None)
    return LoadedModel(bilm, lambda: folder_vocabulary_lines(vocabulary), str(vocabulary))


def load_model_files(directory: str | os.PathLike) -> LoadedModel:
    """The model at `directory`: a folder, a `.zip` archive, a converted folder or a Hub id (see the module)."""
    location = os.fspath(directory)
    path = Path(location)
    if path.is_dir():
        return _folder(path, location)
    if path.is_file():
        if not location.endswith(".zip"):
            raise SimpleElmoError(
                f"{location}: a file but not a .zip archive: give a folder with the model or the model's ZIP archive."
            )
        return _archive(path, location)
    if path.is_absolute() or location.count("/") != 1:
        raise SimpleElmoError(f"{location}: no such folder or ZIP archive.")
    try:
        return LoadedModel(_converted(location), None, None)
    except SimpleElmoError as error:
        raise SimpleElmoError(f"{location}: no such folder or ZIP archive, nor a Hub model ({error})") from None
