"""
The CPU inference engine: registers its implementations with `elmo_implementations` when imported (the package's
`register_auto_classes` imports it; the model file does not). Names, for `model.set_implementation(name)`:

- "cpu" (a default): oneDNN with the recurrent and projection weights packed into its layout, kept with a fingerprint
  of the weights' bits that every call checks (`weight_fingerprint`); `bmm` for a single sentence; nothing timed;
- "cpu_views": the same products on the weights' own views (nothing derived, nothing kept; slower where oneDNN
  reorders a plain weight on every product, as on AMD EPYC with AVX-512);
- "cpu_packed": every product on packed weights, a single sentence's included;
- "cpu_bmm": `torch.bmm` for both directions at once; "cpu_auto": packed or bmm, whichever a few timed steps favour;
- "cpu_int8", "cpu_bf16": compressed recurrent and projection weights (not exact; faster at small batches);
- "cpu_threads": "cpu" with the thread count of each block of time steps chosen online (for callers that own their
  process, with `tuned_call` around each call: `elmo-embed`).

`CpuImplementation(products, threads, compression)` makes other settings to register.

On CUDA devices, with Triton installed (the `gpu` extra), `triton_implementation` registers "triton" (a default
there: exact float32), "triton_tf32" and "triton_bf16" (chosen by name).
"""

import torch

from ..elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from .cpu_implementation import CpuImplementation
from .cpu_linear import onednn_linear_applies
from .lstm_engine import tuned_call
from .triton_implementation import register_triton_implementations

ALL_ELMO_IMPLEMENTATIONS.register("cpu", CpuImplementation(), default=True)
ALL_ELMO_IMPLEMENTATIONS.register("cpu_views", CpuImplementation("views"))
ALL_ELMO_IMPLEMENTATIONS.register("cpu_bmm", CpuImplementation("bmm"))
ALL_ELMO_IMPLEMENTATIONS.register("cpu_auto", CpuImplementation("auto"))
ALL_ELMO_IMPLEMENTATIONS.register("cpu_int8", CpuImplementation(compression="int8"))
ALL_ELMO_IMPLEMENTATIONS.register("cpu_bf16", CpuImplementation(compression="bf16"))
ALL_ELMO_IMPLEMENTATIONS.register("cpu_threads", CpuImplementation(threads="auto"))
if onednn_linear_applies(torch.zeros(1), torch.zeros(1)):  # packed weights need oneDNN
    ALL_ELMO_IMPLEMENTATIONS.register("cpu_packed", CpuImplementation("packed"))
register_triton_implementations(ALL_ELMO_IMPLEMENTATIONS)

__all__ = ["CpuImplementation", "tuned_call"]
