"""
The registry of ELMo's implementations, looked up by name as Transformers looks up attention
(`ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, eager_attention_forward)`).

The model's choice is held once, in its config (`config._elmo_implementation`, set by `from_pretrained(...,
elmo_implementation=name)` or `model.set_implementation(name)`; not saved, as `attn_implementation` is not), and
resolved once per forward call (`ElmoDispatch`): for each part of the model (the character CNN, the biLM's
recurrence), the candidates that support the call, best first: the chosen implementation, the defaults registered for
the device type of the call, the reference last; a candidate that finds it cannot compute a call after all raises
`ImplementationUnavailable`, and the next one computes it. An implementation receives tensors and settings (for a biLM
layer its `LstmWeights`, for the character CNN each product's weight and bias), never the model's modules, and may
implement one part only (the rest goes to the next candidate). What an implementation provides is
`ElmoImplementation` (docs/design-notes.md, "Implementations"); the reference ones ("eager", "eager_tf32",
"reference") are `reference_implementations`, registered here.
"""

import contextlib
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import torch

from .elmo_call import ElmoCall, is_exporting
from .lstm_cell import LayerKey, LstmState, LstmWeights
from .reference_implementations import ELMO_EAGER, ElmoEagerImplementation, ElmoReferenceImplementation


class ElmoImplementation(Protocol):
    """
    What an implementation provides (docs/design-notes.md, "Implementations"):

    - `supports(call)`: whether it computes `call.part` of an `ElmoCall` (device, dtype, gradients, export);
    - for the character CNN (`part == "char_cnn"`): `linear(inputs, weight, bias)`, (..., in) -> (..., out) with
      weight (out, in) and bias (out,), and `max_pooled_convolution(chars, weight, bias)`, the convolution of weight
      (filters, char_dim, width) and bias (filters,) over chars (num_words, num_chars, char_dim) max-pooled over
      positions -> (num_words, filters); either may raise `ImplementationUnavailable`;
    - for the biLM (`part == "lstm"`): `lstm_layer(weights, inputs, batch_sizes, initial_state)`, `weights` the
      layer's `LstmWeights`, `inputs` (2, num_packed, input_size) packed, `batch_sizes` the rows per step, the initial
      (hidden (2, batch, proj_size), cell (2, batch, cell_size)) -> (outputs (2, num_packed, proj_size), final state);
      it may raise `ImplementationUnavailable` to hand the call to the next candidate;
    - `embeds_unique_words`: whether the character CNN runs once per distinct word (through the word stores) when it
      is the model's choice.

    Optional: `unavailable()`, why it cannot run in this process ("needs Triton: ..."), or `None`; `check(weights)`,
    called by `set_implementation` with each layer's `LstmWeights`, raising `ValueError` for a model it cannot run;
    `release(key)`, to drop what it keeps for the layer of `LstmWeights.key` when the model chooses another
    implementation.
    """

    embeds_unique_words: bool

    def supports(self, call: ElmoCall) -> bool: ...


class ImplementationUnavailable(RuntimeError):
    """Raised by an implementation's `lstm_layer` or character-CNN product that cannot compute the call after all (a
    kernel that does not compile for the device): the call goes to the next candidate."""


class PerLayer(weakref.WeakKeyDictionary):
    """What an implementation keeps per layer, keyed by `LstmWeights.key` and dropped with the layer."""

    def of(self, weights: LstmWeights, make: Callable[[], object]) -> object:
        """The value kept for `weights.key` (made by `make()` on first use)."""
        value = self.get(weights.key)
        if value is None:
            value = self.setdefault(weights.key, make())
        return value


