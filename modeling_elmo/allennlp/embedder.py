"""AllenNLP 0.9's `ElmoEmbedder` (`allennlp.commands.elmo`): the biLM's three layers per sentence as numpy arrays,
and `embed_file`, which writes them to HDF5 in the layout of `allennlp elmo` (one float32 dataset per line, keyed by
line index or sentence, and a `sentence_to_index` JSON string)."""

import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import IO

import numpy as np
import torch
from tqdm.auto import tqdm

from ..embed.store import hdf5_replaced_atomically, write_line, write_sentence_to_index
from ..foundation.checks import check_count
from .bilm import _ElmoBiLm
from .boundaries import remove_sentence_boundaries
from .characters import batch_to_ids
from .checkpoint import ConfigurationError
from .elmo import DEFAULT_OPTIONS_FILE, DEFAULT_WEIGHT_FILE

DEFAULT_BATCH_SIZE = 64
OUTPUT_FORMATS = ("all", "top", "average")


def _groups_of(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while group := list(islice(iterator, size)):
        yield group


class ElmoEmbedder:
    """
    The biLM of `options_file` + `weight_file` (paths or URLs; `weight_file=None`: a converted folder or Hub id) on
    `cuda_device` (-1: CPU). Stateful like AllenNLP (a sentence's vectors depend on the batches before it) unless
    `stateful=False`; `reset_states()` forgets the states.
    """

    def __init__(
        self,
        options_file: str | os.PathLike = DEFAULT_OPTIONS_FILE,
        weight_file: str | os.PathLike | None = DEFAULT_WEIGHT_FILE,
        cuda_device: int = -1,
        *,
        stateful: bool = True,
    ) -> None:
        if type(cuda_device) is not int:
            raise ConfigurationError(f"cuda_device must be an int (-1 for the CPU), got {cuda_device!r}.")
        if cuda_device >= 0 and not (torch.cuda.is_available() and cuda_device < torch.cuda.device_count()):
            raise ConfigurationError(f"cuda_device={cuda_device}, but there is no such CUDA device here.")
        self.elmo_bilm = _ElmoBiLm(options_file, weight_file, stateful=stateful)
        if cuda_device >= 0:
            self.elmo_bilm = self.elmo_bilm.cuda(device=cuda_device)
        self.cuda_device = cuda_device

    def reset_states(self) -> None:
        """Forget the biLM's LSTM states."""
        self.elmo_bilm.reset_states()

    def batch_to_embeddings(self, batch: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenized sentences -> activations (batch, num_layers, timesteps, dim) and mask (batch, timesteps), long."""
        character_ids = batch_to_ids(batch)
        if self.cuda_device >= 0:
            character_ids = character_ids.cuda(device=self.cuda_device)
        with torch.no_grad():
            bilm_output = self.elmo_bilm(character_ids)
        mask = bilm_output["mask"]
        without_boundaries = [remove_sentence_boundaries(layer, mask) for layer in bilm_output["activations"]]
        activations = torch.stack([layer for layer, _ in without_boundaries], dim=1)
        return activations, without_boundaries[0][1].long()

    @staticmethod
    def _empty_embedding() -> np.ndarray:
        """What AllenNLP 0.9 gives an empty sentence, whatever the model: zeros (3, 0, 1024), float64."""
        return np.zeros((3, 0, 1024))

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        """One tokenized sentence -> (num_layers, len(sentence), dim) float32."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: list[list[str]]) -> list[np.ndarray]:
        """Tokenized sentences -> one (num_layers, len(sentence), dim) float32 array each."""
        if batch == [[]]:  # AllenNLP 0.9 runs nothing here (the states stay as they are)
            return [self._empty_embedding()]
        embeddings, mask = self.batch_to_embeddings(batch)
        lengths = mask.sum(dim=1).tolist()
        return [
            embeddings[row, :, :length].cpu().numpy() if length else self._empty_embedding()
            for row, length in enumerate(lengths)
        ]

    def embed_sentences(
        self, sentences: Iterable[list[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """`embed_batch` over groups of `batch_size` sentences, one array per sentence (a generator)."""
        check_count("batch_size", batch_size, error=ConfigurationError)
        for batch in _groups_of(sentences, batch_size):
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_file: IO | str | os.PathLike,
        output_file_path: str | os.PathLike,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
    ) -> None:
        """
        Embed a file of whitespace-tokenized sentences (one per line, no blank lines; an open text file, closed at
        the end, or a path) into the HDF5 file `output_file_path`: per line a float32 dataset named by its line index
        (or, with `use_sentence_keys`, by the sentence), shaped (num_layers, words, dim) for `"all"` and (words, dim)
        for `"top"` and `"average"`; unless `forget_sentences` or `use_sentence_keys`, `sentence_to_index` holds the
        JSON map from sentence to key. The file appears complete or not at all (the package's one atomic write: synced,
        renamed into place, with the umask's permissions).
        """
        if output_format not in OUTPUT_FORMATS:
            raise ConfigurationError(
                f"output_format must be one of {', '.join(OUTPUT_FORMATS)}: got {output_format!r}."
            )
        check_count("batch_size", batch_size, error=ConfigurationError)
        sentences = self._read_sentences(input_file)
        keys = sentences if use_sentence_keys else [str(index) for index in range(len(sentences))]
        if use_sentence_keys and len(set(keys)) != len(keys):
            raise ConfigurationError(
                f"{input_file if isinstance(input_file, str | os.PathLike) else 'the input file'} repeats a sentence, "
                "so use_sentence_keys cannot key each one: embed it without use_sentence_keys."
            )
        no_index = forget_sentences or use_sentence_keys
        self._write(Path(output_file_path), sentences, keys, output_format, batch_size, no_index)

    @staticmethod
    def _read_sentences(input_file: IO | str | os.PathLike) -> list[str]:
        if isinstance(input_file, str | os.PathLike):
            try:
                with open(input_file, encoding="utf-8") as handle:
                    sentences = [line.strip() for line in handle]
            except (OSError, UnicodeDecodeError) as error:
                raise ConfigurationError(f"{os.fspath(input_file)}: cannot read the input file ({error}).") from None
        else:
            with input_file:
                sentences = [line.strip() for line in input_file]
        blank_lines = [index for index, sentence in enumerate(sentences) if not sentence]
        if blank_lines:
            raise ConfigurationError(
                f"Your input file contains empty lines at indexes {blank_lines}. Please remove them."
            )
        return sentences

    def _write(
        self, path: Path, sentences: list[str], keys: list[str], output_format: str, batch_size: int, no_index: bool
    ) -> None:
        embedded = self.embed_sentences([sentence.split() for sentence in sentences], batch_size)
        with hdf5_replaced_atomically(path, error=OSError) as output:  # AllenNLP's h5py raised OSError too
            for key, embeddings in tqdm(zip(keys, embedded, strict=True), total=len(keys)):
                if output_format == "top":
                    embeddings = embeddings[-1]
                elif output_format == "average":
                    embeddings = np.average(embeddings, axis=0)
                write_line(output, key, embeddings.astype(np.float32, copy=False))
            if not no_index:
                write_sentence_to_index(output, dict(zip(sentences, keys, strict=True)))
