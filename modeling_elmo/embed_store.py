"""Crash-safe output of `elmo-embed`, in the layout of `allennlp elmo`.

While a run is in progress, `OUTPUT.parts/` holds `manifest.json` (the arguments of the run) and one small HDF5 file
per finished batch, each written under a temporary name and renamed into place, so a kill at any moment leaves only
complete parts. A rerun with the same arguments skips the batches that have a part. At the end the parts are copied,
in batch order, into `OUTPUT` (through a temporary file renamed into place) and the folder is removed.

The output file holds one float32 dataset per input line, named by the 0-based line index, and `sentence_to_index`:
a one-element string dataset with the JSON map from sentence text to its (last) line index.
"""

import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np

SENTENCE_TO_INDEX = "sentence_to_index"


class EmbedOutputError(RuntimeError):
    """An output, work folder or shard that cannot be written, resumed or merged."""


def _write_dataset(handle: h5py.File, name: str, data: np.ndarray) -> None:
    handle.create_dataset(name, data=data, track_times=False)


def _write_sentence_to_index(handle: h5py.File, sentence_to_index: dict[str, str]) -> None:
    dataset = handle.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype(), track_times=False)
    dataset[0] = json.dumps(sentence_to_index)


def _replace_atomically(temporary: Path, target: Path) -> None:
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, target)


class PartStore:
    """The work folder of one run (one process): its manifest, its finished batches, and the final assembly."""

    def __init__(self, output: Path, manifest: dict, overwrite: bool = False):
        self.output = output
        self.folder = output.with_name(output.name + ".parts")
        if output.exists() and not overwrite and not self.folder.exists():
            raise EmbedOutputError(f"Output file {output} already exists; pass --overwrite to replace it.")
        manifest_path = self.folder / "manifest.json"
        if manifest_path.exists():
            found = json.loads(manifest_path.read_text(encoding="utf-8"))
            if found != manifest:
                changed = sorted(key for key in manifest.keys() | found.keys() if manifest.get(key) != found.get(key))
                raise EmbedOutputError(
                    f"{self.folder} holds an interrupted run with other arguments (differs in: {', '.join(changed)}). "
                    "Rerun with the same arguments to resume, or delete that folder to start over."
                )
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary = manifest_path.with_suffix(".tmp")
            temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
            _replace_atomically(temporary, manifest_path)
        for leftover in self.folder.glob("*.tmp"):  # a part being written when the previous run was killed
            leftover.unlink()

    def _part(self, name: str) -> Path:
        return self.folder / f"part-{name}.h5"

    def is_done(self, name: str) -> bool:
        return self._part(name).exists()

    def write(self, name: str, arrays: dict[int, np.ndarray]) -> None:
        """Store the finished batch `name`: one array per line index."""
        temporary = self.folder / f"part-{name}.tmp"
        with h5py.File(temporary, "w") as handle:
            for index, array in arrays.items():
                _write_dataset(handle, str(index), array)
        _replace_atomically(temporary, self._part(name))

    def finalize(self, sentence_to_index: dict[str, str]) -> None:
        """Copy every part, in batch order, into the output file (written aside, then renamed); drop the folder."""
        temporary = self.output.with_name(self.output.name + ".tmp")
        with h5py.File(temporary, "w") as handle:
            for part in sorted(self.folder.glob("part-*.h5")):
                with h5py.File(part, "r") as source:
                    for name in sorted(source, key=int):
                        _write_dataset(handle, name, source[name][...])
            _write_sentence_to_index(handle, sentence_to_index)
        _replace_atomically(temporary, self.output)
        shutil.rmtree(self.folder)


def merge_files(output: Path, shards: list[Path], overwrite: bool = False) -> int:
    """Merge the shard files of a multi-process run into `output`; returns the number of sentences."""
    if output.exists() and not overwrite:
        raise EmbedOutputError(f"Output file {output} already exists; pass --overwrite to replace it.")
    sentence_to_index: dict[str, str] = {}
    seen: dict[str, Path] = {}
    temporary = output.with_name(output.name + ".tmp")
    try:
        with h5py.File(temporary, "w") as handle:
            for shard in shards:
                try:
                    source = h5py.File(shard, "r")
                except (FileNotFoundError, OSError) as error:
                    raise EmbedOutputError(f"Cannot read shard {shard}: {error}") from error
                with source:
                    if SENTENCE_TO_INDEX not in source:
                        raise EmbedOutputError(f"{shard} is not an elmo-embed output: no '{SENTENCE_TO_INDEX}'.")
                    for sentence, index in json.loads(source[SENTENCE_TO_INDEX][0]).items():
                        if int(index) > int(sentence_to_index.get(sentence, -1)):
                            sentence_to_index[sentence] = index
                    for name in sorted((name for name in source if name != SENTENCE_TO_INDEX), key=int):
                        if name in seen:
                            raise EmbedOutputError(f"Sentence {name} is in both {seen[name]} and {shard}.")
                        seen[name] = shard
                        _write_dataset(handle, name, source[name][...])
            _write_sentence_to_index(handle, sentence_to_index)
        _replace_atomically(temporary, output)
    finally:
        temporary.unlink(missing_ok=True)
    return len(seen)
