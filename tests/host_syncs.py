"""A record of the calls that make the host wait for an accelerator (a CUDA device) when they run there: reading a
value (`item`, `tolist`, `bool`, `int`, ...), results of data-dependent size (`nonzero`, `unique`, boolean indexing)
and copies between host and device (`torch.tensor`, `cpu`, `numpy`). On a CPU they wait for nothing, but recording
them shows, without a GPU, where a CUDA run would stall: tests of the CUDA-ready model assert where there are none."""

import torch
from torch.overrides import TorchFunctionMode

READS = {"__bool__", "__int__", "__float__", "__index__", "item", "tolist", "cpu", "numpy", "tensor", "as_tensor"}
DATA_DEPENDENT = {"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select", "repeat_interleave"}
INDEXING = {"__getitem__", "__setitem__", "index_put", "index_put_"}


def _has_bool_index(args: tuple) -> bool:
    """Whether an indexing call's index (its second argument) holds a boolean tensor."""
    if len(args) < 2:
        return False
    index = args[1] if isinstance(args[1], (tuple, list)) else (args[1],)
    return any(isinstance(item, torch.Tensor) and item.dtype == torch.bool for item in index)


class HostSyncs(TorchFunctionMode):
    """Inside `with HostSyncs() as syncs:`, `syncs.calls` lists the name of every such call, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS or name in DATA_DEPENDENT or (name in INDEXING and _has_bool_index(args)):
            self.calls.append(name)
        elif name == "to" and any(str(arg) == "cpu" for arg in [*args[1:], *(kwargs or {}).values()]):
            self.calls.append("to(cpu)")
        return func(*args, **(kwargs or {}))
