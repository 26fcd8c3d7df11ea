"""
The CPU inference engine as ELMo implementations (`elmo_implementations`): the character CNN's products through
oneDNN (`char_cnn_engine`) and the biLM's in-place recurrence (`lstm_engine`), for calls on a CPU that need no
gradient and are not being exported; the model's reference serves every other call.
"""

import torch

from ..elmo_implementations import ElmoCall, PerLayer
from ..lstm_cell import LayerKey, LstmState, LstmWeights
from .char_cnn_engine import CharCnnEngine
from .lstm_engine import LstmEngine, check_settings


class CpuImplementation(CharCnnEngine):
    """
    One setting of the CPU inference engine (`products`, `threads`: see `lstm_engine.check_settings`), with one
    `LstmEngine` per biLM layer it has run (what that layer's packed weights are kept in,
    until the layer is gone or the model's choice changes). Benchmarks and callers that own their process make other
    settings with this constructor and register them under their own names.
    """

    embeds_unique_words = True

    def __init__(self, products: str = "onednn", threads: int | str | None = None) -> None:
        check_settings(products, threads)
        self.products, self.threads = products, threads
        self._engines = PerLayer()

    def supports(self, call: ElmoCall) -> bool:
        """Calls on a CPU without gradients, not exported; for the character CNN, those `CharCnnEngine` applies to."""
        if call.needs_grad or call.exporting or call.device.type != "cpu":
            return False
        return call.part == "lstm" or self.applies(call.dtype, call.weight_dtype)

    def engine(self, weights: LstmWeights) -> LstmEngine:
        """The `LstmEngine` of the layer of `weights` under this setting (made on first use)."""
        return self._engines.of(weights, lambda: LstmEngine(self.products, self.threads))

    def lstm_layer(
        self, weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        return self.engine(weights).run(weights, inputs, batch_sizes, initial_state)

    def release(self, key: LayerKey) -> None:
        """Drop the packed weights kept for the layer of `key` (`LstmWeights.key`)."""
        self._engines.pop(key, None)