class ElmoImplementations:
    """Implementations by name, and per device type the names tried in turn after the model's choice
    (`defaults_for`)."""

    def __init__(self) -> None:
        self._by_name: dict[str, ElmoImplementation] = {}
        self._defaults: list[tuple[str, frozenset[str] | None]] = []  # best first: name, device types (None: all)

    def register(
        self,
        name: str,
        implementation: ElmoImplementation,
        default: bool = False,
        device_types: Iterable[str] | None = None,
    ) -> None:
        """Add (or replace) `name`. With `default`, models try it first (after their choice) for calls on
        `device_types` (None: every device type); it is never a candidate for other device types unless chosen by
        name."""
        self.unregister(name)
        self._by_name[name] = implementation
        if default:
            self._defaults.insert(0, (name, frozenset(device_types) if device_types is not None else None))

    def unregister(self, name: str) -> None:
        """Remove `name` (models that chose it fall back to the defaults)."""
        self._by_name.pop(name, None)
        self._defaults = [entry for entry in self._defaults if entry[0] != name]

    def release(self, key: LayerKey, keep: ElmoImplementation | None = None) -> None:
        """Let every implementation but `keep` drop what it keeps for the layer of `key` (`LstmWeights.key`: the
        model's choice changes)."""
        for implementation in self._by_name.values():
            release = getattr(implementation, "release", None)
            if release is not None and implementation is not keep:
                release(key)

    def names(self) -> list[str]:
        """Every registered name, those that cannot run in this process included (`unavailable`)."""
        return sorted(self._by_name)

    def unavailable(self, name: str) -> str | None:
        """Why the implementation `name` cannot run in this process ("needs X: ..."), or `None`."""
        reason = getattr(self._by_name[name], "unavailable", None)
        return reason() if reason is not None else None

    def check_name(self, name: object) -> None:
        """Refuse a model's choice `name` that is not `None` or a registered name that can run in this process
        (`ValueError`, one line listing those that can)."""
        if name is None:
            return
        known = isinstance(name, str) and name in self._by_name
        reason = self.unavailable(name) if known else None
        if known and reason is None:
            return
        valid = ", ".join(repr(other) for other in self.names() if self.unavailable(other) is None)
        problem = f"Implementation {name!r} {reason};" if known else f"Unknown implementation {name!r}:"
        raise ValueError(f"{problem} registered are {valid} (those that run here), or None for the default.")

    @property
    def defaults(self) -> list[str]:
        """Every name that is a default on some device type."""
        return [name for name, _ in self._defaults]

    def defaults_for(self, device_type: str) -> list[str]:
        """The defaults for calls on `device_type`, best first."""
        return [name for name, types in self._defaults if types is None or device_type in types]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def get_interface(
        self, name: str | None, default: ElmoImplementation, device_type: str | None = None
    ) -> list[ElmoImplementation]:
        """The candidates for a model's choice `name`, best first: that implementation, then the defaults for
        `device_type` (None: the defaults of every device type), `default` (the reference) last."""
        defaults = self.defaults if device_type is None else self.defaults_for(device_type)
        names = dict.fromkeys([name, *defaults] if name is not None else defaults)
        return [self._by_name[key] for key in names if key in self._by_name] + [default]

    def candidates(self, call: ElmoCall, default: ElmoImplementation) -> list[ElmoImplementation]:
        """The implementations that compute `call`, best first (its choice, then the defaults for its device type),
        `default` (the reference) last."""
        found = self.get_interface(call.choice, default, call.device.type)[:-1]
        return [implementation for implementation in found if implementation.supports(call)] + [default]


ALL_ELMO_IMPLEMENTATIONS = ElmoImplementations()
ALL_ELMO_IMPLEMENTATIONS.register("eager", ELMO_EAGER)
ALL_ELMO_IMPLEMENTATIONS.register("eager_tf32", ElmoEagerImplementation(allow_tf32=True))
ALL_ELMO_IMPLEMENTATIONS.register("reference", ElmoReferenceImplementation())


def needs_grad(inputs: torch.Tensor, parameters: Iterable[torch.Tensor]) -> bool:
    """Whether a call on `inputs` with `parameters` needs a gradient: autograd on and one of them requiring it."""
    return torch.is_grad_enabled() and (inputs.requires_grad or any(p.requires_grad for p in parameters))


