"""
The CPU inference engine as ELMo implementations (`elmo_implementations`): the character CNN's products through
oneDNN (`char_cnn_engine`) and the biLM's in-place recurrence (`lstm_engine`), for calls on a CPU that need no
gradient and are not being exported; the model's reference serves every other call.
"""

import weakref

import torch
from torch import nn

from ..elmo_implementations import LstmState
from .char_cnn_engine import CharCnnEngine
from .lstm_engine import LstmEngine, check_settings


class CpuImplementation(CharCnnEngine):
    """
    One setting of the CPU inference engine (`products`, `threads`, `compression`: see `lstm_engine.check_settings`),
    with one `LstmEngine` per biLM layer it has run (what that layer's packed or compressed weights are kept in,
    until the layer is gone or the model's choice changes).
    """

    embeds_unique_words = True

    def __init__(
        self, products: str = "onednn", threads: int | str | None = None, compression: str | None = None
    ) -> None:
        check_settings(products, threads, compression)
        self.products, self.threads, self.compression = products, threads, compression
        self._engines: weakref.WeakKeyDictionary[nn.Module, LstmEngine] = weakref.WeakKeyDictionary()

    def supports(self, module: nn.Module, inputs: torch.Tensor, needs_grad: bool, exporting: bool) -> bool:
        """Calls on a CPU without gradients, not exported; for the character CNN, those `CharCnnEngine` applies to."""
        if needs_grad or exporting or inputs.device.type != "cpu":
            return False
        return self.applies(module, inputs) if hasattr(module, "convolutions") else True

    def check(self, module: nn.Module) -> None:
        """Refuse compressed weights for a biLM layer that is not float32 on a CPU (when the model chooses this)."""
        weight = getattr(module, "weight_hh", None)
        if self.compression is not None and weight is not None:
            if weight.device.type != "cpu" or weight.dtype != torch.float32:
                raise ValueError(
                    f"Compressed weights ({self.compression!r}): the CPU engine needs the float32 model on a CPU; "
                    f"the LSTM weights are {weight.dtype} on {weight.device}."
                )

    def engine(self, layer: nn.Module) -> LstmEngine:
        """The `LstmEngine` of `layer` under this setting (made on first use)."""
        engine = self._engines.get(layer)
        if engine is None:
            engine = self._engines.setdefault(layer, LstmEngine(self.products, self.threads, self.compression))
        return engine

    def lstm_layer(
        self, layer: nn.Module, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        return self.engine(layer).run(layer, inputs, batch_sizes, initial_state)

    def release(self, module: nn.Module) -> None:
        """Drop the packed or compressed weights kept for `module`."""
        self._engines.pop(module, None)
