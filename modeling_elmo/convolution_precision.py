"""
Exact float32 for the character CNN's convolutions on CUDA: PyTorch lets cuDNN run float32 convolutions on TF32 by
default (about 1e-3 relative), and `ElmoEagerImplementation` (`modeling_elmo.py`) runs its convolutions inside
`fp32_convolutions()` unless the user opted in to TF32 ("eager_tf32"). Imports only torch (shipped as remote code
beside modeling_elmo.py).
"""

import contextlib
import threading
from collections.abc import Iterator

import torch


class Fp32Convolutions:
    """
    A context in which cuDNN's float32 convolutions are exact float32, not TF32 (PyTorch's default lets cuDNN use TF32,
    about 1e-3 relative): `torch.backends.cudnn.conv.fp32_precision = "ieee"` (`allow_tf32 = False` before torch
    2.9). The setting is global, so concurrent calls share it: the first to enter sets it, the last to leave puts back
    what was set before.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._previous: object = None

    @staticmethod
    def _setting() -> tuple[object, str, object]:
        """(where the setting lives, its name, its exact value): the per-operator API where torch has it (reading the
        old flag after the new API was used raises)."""
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):
            return conv, "fp32_precision", "ieee"
        return torch.backends.cudnn, "allow_tf32", False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        owner, name, exact = self._setting()
        with self._lock:
            if self._active == 0:
                self._previous = getattr(owner, name)
                setattr(owner, name, exact)
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    setattr(owner, name, self._previous)


fp32_convolutions = Fp32Convolutions()
