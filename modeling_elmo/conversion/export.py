"""`elmo-export`: a saved ELMo folder -> the original (bilm-tf) format, the inverse of `elmo-convert`.

Reads any folder saved with `save_pretrained` (`config.json` and `model.safetensors`, or shards listed in
`model.safetensors.index.json`): an `ElmoModel` (weights at the root: `char_encoder.*`, `bilm.layers.{k}.*`), or a
model holding one under `elmo.` (`ElmoForPreTraining`, `ElmoForTokenClassification`). Writes

- `options.json`: bilm-tf's layout (`lstm`, `char_cnn`; with `n_tokens_vocab`, `dropout` and the softmax sampling
  when the config has an LM vocabulary),
- `lm_weights.hdf5`: float32 datasets named and shaped exactly as bilm-tf's `dump_weights` writes them (what
  `elmo-convert` and AllenNLP's `Elmo` read),
- `softmax.hdf5` (datasets `W` (n_tokens_vocab, projection_dim) and `b` (n_tokens_vocab,)) and the folder's
  `vocab.txt`, when the folder holds the LM softmax (`softmax.weight`, `softmax.bias`); the vocabulary must be one
  bilm-tf reads, of n_tokens_vocab tokens (`LmVocabulary`).

Every weight of the biLM (`char_encoder.*`, `bilm.*`) must be one that `config.json` describes: a folder whose weights
hold more layers, highways or filters than its config is refused rather than exported in part. Weights the original
format has no place for (scalar mixes, a tagger's head) are left out.

A folder saved from a quantized model (its `config.json` holds ELMo's `quantization_config`) is refused, from its
config, before any weight is read: its biLM weights are int8 with scales (or bfloat16), and bilm-tf's format holds
float32 weights. Dequantizing would write weights that differ from the float32 ones it was quantized from, and
that float32 folder is the one to export.

The LSTM `bias` is TensorFlow's `B` with `config.lstm_forget_bias` added at run time, where TensorFlow adds 1.0; the
exported `B` is `bias + (lstm_forget_bias - 1)` on the forget gate, so folders saved before that field existed (their
bias holds the 1.0, `lstm_forget_bias=0`) export correctly too. The character embedding's padding row 0 is dropped
(bilm-tf has none; it only ever embeds padded word positions, whose outputs are discarded).

Writing is all or nothing, with the same guarantees as `elmo-convert` (its helpers are used): a hidden work folder
beside the output, renamed into place only when complete; an existing output is refused unless `--overwrite`, which
replaces only an empty folder or one holding nothing but the files an export writes.
"""

import contextlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open

from ..configuration_elmo import ElmoConfig
from ..formats.original_checkpoint import (
    LSTM_CELL_PATH,
    N_CHARACTERS,
    OriginalCheckpointError,
    options_from_config,
    options_json_text,
    read_options,
    write_weights_hdf5,
)
from ..formats.vocab import LmVocabulary, VocabularyError
from ..foundation.errors import ToolError, one_line, report
from ..foundation.output_folder import OutputKind, move_into_place, new_file_mode, reason_of, work_folder
from ..foundation.owned_files import output_folder_claimed, record_folder
from ..hub.push import config_problems
from ..quantization.config import saved_quantization
from .arguments import export_parser, saved_folder_problem
from .convert import ConversionError

OPTIONS_FILE, WEIGHTS_FILE, SOFTMAX_FILE, VOCAB_FILE = "options.json", "lm_weights.hdf5", "softmax.hdf5", "vocab.txt"
SAFETENSORS_FILE, SAFETENSORS_INDEX = "model.safetensors", "model.safetensors.index.json"
TF_FORGET_BIAS = 1.0  # what TensorFlow's `LSTMCell` adds to the forget gate at run time
BODY_PREFIXES = ("", "elmo.")  # `ElmoModel` at the root, or under `elmo.` in the models that hold one


