"""
The registry of ELMo's implementations, looked up by name as Transformers looks up attention
(`ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, eager_attention_forward)`).

An implementation is an object with the model's swappable functions: the character CNN's two products
(`linear(module, inputs)`, `max_pooled_convolution(conv, chars)`), one biLM layer's recurrence
(`lstm_layer(layer, inputs, batch_sizes, initial_state)`, the arguments and results of `ElmoLstmLayer.forward`),
`embeds_unique_words` (whether the character CNN runs once per distinct word, through the word stores) and
`supports(module, inputs, needs_grad, exporting)`. Optional: `release(module)`, called when a model chooses another
implementation that keeps something per module (such as weights derived for it), and `check(module)`, which
raises `ValueError` when a model that it cannot run chooses it. The reference functions live in `modeling_elmo.py`
(`ElmoEagerImplementation`); `modeling_elmo.engine` registers the CPU inference engine's. A new implementation
(CUDA, say) is one object registered here: `ALL_ELMO_IMPLEMENTATIONS.register("cuda", CudaImplementation(),
default=True)`.
"""

from typing import Protocol

import torch
from torch import nn

from .padded_recurrence import is_exporting

LstmState = tuple[torch.Tensor, torch.Tensor]


class ElmoImplementation(Protocol):
    """What `ElmoCharacterEncoder` and `ElmoLstmLayer` call (see the module docstring)."""

    embeds_unique_words: bool

    def supports(self, module: nn.Module, inputs: torch.Tensor, needs_grad: bool, exporting: bool) -> bool: ...

    def linear(self, module: nn.Linear, inputs: torch.Tensor) -> torch.Tensor: ...

    def max_pooled_convolution(self, conv: nn.Conv1d, chars: torch.Tensor) -> torch.Tensor: ...

    def lstm_layer(
        self, layer: nn.Module, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]: ...


class ElmoImplementations:
    """Implementations by name, and the names tried in turn when a model has chosen none (`defaults`)."""

    def __init__(self) -> None:
        self._by_name: dict[str, ElmoImplementation] = {}
        self.defaults: list[str] = []

    def register(self, name: str, implementation: ElmoImplementation, default: bool = False) -> None:
        """Add (or replace) `name`; with `default`, models that chose no implementation try it first."""
        self._by_name[name] = implementation
        if default and name not in self.defaults:
            self.defaults.insert(0, name)

    def unregister(self, name: str) -> None:
        """Remove `name` (models that chose it fall back to the reference)."""
        self._by_name.pop(name, None)
        if name in self.defaults:
            self.defaults.remove(name)

    def release(self, module: nn.Module, keep: ElmoImplementation | None = None) -> None:
        """Let every implementation but `keep` drop what it keeps for `module` (the model's choice changes)."""
        for implementation in self._by_name.values():
            release = getattr(implementation, "release", None)
            if release is not None and implementation is not keep:
                release(module)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def get_interface(self, name: str | None, default: ElmoImplementation) -> list[ElmoImplementation]:
        """The candidates for a model's choice `name`, best first: that implementation, then the registered
        defaults, `default` (the reference) last. (An implementation that supports only part of the model, such as
        the biLM's recurrence, leaves the rest to the defaults.)"""
        names = dict.fromkeys([name, *self.defaults] if name is not None else self.defaults)
        return [self._by_name[key] for key in names if key in self._by_name] + [default]


ALL_ELMO_IMPLEMENTATIONS = ElmoImplementations()


def resolve_implementation(
    name: str | None, module: nn.Module, inputs: torch.Tensor, default: ElmoImplementation
) -> ElmoImplementation:
    """
    The one switch: the implementation that computes `module`'s call on `inputs`, from the model's choice `name`
    (`None`: the registered defaults), whether a gradient is needed (autograd on, and `inputs` or a parameter of
    `module` requiring one), and whether the call is being exported; each candidate says for itself whether it
    supports the call (device, dtype), and `default`, the reference, supports every call. Under `torch.compile`
    (not an export) the reference computes: dynamo traces it, and no guard depends on the registry's contents.
    """
    exporting = is_exporting()
    if torch.compiler.is_compiling() and not exporting:
        return default
    needs_grad = torch.is_grad_enabled() and (
        inputs.requires_grad or any(parameter.requires_grad for parameter in module.parameters())
    )
    for implementation in ALL_ELMO_IMPLEMENTATIONS.get_interface(name, default):
        if implementation is default or implementation.supports(module, inputs, needs_grad, exporting):
            return implementation
    return default
