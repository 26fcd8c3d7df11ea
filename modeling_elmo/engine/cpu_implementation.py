"""
The CPU inference engine as ELMo implementations (`elmo_implementations`): the character CNN's products through
oneDNN (`char_cnn_engine`) and the biLM's in-place recurrence (`lstm_engine`), for calls on a CPU that need no
gradient and are not being exported; the model's reference serves every other call.
"""

import torch

from ..elmo_implementations import ElmoCall, LstmState, LstmWeights, PerLayer
from .char_cnn_engine import CharCnnEngine
from .lstm_engine import LstmEngine, check_settings


class CpuImplementation(CharCnnEngine):
    """
    One setting of the CPU inference engine (`products`, `threads`, `compression`: see `lstm_engine.check_settings`),
    with one `LstmEngine` per biLM layer it has run (what that layer's packed or compressed weights are kept in,
    until the layer is gone or the model's choice changes). Benchmarks and callers that own their process make other
    settings with this constructor and register them under their own names.
    """

    embeds_unique_words = True

    def __init__(
        self, products: str = "onednn", threads: int | str | None = None, compression: str | None = None
    ) -> None:
        check_settings(products, threads, compression)
        self.products, self.threads, self.compression = products, threads, compression
        self._engines = PerLayer()

    def supports(self, call: ElmoCall) -> bool:
        """Calls on a CPU without gradients, not exported; for the character CNN, those `CharCnnEngine` applies to."""
        if call.needs_grad or call.exporting or call.device.type != "cpu":
            return False
        return call.part == "lstm" or self.applies(call.dtype, call.weight_dtype)

    def check(self, weights: LstmWeights) -> None:
        """Refuse compressed weights for a biLM layer that is not float32 on a CPU (when the model chooses this)."""
        weight = weights.weight_hh
        if self.compression is not None and (weight.device.type != "cpu" or weight.dtype != torch.float32):
            raise ValueError(
                f"Compressed weights ({self.compression!r}): the CPU engine needs the float32 model on a CPU; "
                f"the LSTM weights are {weight.dtype} on {weight.device}."
            )

    def engine(self, weights: LstmWeights) -> LstmEngine:
        """The `LstmEngine` of the layer of `weights` under this setting (made on first use)."""
        return self._engines.of(weights, lambda: LstmEngine(self.products, self.threads, self.compression))

    def lstm_layer(
        self, weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        return self.engine(weights).run(weights, inputs, batch_sizes, initial_state)

    def release(self, owner: object) -> None:
        """Drop the packed or compressed weights kept for the layer `owner`."""
        self._engines.pop(owner, None)
