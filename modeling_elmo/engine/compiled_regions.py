"""
The element-wise work between a time step's products, compiled into one loop per region by torch's own compiler
(`torch.compile`, inductor's C++ on CPUs) where it runs here, and run as the region's eager ATen operations where it
does not: no C++ compiler, a compile that fails, a call inside another compilation, or `ELMO_FUSED_STEP=0` in the
environment. A time step of the biLM runs a dozen element-wise passes over (rows x 4 * cell_size) values between its
two products (activations, cell update, clips, scales, bias); compiled, each region reads its inputs once.

`CompiledRegion(function)`: a callable computing `function` (a pure function of tensors and Python floats, shapes
`(rows, width)` with any row count: compiled once with dynamic shapes, so a batch whose sentences end one by one
compiles nothing more). The first compiled call of a process takes seconds (inductor writes C++ and builds it, then
keeps the build in its on-disk cache, `TORCHINDUCTOR_CACHE_DIR`, for the next process); the time is in docs/speed.md.
A region that fails to compile warns once and runs eagerly from then on.
"""

import os
import threading
import warnings
from collections.abc import Callable

import torch

FUSED_STEP_VARIABLE = "ELMO_FUSED_STEP"  # "0": every region eager


def fused_step_enabled() -> bool:
    """Whether regions compile at all: not where `ELMO_FUSED_STEP` is `"0"` (read at each region's first call)."""
    return os.environ.get(FUSED_STEP_VARIABLE, "1").strip() != "0"


class CompiledRegion:
    """`function` compiled by inductor on its first call where it compiles, else `function` itself (see the module)."""

    def __init__(self, function: Callable[..., object]) -> None:
        self.function = function
        self._compiled: Callable[..., object] | None = None
        self._decided = False
        self._lock = threading.Lock()

    def __call__(self, *args: object) -> object:
        compiled = self._compiled if self._decided else self._decide()
        if compiled is None or torch.compiler.is_compiling():
            return self.function(*args)
        try:
            return compiled(*args)
        except Exception as error:  # noqa: BLE001 - inductor raises many kinds; the eager call raises a real error
            self._give_up(error)
            return self.function(*args)

    @property
    def compiled(self) -> bool:
        """Whether calls run the compiled region (False before the first call, or once it gave up)."""
        return self._compiled is not None

    def _decide(self) -> Callable[..., object] | None:
        with self._lock:
            if not self._decided:
                if fused_step_enabled():
                    self._compiled = torch.compile(self.function, dynamic=True, fullgraph=True)
                self._decided = True
        return self._compiled

    def _give_up(self, error: Exception) -> None:
        with self._lock:
            if self._compiled is not None:
                self._compiled = None
                reason = " ".join(str(error).split())[:300]
                warnings.warn(
                    f"{self.function.__name__}: torch.compile failed here ({type(error).__name__}: {reason}); the "
                    f"time step runs its eager operations (set {FUSED_STEP_VARIABLE}=0 to skip the attempt).",
                    RuntimeWarning,
                    stacklevel=3,
                )
