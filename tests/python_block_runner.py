"""Run by doc_commands.run_python as `python python_block_runner.py BLOCK.py NAMESPACE.pt`: runs a documentation
page's Python block as a script (`__main__`, in a fresh interpreter: nothing is imported for it), then saves what its
global names hold that a check can compare (tensors, arrays, numbers, strings, and lists, tuples and mappings of
them, such as a model's outputs or a tokenizer's batch) to NAMESPACE.pt; names holding anything else are left out."""

import runpy
import sys
from collections.abc import Mapping

namespace = runpy.run_path(sys.argv[1], run_name="__main__")

import numpy as np  # noqa: E402  (after the block: the block imports what it needs itself)
import torch  # noqa: E402


class NotPlain(Exception):
    """A value that is not data (a model, a module, a function, a pipeline)."""


def plain(value: object) -> object:
    """`value` as tensors, arrays, numbers, strings, lists and dicts, or NotPlain."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor, np.ndarray, np.generic)):
        return value
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    raise NotPlain(type(value).__name__)


saved = {}
for name, value in namespace.items():
    if name.startswith("_"):
        continue
    try:
        saved[name] = plain(value)
    except NotPlain:
        continue
torch.save(saved, sys.argv[2])
