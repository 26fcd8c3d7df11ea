"""`elmo-export-onnx MODEL_DIR OUT.onnx [--opset N] [--overwrite]`: an ELMo folder as one ONNX file.

Loads `AutoModel.from_pretrained(MODEL_DIR)` (the `ElmoModel` of any ELMo folder: converted, pretrained or the biLM
of a fine-tuned tagger) and exports it with the dynamo exporter (`torch.onnx.export(..., dynamo=True)`), which
traces `torch.export`: `ElmoModel.forward` then takes its padded path (`padded_recurrence`), whose recurrence is one
`scan` per layer, written as ONNX `Scan`. The graph:

- inputs `input_ids` int64 (batch, words, max_characters_per_token), the character ids of `ElmoTokenizer` (a padded
  word is all zeros), and `attention_mask` int64 (batch, words), 1 for words and 0 for padding, any padding side;
  `batch` and `words` are dynamic;
- output `hidden_states` float32 (batch, num_hidden_layers + 1, words, 2 * projection_dim): every layer stacked,
  as AllenNLP's `ElmoEmbedder.batch_to_embeddings` returns them: the token layer `[x; x]`, then `[forward;
  backward]` of every LSTM layer; zero at padding. (No scalar mixes: a consumer mixes the layers it wants.)
- output `last_hidden_state` float32 (batch, words, 2 * projection_dim): the top layer, under the name that
  feature-extraction runtimes read (Optimum's ORT models, sentence-transformers' ONNX backend).

Stateless and float32 only: a folder with `stateful: true` is refused, and so is a quantized one (its `config.json`
holds ELMo's `quantization_config`), from its config before anything is loaded or written, since its layers run CPU
kernels that `torch.export` cannot trace (the float32 folder it was quantized from exports). Every biLM weight must be
in the folder, of the shape its config implies, and finite: a folder that would load with random or non-finite values
is refused before the export, as are an `--opset` outside 18 to the installed onnx's highest, a negative or non-finite
`--tolerance`, and an OUT that is one of MODEL_DIR's own files (other than a `.onnx` one). Before it is moved into
place, the file is run with onnxruntime on a batch of another shape than the one traced (left and right padding, a
one-word sentence) and compared with PyTorch's own path, all layers; the max abs difference is printed, and beyond
`--tolerance` the export fails. The file is written beside OUT under a hidden temporary name and renamed into place
only when verified; an existing OUT is refused unless `--overwrite`. Errors: one line `elmo-export-onnx: error: ...` on
stderr, status 1 (the exporter's own messages cut to their first line, without terminal colour codes: `one_line`).
Needs the `onnx` extra: `pip install -e '.[onnx]'` in a checkout, or see docs/install.md.
"""

import contextlib
import importlib.util
import logging
import math
import os
import random
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from ..character_ids import word_to_char_ids
from ..foundation.errors import ToolError, extra_install_hint, one_line, report
from ..foundation.model_location import model_folder_problem
from ..foundation.output_folder import parent_folders, path_replaced_atomically, reason_of
from ..foundation.owned_files import output_claimed
from ..quantization.config import saved_quantization
from ..tokenization_elmo import char_ids_tensor
from .arguments import DEFAULT_TOLERANCE, MIN_OPSET, PROG, onnx_export_parser

INPUT_NAMES = ["input_ids", "attention_mask"]
OUTPUT_NAMES = ["hidden_states", "last_hidden_state"]
ONNX_PACKAGES = ("onnx", "onnxscript", "onnxruntime")  # onnxscript: the dynamo exporter's ops
BILM_PREFIXES = ("char_encoder.", "bilm.")  # the weights of `ElmoModel` that the exported graph computes with
# (words per row, left-padded?) of the batch traced, and of the different batch the exported file is checked on
TRACE_ROWS = [(5, False), (3, False), (2, True)]
CHECK_ROWS = [(9, False), (1, False), (6, True), (4, False), (1, True)]


class OnnxExportError(ToolError):
    """An export that cannot proceed; the message names the path or the cause."""


class ElmoLayers(nn.Module):
    """The exported function: an `ElmoModel`'s every layer, stacked."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`input_ids` (batch, words, chars), `attention_mask` (batch, words) -> every layer (batch, layers, words,
        2 * proj) and the top one (batch, words, 2 * proj)."""
        output = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return torch.stack(output.hidden_states, dim=1), output.last_hidden_state


