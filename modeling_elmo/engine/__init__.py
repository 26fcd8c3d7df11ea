"""
The CPU inference engine: registers its implementations with `elmo_implementations` when imported (the package's
`register_auto_classes` imports it; the model file does not). Names, for `model.set_implementation(name)`:

- "cpu" (the default for CPU calls): oneDNN with the recurrent and projection weights packed into its layout, kept
  with a fingerprint of the weights' bits that every call checks (`weight_fingerprint`); `bmm` for a single sentence;
  nothing timed. (Compressed weights are a quantized model's, `modeling_elmo.quantization`: one way to compress.)
- "cpu_threads": "cpu" with the thread count of each block of time steps chosen online, for callers that own their
  process (`elmo-embed` chooses it, with `tuned_call` around each call): the same bits as "cpu".

`CpuImplementation(products, threads)` makes other settings, for a caller to register under its own name (the
benchmarks' "views", "bmm", "auto" and "packed" products).

On CUDA devices, with Triton installed (the `gpu` extra), `triton_implementation` registers "triton" (a default
there, never for CPU calls: exact float32), "triton_tf32" and "triton_bf16" (chosen by name).
"""

from ..elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from .cpu_implementation import CpuImplementation
from .lstm_engine import tuned_call
from .triton_implementation import register_triton_implementations

ALL_ELMO_IMPLEMENTATIONS.register("cpu", CpuImplementation(), default=True, device_types=("cpu",))
ALL_ELMO_IMPLEMENTATIONS.register("cpu_threads", CpuImplementation(threads="auto"))
register_triton_implementations(ALL_ELMO_IMPLEMENTATIONS)

__all__ = ["CpuImplementation", "tuned_call"]