class ExportError(ConversionError):
    """An export that cannot proceed; the message names the folder, the file or the weight."""


def _export_problems(folder: Path) -> list[str]:
    """Why `folder` (holding only files an export writes) is not an export: it needs a readable options file and
    `lm_weights.hdf5`."""
    if not (folder / WEIGHTS_FILE).is_file():
        return [f"{WEIGHTS_FILE} is missing"]
    try:
        read_options(folder / OPTIONS_FILE)
    except OriginalCheckpointError as error:
        return [str(error)]
    return []


EXPORTED_FOLDER = OutputKind(
    "elmo-export", frozenset({OPTIONS_FILE, WEIGHTS_FILE, SOFTMAX_FILE, VOCAB_FILE}), _export_problems, ConversionError
)


class _SavedWeights:
    """The tensors of a saved folder, read lazily from `model.safetensors` or the shards of its index."""

    def __init__(self, folder: Path, stack: contextlib.ExitStack):
        self.folder = folder
        self.read: set[str] = set()  # the names `get` returned
        self._handles = {}
        single, index = folder / SAFETENSORS_FILE, folder / SAFETENSORS_INDEX
        if not single.is_file() and not index.is_file():
            raise ExportError(
                f"{folder}: no {SAFETENSORS_FILE} (nor {SAFETENSORS_INDEX}); give a folder saved with save_pretrained."
            )
        weight_map = self._weight_map(index) if not single.is_file() else None
        for shard in sorted(set(weight_map.values())) if weight_map is not None else [single]:
            try:
                handle = stack.enter_context(safe_open(shard, framework="pt"))
            except (OSError, SafetensorError) as error:
                raise ExportError(f"{shard}: not a readable safetensors file ({reason_of(error)}).") from error
            self._handles[shard] = handle
        # as `from_pretrained` reads them: each weight from the shard the index names (another may hold it too)
        held = {shard: set(handle.keys()) for shard, handle in self._handles.items()}
        self.files: dict[str, Path] = weight_map if weight_map is not None else dict.fromkeys(held[single], single)
        for name, shard in self.files.items():
            if name not in held[shard]:
                raise ExportError(f"{index}: the weight '{name}' is listed in {shard.name}, which does not hold it.")

    def _weight_map(self, index: Path) -> dict[str, Path]:
        """The index's weight name -> shard path, each shard a file of the folder."""
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            items = list(weight_map.items())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ExportError(f"{index}: not a readable safetensors index ({error}).") from error
        for name in sorted({shard for _, shard in items}, key=str):
            if not isinstance(name, str) or Path(name).name != name:
                raise ExportError(f"{index}: the shard {name!r} is not a file name in {self.folder}.")
            if not (self.folder / name).is_file():
                raise ExportError(f"{index}: the shard {name} is missing from {self.folder}.")
        return {name: self.folder / shard for name, shard in items}

    def __contains__(self, name: str) -> bool:
        return name in self.files

    def get(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """The weight `name` as float32 `shape`, refusing a missing weight, another shape or non-finite values."""
        if name not in self.files:
            raise ExportError(
                f"{self.folder}: the weight '{name}' is missing; not a supported ELMo model (or a damaged save)."
            )
        try:
            tensor = self._handles[self.files[name]].get_tensor(name)
        except (OSError, SafetensorError) as error:
            raise ExportError(f"{self.files[name]}: cannot read '{name}' ({reason_of(error)}).") from error
        if tuple(tensor.shape) != shape:
            raise ExportError(
                f"{self.folder}: the weight '{name}' has shape {tuple(tensor.shape)}, but its config.json implies "
                f"{shape}."
            )
        if not tensor.is_floating_point():
            raise ExportError(f"{self.folder}: the weight '{name}' has dtype {tensor.dtype}, not floating point.")
        tensor = tensor.to(torch.float32)
        non_finite = int((~torch.isfinite(tensor)).sum())
        if non_finite:
            raise ExportError(
                f"{self.folder}: the weight '{name}' has {non_finite} non-finite value(s) (NaN, infinite, or too "
                "large for float32); the original format cannot hold it."
            )
        self.read.add(name)
        return tensor

    def check_all_read(self, prefixes: tuple[str, ...]) -> None:
        """Refuse a weight under one of `prefixes` that no `get` read: the config describes a smaller model than the
        weights (fewer layers, highways or filters), and exporting would silently drop it."""
        unread = sorted(name for name in self.files if name.startswith(prefixes) and name not in self.read)
        if unread:
            more = f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""
            raise ExportError(
                f"{self.folder}: the weight '{unread[0]}'{more} is not part of the model its config.json describes; "
                "the config and the weights disagree (a damaged save?)."
            )


def _read_config(folder: Path) -> ElmoConfig:
    problems = config_problems(folder)
    if problems:
        raise ExportError(f"{folder}: not a saved ELMo model ({problems[0]}).")
    try:
        config = ElmoConfig.from_pretrained(folder)
    except (OSError, ValueError, TypeError) as error:
        raise ExportError(f"{folder}/config.json: {one_line(error)}") from error
    if config.char_input != "bytes":
        raise ExportError(
            f"{folder}/config.json: char_input is {config.char_input!r}: bilm-tf's format has no character lexicon "
            "(it reads UTF-8 bytes), so this model cannot be exported to it."
        )
    if config.char_vocab_size != N_CHARACTERS:
        raise ExportError(
            f"{folder}/config.json: char_vocab_size is {config.char_vocab_size}, but the original format has "
            f"{N_CHARACTERS} characters (261 rows plus padding)."
        )
    return config


def _body_prefix(weights: _SavedWeights) -> str:
    """Where the `ElmoModel` weights are: at the root or under `elmo.`."""
    probe = "char_encoder.char_embeddings.weight"
    for prefix in reversed(BODY_PREFIXES):  # `elmo.` first: a wrapper's own root never holds `char_encoder.`
        if prefix + probe in weights:
            return prefix
    raise ExportError(
        f"{weights.folder}: the weight '{probe}' is missing (nor 'elmo.{probe}'); not a supported ELMo model."
    )


def _is_identity(weight: torch.Tensor, bias: torch.Tensor) -> bool:
    return torch.equal(weight, torch.eye(weight.shape[0])) and not bias.any()


def _char_cnn_datasets(weights: _SavedWeights, prefix: str, config: ElmoConfig) -> dict[str, np.ndarray]:
    """`char_embed`, `CNN/*`, `CNN_high_{i}/*`, `CNN_proj/*` as bilm-tf stores them ((in, out) matrices)."""
    char_dim, filters_total, proj = config.char_embedding_dim, config.num_char_filters, config.projection_dim
    encoder = f"{prefix}char_encoder"
    embeddings = weights.get(f"{encoder}.char_embeddings.weight", (config.char_vocab_size, char_dim))
    datasets = {"char_embed": embeddings[1:]}  # row 0 is our padding
    for index, (width, num_filters) in enumerate(config.char_filters):
        kernel = weights.get(f"{encoder}.convolutions.{index}.weight", (num_filters, char_dim, width))
        datasets[f"CNN/W_cnn_{index}"] = kernel.permute(2, 1, 0).unsqueeze(0)  # (1, width, char_dim, num_filters)
        datasets[f"CNN/b_cnn_{index}"] = weights.get(f"{encoder}.convolutions.{index}.bias", (num_filters,))
    for index in range(config.num_highway_layers):
        highway = f"{encoder}.highways.{index}"
        gate = "transform_gate" if f"{highway}.transform_gate.weight" in weights else "carry"  # the name before
        for original, name in (("carry", gate), ("transform", "transform")):  # bilm-tf's W_carry feeds the gate
            square = weights.get(f"{highway}.{name}.weight", (filters_total, filters_total))
            datasets[f"CNN_high_{index}/W_{original}"] = square.T
            datasets[f"CNN_high_{index}/b_{original}"] = weights.get(f"{highway}.{name}.bias", (filters_total,))
    weight = weights.get(f"{encoder}.projection.weight", (proj, filters_total))
    bias = weights.get(f"{encoder}.projection.bias", (proj,))
    if filters_total != proj:
        datasets["CNN_proj/W_proj"], datasets["CNN_proj/b_proj"] = weight.T, bias
    elif not _is_identity(weight, bias):  # bilm-tf has no projection when the filters give projection_dim already
        raise ExportError(
            f"{weights.folder}: the character filters total projection_dim ({proj}), so the original format has no "
            f"projection (bilm-tf builds none), but '{encoder}.projection' is not the identity with zero bias; this "
            "model cannot be written in the original format."
        )
    return {name: tensor.contiguous().numpy() for name, tensor in datasets.items()}


def _lstm_datasets(weights: _SavedWeights, prefix: str, config: ElmoConfig) -> dict[str, np.ndarray]:
    """`RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{W_0, B, W_P_0}`: `W_0` = [W_ih; W_hh] (2 * proj,
    4 * cell), `B` with TensorFlow's forget bias taken out, `W_P_0` (cell, proj)."""
    proj, cell = config.projection_dim, config.lstm_cell_size
    shift = float(config.lstm_forget_bias) - TF_FORGET_BIAS  # what our forget gate gets beyond TensorFlow's 1.0
    datasets = {}
    for layer in range(config.num_hidden_layers):
        name = f"{prefix}bilm.layers.{layer}"
        weight_ih = weights.get(f"{name}.weight_ih", (2, proj, 4 * cell))
        weight_hh = weights.get(f"{name}.weight_hh", (2, proj, 4 * cell))
        bias = weights.get(f"{name}.bias", (2, 4 * cell))
        weight_proj = weights.get(f"{name}.weight_proj", (2, cell, proj))
        if shift:  # (bias + shift, computed in float64 and rounded once); skipped when exact, keeping -0.0 as is
            bias = bias.double()
            bias.view(2, 4, cell)[:, 2] += shift  # gate order (i, j, f, o)
            bias = bias.float()
        for direction in range(2):
            path = LSTM_CELL_PATH.format(direction=direction, layer=layer)
            datasets[f"{path}/W_0"] = torch.cat([weight_ih[direction], weight_hh[direction]])
            datasets[f"{path}/B"] = bias[direction]
            datasets[f"{path}/W_P_0"] = weight_proj[direction]
    for dataset, tensor in datasets.items():
        if not torch.isfinite(tensor).all():  # only a huge bias plus the shift can get here
            raise ExportError(f"{weights.folder}: '{dataset}' would not be finite in float32.")
    return {name: tensor.contiguous().numpy() for name, tensor in datasets.items()}


def _softmax(weights: _SavedWeights, config: ElmoConfig) -> dict[str, np.ndarray] | None:
    """`W` (V, projection_dim) and `b` (V,) of the LM softmax, or `None` when the folder has none."""
    present = [name for name in ("softmax.weight", "softmax.bias") if name in weights]
    if not present:
        return None
    if len(present) == 1:
        missing = "softmax.bias" if present == ["softmax.weight"] else "softmax.weight"
        raise ExportError(f"{weights.folder}: the weight '{missing}' is missing, but '{present[0]}' is there.")
    if config.lm_vocab_size is None:
        raise ExportError(
            f"{weights.folder}: the weights hold a softmax but config.json has no lm_vocab_size; the size of "
            "n_tokens_vocab is unknown."
        )
    size = config.lm_vocab_size
    return {
        "W": weights.get("softmax.weight", (size, config.projection_dim)).contiguous().numpy(),
        "b": weights.get("softmax.bias", (size,)).contiguous().numpy(),
    }


def _check_vocabulary(folder: Path, size: int) -> Path:
    """The folder's `vocab.txt`, refused unless bilm-tf can read it as a vocabulary of `size` tokens (`<S>`, `</S>`,
    `<UNK>` present, no duplicates or blank lines; see `LmVocabulary`)."""
    path = folder / VOCAB_FILE
    if not path.is_file():
        raise ExportError(
            f"{folder}: the model has a softmax of {size} words, but {VOCAB_FILE} (its vocabulary) is missing."
        )
    try:
        vocabulary = LmVocabulary.from_file(path)
    except VocabularyError as error:
        raise ExportError(str(error)) from error
    if len(vocabulary) != size:
        raise ExportError(f"{path} has {len(vocabulary)} tokens, but the softmax has {size} words (lm_vocab_size).")
    return path


def export_model(
    model_dir: str | os.PathLike, output_dir: str | os.PathLike, *, overwrite: bool = False
) -> dict[str, list[str]]:
    """Write the original format of the saved folder `model_dir` to `output_dir` (see the module docstring).
    Returns the files written, each with its datasets (empty for a JSON or text file)."""
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    if (problem := saved_folder_problem(model_dir)) is not None:
        raise ExportError(problem)
    if (method := saved_quantization(model_dir)) is not None:  # see the module docstring
        raise ExportError(
            f"{model_dir} holds a quantized biLM ({method!r}): bilm-tf's format holds float32 weights; export the "
            "float32 folder it was quantized from (one saved from a model loaded without quantization_config)."
        )
    with output_folder_claimed(output_dir, overwrite, (str(model_dir),), EXPORTED_FOLDER):
        config = _read_config(model_dir)
        with contextlib.ExitStack() as stack:
            weights = _SavedWeights(model_dir, stack)
            prefix = _body_prefix(weights)
            datasets = {**_char_cnn_datasets(weights, prefix, config), **_lstm_datasets(weights, prefix, config)}
            weights.check_all_read((f"{prefix}char_encoder.", f"{prefix}bilm."))
            softmax = _softmax(weights, config)
        vocabulary = _check_vocabulary(model_dir, config.lm_vocab_size) if softmax is not None else None
        written = {OPTIONS_FILE: [], WEIGHTS_FILE: sorted(datasets)}
        try:
            with work_folder(output_dir, EXPORTED_FOLDER.tool) as folder:
                options = options_from_config(config, with_softmax=config.lm_vocab_size is not None)
                (folder / OPTIONS_FILE).write_text(options_json_text(options), encoding="utf-8")
                write_weights_hdf5(folder / WEIGHTS_FILE, datasets)
                if softmax is not None:
                    write_weights_hdf5(folder / SOFTMAX_FILE, softmax)
                    shutil.copyfile(vocabulary, folder / VOCAB_FILE)
                    written.update({SOFTMAX_FILE: sorted(softmax), VOCAB_FILE: []})
                mode = new_file_mode()
                for path in folder.iterdir():
                    path.chmod(mode)
                record_folder(folder, EXPORTED_FOLDER.tool, ExportError)
                move_into_place(folder, output_dir, EXPORTED_FOLDER)
        except OSError as error:
            kept = "; the existing folder is unchanged" if output_dir.exists() else ""
            raise ExportError(f"Could not write {output_dir}: {reason_of(error)}{kept}.") from error
    return written


def main(argv: list[str] | None = None) -> int:
    args = export_parser().parse_args(argv)
    try:
        written = export_model(args.model_dir, args.output, overwrite=args.overwrite)
    except ToolError as error:
        return report("elmo-export", error)
    if SOFTMAX_FILE not in written:
        print(f"{args.model_dir} has no LM softmax, so no {SOFTMAX_FILE} or {VOCAB_FILE} was written.")
    files = ", ".join(f"{name} ({len(datasets)} datasets)" if datasets else name for name, datasets in written.items())
    print(f"Wrote {args.output}: {files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