def example_batch(rows: list[tuple[int, bool]], max_characters: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """
    Random words as `ElmoTokenizer` encodes them: `input_ids` (batch, max words, max_characters) int64 and
    `attention_mask` (batch, max words) int64, a row per `(words, left_padded)` of `rows`.
    """
    rng = random.Random(seed)
    width = max(length for length, _ in rows)
    sentences = [
        ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzÄé.,-") for _ in range(rng.randint(1, 12))) for _ in range(n)]
        for n, _ in rows
    ]
    right_padded = char_ids_tensor(sentences, max_characters, lambda word: word_to_char_ids(word, max_characters))
    input_ids = torch.zeros(len(rows), width, max_characters, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    for row, (length, left_padded) in enumerate(rows):
        words = slice(width - length, width) if left_padded else slice(0, length)
        input_ids[row, words] = right_padded[row, :length]
        attention_mask[row, words] = 1
    return input_ids, attention_mask


def _require_onnx_packages() -> None:
    missing = [name for name in ONNX_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise OnnxExportError(f"{', '.join(missing)} not installed ({extra_install_hint('onnx')}).")


def load_model(model_dir: str | os.PathLike) -> nn.Module:
    """The stateless `ElmoModel` of an ELMo folder, in eval mode, every biLM weight read from the folder and finite
    (`OnnxExportError` otherwise)."""
    from safetensors import SafetensorError
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    from .. import ElmoModel  # registers the ELMo Auto classes

    path = Path(model_dir)
    progress_bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()  # errors stay one line
    hf_logging.set_verbosity_error()  # the load report: what matters in it is checked below
    try:
        # mismatched shapes reported below, by name, rather than in Transformers' multi-line report
        model, loading = AutoModel.from_pretrained(path, output_loading_info=True, ignore_mismatched_sizes=True)
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as error:
        raise OnnxExportError(f"cannot load {path}: {one_line(error)}") from error
    finally:
        hf_logging.set_verbosity(verbosity)
        if progress_bars:
            hf_logging.enable_progress_bar()
    if not isinstance(model, ElmoModel):
        raise OnnxExportError(f"{path} holds a {type(model).__name__}, not an ELMo model.")
    # a tagger's head is unexpected and scalar mixes (not exported) may be missing; every biLM weight must load
    reshaped = sorted(key for key in loading["mismatched_keys"] if key[0].startswith(BILM_PREFIXES))
    if reshaped:
        name, saved_shape, model_shape = reshaped[0]
        raise OnnxExportError(
            f"{path}: the weight '{name}' has shape {tuple(saved_shape)}, but its config.json implies "
            f"{tuple(model_shape)}."
        )
    missing = sorted(name for name in loading["missing_keys"] if name.startswith(BILM_PREFIXES))
    if missing:
        raise OnnxExportError(
            f"{path} lacks the weight '{missing[0]}' of the model its config.json describes; exporting would write "
            "random values in its place."
        )
    for name, parameter in model.named_parameters():
        if name.startswith(BILM_PREFIXES) and not torch.isfinite(parameter).all():
            raise OnnxExportError(f"{path}: the weight '{name}' has non-finite values (NaN or infinite).")
    if model.config.stateful:
        raise OnnxExportError(
            f'{path} is stateful (config.json has "stateful": true): LSTM states carried between calls cannot be '
            "exported; set it to false to export the stateless model."
        )
    return model.eval()


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's progress lines and its warnings about optional packages and axis names."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", message=".*axis name.*")
            yield
    finally:
        logger.setLevel(level)


def export_to_file(model: nn.Module, path: Path, opset: int | None = None) -> None:
    """Export `model` (an `ElmoModel`) to the ONNX file `path` (one file, weights inside), dynamic batch and words."""
    from torch.export import Dim

    batch, words = Dim("batch"), Dim("words")
    sample = example_batch(TRACE_ROWS, model.config.max_characters_per_token)
    with _quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(
            ElmoLayers(model).eval(),
            sample,
            dynamo=True,
            input_names=INPUT_NAMES,
            output_names=OUTPUT_NAMES,
            opset_version=opset,
            dynamic_shapes={"input_ids": {0: batch, 1: words}, "attention_mask": {0: batch, 1: words}},
            verbose=False,
        )
        program.save(path, external_data=False)


def max_difference(model: nn.Module, onnx_path: Path, rows: list[tuple[int, bool]] = CHECK_ROWS) -> float:
    """Max abs difference over all layers between onnxruntime on `onnx_path` and `model` (its own eager path)."""
    import onnxruntime

    input_ids, attention_mask = example_batch(rows, model.config.max_characters_per_token, seed=1)
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    inputs = {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()}
    with torch.inference_mode():
        expected = ElmoLayers(model)(input_ids, attention_mask)
    difference = 0.0
    for name, found, wanted in zip(OUTPUT_NAMES, session.run(OUTPUT_NAMES, inputs), expected, strict=True):
        if tuple(found.shape) != tuple(wanted.shape):
            raise OnnxExportError(
                f"onnxruntime returned {name} of shape {found.shape}, expected {tuple(wanted.shape)}."
            )
        difference = max(difference, float((torch.from_numpy(found) - wanted).abs().max()))
    return difference


def export_onnx(
    model_dir: str | os.PathLike,
    output: str | os.PathLike,
    opset: int | None = None,
    overwrite: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
) -> float:
    """
    Export the `ElmoModel` of `model_dir` to the ONNX file `output`, verified with onnxruntime on another batch shape;
    returns the max abs difference from PyTorch over all layers. Raises `OnnxExportError`.
    """
    output, model_dir = Path(output), Path(model_dir)
    if output.is_dir():
        raise OnnxExportError(f"{output} is a folder; give the path of the .onnx file to write.")
    if output.exists() and not overwrite:
        raise OnnxExportError(f"{output} exists; pass --overwrite to replace it.")
    if output.exists() and output.suffix != ".onnx" and output.resolve().is_relative_to(model_dir.resolve()):
        raise OnnxExportError(f"{output} is a file of the model folder {model_dir}; --overwrite would replace it.")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise OnnxExportError(f"--tolerance must be a finite number >= 0, got {tolerance:g}.")
    if (problem := model_folder_problem(model_dir)) is not None:
        raise OnnxExportError(problem)
    if (method := saved_quantization(model_dir)) is not None:  # see the module docstring
        raise OnnxExportError(
            f"{model_dir} holds a quantized biLM ({method!r}): its layers run CPU kernels that torch.export cannot "
            "trace; export the float32 folder it was quantized from (one saved from a model loaded without "
            "quantization_config)."
        )
    _require_onnx_packages()
    import onnx

    if opset is not None and not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
        raise OnnxExportError(
            f"--opset must be from {MIN_OPSET} (the dynamo exporter's lowest) to {onnx.defs.onnx_opset_version()} "
            f"(the installed onnx's highest), got {opset}."
        )
    blocking = next((path for path in output.parents if path.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise OnnxExportError(f"cannot write {output}: {blocking} is not a folder.")

    def still_free(temporary: Path | None = None) -> None:
        if output.exists() and not overwrite:  # again: it may have appeared meanwhile
            raise OnnxExportError(f"{output} exists; pass --overwrite to replace it.")

    with contextlib.ExitStack() as created_folders:
        try:
            created_folders.enter_context(parent_folders(output))
        except OSError as error:
            raise OnnxExportError(f"cannot write beside {output}: {reason_of(error)}") from error
        created_folders.enter_context(output_claimed(output, "elmo-export-onnx", OnnxExportError))
        still_free()  # under the claim: another run may have written it since the check above
        model = load_model(model_dir)
        with path_replaced_atomically(output, OnnxExportError, before_rename=still_free) as temporary:
            try:
                export_to_file(model, temporary, opset)
            except OSError as error:
                raise OnnxExportError(f"cannot write {output}: {reason_of(error)}") from error
            except Exception as error:  # the exporter's own errors (torch.onnx.errors.*, torch._dynamo.exc.*, ...)
                raise OnnxExportError(
                    f"export failed: {type(error).__name__}: {one_line(error, first=True)}"
                ) from error
            try:
                difference = max_difference(model, temporary)
            except Exception as error:  # onnxruntime's own errors (a graph it cannot load or run)
                if isinstance(error, OnnxExportError):
                    raise
                raise OnnxExportError(
                    f"onnxruntime cannot run the exported file: {type(error).__name__}: {one_line(error, first=True)}"
                ) from error
            if not difference <= tolerance:
                raise OnnxExportError(
                    f"onnxruntime's outputs differ from PyTorch's by {difference:.3g} (> --tolerance {tolerance:g}); "
                    f"{output} was not written."
                )
    return difference


def main(argv: list[str] | None = None) -> int:
    args = onnx_export_parser().parse_args(argv)
    try:
        difference = export_onnx(args.model_dir, args.output, args.opset, args.overwrite, args.tolerance)
    except ToolError as error:
        return report(PROG, error)
    rows = ", ".join(str(length) for length, _ in CHECK_ROWS)
    print(
        f"Wrote {args.output}. Checked with onnxruntime on {len(CHECK_ROWS)} sentences of {rows} words: max abs "
        f"difference from PyTorch over all layers {difference:.3g}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