class ElmoDispatch:
    """
    The implementations of one forward call, resolved once per part (on the part's first call, from its inputs) from
    the model's choice `choice`, with `default` (the reference) last, then passed down to every block of that part.
    (Once per part and need of gradients: reentrant gradient checkpointing runs a layer without, then again with.)
    Under `torch.compile` (not an export) the reference computes: dynamo traces it, and no guard depends on the
    registry's contents.
    """

    def __init__(self, choice: str | None, default: ElmoImplementation) -> None:
        self.choice, self.default = choice, default
        self._candidates: dict[tuple[str, bool], list[ElmoImplementation]] = {}

    def candidates(
        self, part: str, inputs: torch.Tensor, weight: torch.Tensor, grad: bool
    ) -> list[ElmoImplementation]:
        """The implementations that support `part` on `inputs` with weights like `weight` (`grad`: a gradient is
        needed), best first, the reference last; resolved on the part's first call, the same after."""
        resolved = self._candidates.get((part, grad))
        if resolved is None:
            resolved = self._candidates[part, grad] = self._resolve(part, inputs, weight, grad)
        return resolved

    def _resolve(self, part: str, inputs: torch.Tensor, weight: torch.Tensor, grad: bool) -> list[ElmoImplementation]:
        exporting = is_exporting()
        if torch.compiler.is_compiling() and not exporting:
            return [self.default]
        call = ElmoCall(part, inputs.device, inputs.dtype, weight.dtype, grad, exporting, self.choice)
        return ALL_ELMO_IMPLEMENTATIONS.candidates(call, self.default)

    def embeds_unique_words(self, device: torch.device) -> bool:
        """Whether the character CNN runs once per distinct word on `device`: as the model's choice says, or the first
        default for that device type."""
        chosen = ALL_ELMO_IMPLEMENTATIONS.get_interface(self.choice, self.default, device.type)[0]
        return getattr(chosen, "embeds_unique_words", True)

    def lstm_layer(
        self, weights: LstmWeights, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        """One biLM layer's call by the first candidate that computes it (`ImplementationUnavailable` hands it on)."""
        grad = needs_grad(inputs, (weights.weight_ih, weights.weight_hh, weights.bias, weights.weight_proj))
        candidates = self.candidates("lstm", inputs, weights.weight_hh, grad)
        return first_available(candidates, "lstm_layer", weights, inputs, batch_sizes, initial_state)

    def char_cnn_products(
        self, chars: torch.Tensor, weight: torch.Tensor, parameters: Iterable[torch.Tensor]
    ) -> "CharCnnProducts":
        """The products of one character-CNN call on `chars` (num_words, num_chars, char_embedding_dim) with weights
        like `weight`, `parameters` all the CNN's (whether a gradient is needed)."""
        return CharCnnProducts(self.candidates("char_cnn", chars, weight, needs_grad(chars, parameters)))


def first_available(candidates: list[ElmoImplementation], method: str, *args: object) -> object:
    """`method(*args)` of the first of `candidates` that computes it: `ImplementationUnavailable` hands the call to
    the next; the last (the reference) always computes it."""
    for implementation in candidates[:-1]:
        with contextlib.suppress(ImplementationUnavailable):
            return getattr(implementation, method)(*args)
    return getattr(candidates[-1], method)(*args)


@dataclass(frozen=True)
class CharCnnProducts:
    """The character CNN's products of one call, each by the first of `candidates` that computes it (best first,
    the reference last; see `ElmoImplementation`)."""

    candidates: list[ElmoImplementation]

    def linear(self, inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """(..., in_features) -> (..., out_features): `inputs @ weight.T + bias`."""
        return first_available(self.candidates, "linear", inputs, weight, bias)

    def max_pooled_convolution(self, chars: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """(num_words, num_chars, char_dim) -> (num_words, filters): the convolution of `weight` (filters, char_dim,
        width) and `bias` max-pooled over positions."""
        return first_available(self.candidates, "max_pooled_convolution", chars, weight, bias)


def resolve_implementation(
    name: str | None, module: torch.nn.Module, inputs: torch.Tensor, default: ElmoImplementation
) -> ElmoImplementation:
    """The implementation that computes a call of `module` (a block of the model naming its part in `elmo_part`) on
    `inputs` for the model's choice `name`: `ElmoDispatch` for that one call."""
    weight = next(module.parameters())
    grad = needs_grad(inputs, module.parameters())
    return ElmoDispatch(name, default).candidates(module.elmo_part, inputs, weight, grad)[0]
