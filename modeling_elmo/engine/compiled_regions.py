"""
The element-wise work between a time step's products, compiled into one loop per region by torch's own compiler
(`torch.compile`, inductor's C++ on CPUs), opt-in: with `ELMO_FUSED_STEP=1` in the environment. Otherwise, and where
it cannot compile (no C++ compiler, a compile that fails, a call inside another compilation), each region runs as its
eager ATen operations. A time step of the biLM runs a dozen element-wise passes over (rows x 4 * cell_size) values
between its two products (activations, cell update, clips, scales, bias); compiled, a region reads its inputs once.

Why opt-in (docs/speed.md, "The fused time step"; 'original' shapes, int8, AMD EPYC Zen 4): a compiled call costs
about 50 us more than its loop (Dynamo's guards and wrappers), so up to a few rows a step it is slower than the eager
operations (0.7-0.8x at 1-4 rows) and at 64 rows 1.05-1.13x faster; the first compiled call of a process takes 2-12 s
(inductor writes C++ and builds it, then keeps the build in its on-disk cache, `TORCHINDUCTOR_CACHE_DIR`); and its
sigmoid rounds differently from ATen's (within 4e-7), so a sentence keeps the same bits in any batch only if every
call of the process takes the same path.

`CompiledRegion(function)`: a callable computing `function` (a pure function of tensors and Python floats or None,
shapes `(rows, width)` with any row count: compiled once with dynamic shapes, so a batch whose sentences end one by
one compiles nothing more). A region that fails to compile warns once and runs eagerly from then on.
"""

import os
import threading
import warnings
from collections.abc import Callable

import torch

FUSED_STEP_VARIABLE = "ELMO_FUSED_STEP"  # "1": the regions compile


def fused_step_enabled() -> bool:
    """Whether regions compile: where `ELMO_FUSED_STEP` is `"1"` (read at each region's first call)."""
    return os.environ.get(FUSED_STEP_VARIABLE, "").strip() == "1"


class CompiledRegion:
    """`function` compiled by inductor on its first call where that is asked for and works, else `function` itself
    (see the module)."""

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
                    f"time step runs its eager operations (unset {FUSED_STEP_VARIABLE} to skip the attempt).",
                    RuntimeWarning,
                    stacklevel=3,
                )
