"""
A model loaded for inference: `load_model` gives an ELMo model's tokenizer and model (a folder or a Hub id, through
the one loader `pretrained`) in eval mode on a device, in a dtype, quantized or exact, with ELMo registered with the
Auto classes first (`registration`); `checked_device` checks a device name before anything loads. `elmo-embed`,
`ElmoBatchEmbedder` and `elmo serve` load through it. Every failure is one line: `ModelError` for a model that
cannot be loaded or used, `DeviceError` for a device that cannot be used here.

torch, Transformers and the Hub are imported when the work starts.
"""

from __future__ import annotations  # torch types in annotations: imported when the work starts

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..foundation.errors import ToolError, ToolInputError, one_line
from .registration import register_auto_classes

if TYPE_CHECKING:
    import torch


class ModelError(ToolError, RuntimeError):
    """A model or tokenizer that cannot be loaded or used."""


class DeviceError(ToolInputError, ValueError):
    """A device that cannot be used here."""


def load_model(
    model_id: str, dtype: torch.dtype, device: torch.device, progress: bool = True, quantization: str | None = None
):
    """Load tokenizer and model (a folder or Hub repo id) of an ELMo model, in eval mode on `device`, quantized with
    `quantization` (one of `quantization.methods.METHODS`; None: exact); `progress=False`: without progress bars (the
    process's setting is left as it was)."""
    from .pretrained import load_pretrained_model, load_pretrained_tokenizer

    register_auto_classes()
    options = {}
    if quantization is not None:
        from ..quantization.config import ElmoQuantizationConfig

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
    from .pretrained import ModelLoadError

    try:
        yield
    except ModelLoadError as error:
        raise ModelError(f"Cannot load model {error}") from error
    except Exception as error:
        raise ModelError(f"Cannot load model '{model_id}': {type(error).__name__}: {one_line(error)}") from error


def checked_device(name: str) -> torch.device:
    """The torch device `name`, checked to be usable here."""
    import torch

    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:  # AssertionError: CUDA asked of a CPU-only build
        raise DeviceError(f"Cannot use device '{name}': {one_line(error)}") from error
    if device.type == "meta":
        raise DeviceError("Cannot use device 'meta': it holds no values; use cpu or cuda.")
    return device
