"""Loading an ELMo model and computing a batch's vectors: the library core that `elmo-embed` (`cli`) and
`ElmoBatchEmbedder` share (torch, numpy, Transformers and the Hub imported on first use)."""

from __future__ import annotations  # torch and numpy types in annotations: imported when the work starts

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..commands import start_work
from ..foundation.errors import ToolError, ToolInputError, one_line
from .batching import Batch, Sentence

if TYPE_CHECKING:
    import numpy as np
    import torch

QUANTIZATIONS = ("int8", "int8_weight_only", "bf16")  # the methods of `ElmoQuantizationConfig`


class EmbedModelError(ToolError, RuntimeError):
    """A model or tokenizer that cannot be loaded or used."""


class EmbedUsageError(ToolInputError, ValueError):
    """Command-line arguments or environment variables that cannot work."""


def load_model(
    model_id: str, dtype: torch.dtype, device: torch.device, progress: bool = True, quantization: str | None = None
):
    """Load tokenizer and model (a folder or Hub repo id) of an ELMo model, in eval mode on `device`, quantized with
    `quantization` (one of `QUANTIZATIONS`; None: exact); `progress=False`: without progress bars (the process's
    setting is left as it was)."""
    from ..hub.pretrained import load_pretrained_model, load_pretrained_tokenizer

    start_work()  # registers the Auto classes
    options = {}
    if quantization is not None:
        from .. import ElmoQuantizationConfig

        options["quantization_config"] = ElmoQuantizationConfig(method=quantization)
    with contextlib.nullcontext() if progress else _without_progress_bars():
        with _loading(model_id):
            model = load_pretrained_model(model_id, dtype=dtype, **options)
            tokenizer = load_pretrained_tokenizer(model_id)
    return tokenizer, model.to(device).eval()


@contextlib.contextmanager
def _without_progress_bars() -> Iterator[None]:
    """No progress bars from Transformers or the Hub in the block; both shown after as they were before (the Hub's
    own switches: its `disable_progress_bars` is a context manager only in huggingface_hub 1.x)."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging

    shown, hub_shown = logging.is_progress_bar_enabled(), not are_progress_bars_disabled()
    logging.disable_progress_bar()
    disable_progress_bars()
    try:
        yield
    finally:
        if shown:
            logging.enable_progress_bar()
        if hub_shown:
            enable_progress_bars()


@contextlib.contextmanager
def _loading(model_id: str) -> Iterator[None]:
    """Report any failure to load `model_id` (its files come from the user: anything can go wrong) on one line."""
    from ..hub.pretrained import ModelLoadError

    try:
        yield
    except ModelLoadError as error:
        raise EmbedModelError(f"Cannot load model {error}") from error
    except Exception as error:
        raise EmbedModelError(f"Cannot load model '{model_id}': {type(error).__name__}: {one_line(error)}") from error


def checked_device(name: str) -> torch.device:
    """The torch device `name`, checked to be usable here."""
    import torch

    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:  # AssertionError: CUDA asked of a CPU-only build
        raise EmbedUsageError(f"Cannot use device '{name}': {one_line(error)}") from error
    if device.type == "meta":
        raise EmbedUsageError("Cannot use device 'meta': it holds no values; use cpu or cuda.")
    return device


def _encode(tokenizer, sentences: list[Sentence], device: torch.device) -> dict[str, torch.Tensor]:
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    return {key: encoded[key].to(device) for key in ("input_ids", "attention_mask")}


def embed_batch(model, tokenizer, batch: Batch, layers: str, pooling: str = "none") -> dict[int, np.ndarray]:
    """Float32 arrays of every sentence of `batch` by line index, shaped as in the module docstring: per word, or
    with `pooling="mean"` the mean over the sentence's words (the word axis removed)."""
    import numpy as np
    import torch

    num_layers, width = model.config.num_hidden_layers + 1, model.config.hidden_size
    empty_shape = (num_layers, 0, width) if layers == "all" else (0, width)
    if pooling == "mean":
        empty_shape = empty_shape[:-2] + empty_shape[-1:]
    arrays = {sentence.index: np.zeros(empty_shape, np.float32) for sentence in batch.sentences if not sentence.words}
    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return arrays
    from ..engine import tuned_call

    encoded = _encode(tokenizer, sentences, model.device)
    with torch.inference_mode():  # this command owns its process: fewer threads where the machine is busy, same bits

        def compute():
            return model(**encoded, output_hidden_states=layers != "top")

        output = tuned_call(compute, encoded["attention_mask"], tuning_key(model))
        if layers == "top":
            values = output.last_hidden_state  # (batch, words, width)
        else:
            values = torch.stack(output.hidden_states, dim=1).float()  # (batch, layers, words, width)
            if layers == "average":
                values = values.mean(dim=1)
        values = values.float().cpu().numpy()
    for row, sentence in enumerate(sentences):
        words = values[row, ..., : len(sentence.words), :]  # ([layers,] words, width)
        arrays[sentence.index] = np.ascontiguousarray(words.mean(axis=-2) if pooling == "mean" else words)
    return arrays


def tuning_key(model) -> tuple:
    """What tells the calls of `model` (an `ElmoModel`) apart for `engine.tuned_call`: the shapes and dtypes of its
    parameters and buffers (quantized weights included) and its choice of implementation."""
    tensors = (*model.parameters(), *model.buffers())
    return tuple((tuple(tensor.shape), tensor.dtype) for tensor in tensors), model.config._elmo_implementation


def replay_in_word_cache(model, tokenizer, batch: Batch) -> None:
    """
    Put the words of a batch computed before an interruption through the character-CNN word cache as the model's
    forward pass does. A word's CNN output depends in its last bits on the words computed alongside it, so only a
    cache that sees every batch of its window in order (it is emptied at each window) holds the values of an
    uninterrupted run, and gives the window's later batches its exact results.
    """
    import torch

    sentences = [sentence for sentence in batch.sentences if sentence.words]
    if not sentences:
        return
    encoded = _encode(tokenizer, sentences, model.device)
    words = encoded["input_ids"][encoded["attention_mask"].bool()]  # the forward pass's words, in another order
    with torch.inference_mode():
        model.char_encoder.embed_words(torch.cat([words, model.char_encoder.boundary_char_ids(model.device)]))
