"""The differences between Transformers 4.x (from 4.52) and 5.x that the ELMo classes meet, in one place: each name
here is Transformers' own under 5.x and a stand-in with the same behaviour under 4.x. Part of the remote code (imports
only torch and transformers), so a saved folder loads under either major.

- `PreTrainedConfig`: 5.x turns every config subclass into a keyword-only dataclass whose extra keywords go to
  `__post_init__`, and validates it before saving; 4.x's `PretrainedConfig` has an `__init__(**kwargs)`. The 4.x
  stand-in does what 5.x does.
- `PreTrainedModel`: 5.x's `_init_weights` initialises Linear, convolution, LSTM, embedding and norm modules; 4.x's
  does nothing (a head missing from a checkpoint would keep uninitialised memory). `from_pretrained(dtype=...)` is
  `torch_dtype=...` before 4.56; `save_pretrained(save_original_format=...)` is 5.x's; 5.x renamed gradient
  checkpointing `activation_checkpointing_*`; 4.x saves no code with a remote-code model loaded where the package
  is installed. The 4.x stand-in adds 5.x's rules, keywords and names, and saves the code.
- `init`: 5.x's `transformers.initialization` (functions that skip tensors already loaded); 4.x: the same functions
  over PyTorch's in-place ops.
- `PythonBackend`: 5.x's base of Python tokenizers, whose `__call__` sends single examples and batches, text pairs
  included, to one `_encode_plus`; 4.x's `PreTrainedTokenizer` splits them into `_encode_plus` and
  `_batch_encode_plus`. The 4.x stand-in routes both to `_encode_plus` as 5.x does.
- `strict`: huggingface_hub's `@strict` (the config's type checks) reads `X | None` from 1.0 on only (4.x pins the hub
  below 1.0): fields are given as `typing.Union`, which every version reads.
- `register_tokenizer`: `AutoTokenizer.register(config, tokenizer_class=...)` (5.x) is `slow_tokenizer_class=...` in
  4.x.
"""

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import transformers
from torch import nn

MINIMUM_VERSION = (4, 52)
VERSION = tuple(int(part) for part in transformers.__version__.split(".")[:2])
IS_TRANSFORMERS_5 = VERSION >= (5, 0)

if VERSION < MINIMUM_VERSION:
    raise RuntimeError(
        f"ELMo needs transformers>=4.52 (this environment has {transformers.__version__}): "
        "pip install -U 'transformers>=4.52'"
    )

# after the version check, which names the version to install where older releases lack these modules
import huggingface_hub.dataclasses  # noqa: E402
from huggingface_hub.errors import StrictDataclassClassValidationError  # noqa: E402


def strict(cls: type) -> type:
    """huggingface_hub's `@strict` on dataclass `cls`, its `X | Y` field types given as `typing.Union[X, Y]`."""
    for field in dataclasses.fields(cls):
        if isinstance(field.type, types.UnionType):
            field.type = typing.Union[field.type.__args__]  # noqa: UP007 (what huggingface_hub < 1.0 reads)
    return huggingface_hub.dataclasses.strict(cls)


def register_tokenizer(config_class: type, tokenizer_class: type) -> None:
    """`AutoTokenizer.register` for a Python tokenizer (4.x calls it a slow tokenizer)."""
    keyword = "tokenizer_class" if IS_TRANSFORMERS_5 else "slow_tokenizer_class"
    transformers.AutoTokenizer.register(config_class, **{keyword: tokenizer_class})


if IS_TRANSFORMERS_5:
    from transformers import PreTrainedConfig, PreTrainedModel
    from transformers import initialization as init
    from transformers.tokenization_python import PythonBackend
else:
    from transformers import PretrainedConfig as _PretrainedConfig
    from transformers import PreTrainedModel as _PreTrainedModel
    from transformers.tokenization_utils import PreTrainedTokenizer as _PreTrainedTokenizer

    class PreTrainedConfig(_PretrainedConfig):
        """5.x's config protocol on 4.x: each subclass is a keyword-only dataclass of its annotated fields;
        keywords that are not fields go to `__post_init__(**kwargs)`, whose base version hands them to 4.x's
        `PretrainedConfig.__init__` (which sets the common fields: labels, token ids, `auto_map`, ...)."""

        def __init_subclass__(cls, **kwargs: Any):
            super().__init_subclass__(**kwargs)
            dataclasses.dataclass(cls, repr=False, eq=False, kw_only=True)
            cls.__init__ = _accept_extra_kwargs(cls)

        def __post_init__(self, **kwargs: Any) -> None:
            fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
            # 4.x's __init__ resets some fields of its own (e.g. `pad_token_id`) unless given: give them all
            _PretrainedConfig.__init__(self, **{**kwargs, **fields})

        def save_pretrained(self, save_directory: Any, push_to_hub: bool = False, **kwargs: Any) -> None:
            """As 5.x: run the `@strict` class validators first, so that an invalid config is never written."""
            if hasattr(self, "validate"):
                self.validate()
            super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)

    def _accept_extra_kwargs(cls: type) -> Callable[..., None]:
        """An `__init__` for dataclass `cls` that takes keywords only, sets the fields (or their defaults) and passes
        the other keywords to `__post_init__`, as 5.x's `wrap_init_to_accept_kwargs`."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if args:
                raise ValueError(f"{cls.__name__} accepts only keyword arguments, got {len(args)} positional.")
            fields = dataclasses.fields(cls)
            for field in fields:
                if field.name in kwargs:
                    setattr(self, field.name, kwargs.pop(field.name))
                elif field.default is not dataclasses.MISSING:
                    setattr(self, field.name, field.default)
                else:
                    setattr(self, field.name, field.default_factory())
            self.__post_init__(**kwargs)

        return functools.wraps(cls.__init__)(__init__)

    def _skipping_loaded(function: Callable[..., Any]) -> Callable[..., torch.Tensor]:
        """`function(tensor, ...)` without gradients, unless the tensor is marked as loaded (as 5.x's `init`)."""

        def apply(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if getattr(tensor, "_is_hf_initialized", False):
                return tensor
            with torch.no_grad():
                function(tensor, *args, **kwargs)
            return tensor

        return apply

    def _xavier_uniform(tensor: torch.Tensor) -> None:
        fan_out, fan_in = tensor.shape[0], tensor[0].numel()
        bound = (6.0 / (fan_in + fan_out)) ** 0.5
        tensor.uniform_(-bound, bound)

    init = SimpleNamespace(
        zeros_=_skipping_loaded(torch.Tensor.zero_),
        ones_=_skipping_loaded(lambda tensor: tensor.fill_(1.0)),
        constant_=_skipping_loaded(torch.Tensor.fill_),
        copy_=_skipping_loaded(torch.Tensor.copy_),
        normal_=_skipping_loaded(torch.Tensor.normal_),
        uniform_=_skipping_loaded(torch.Tensor.uniform_),
        xavier_uniform_=_skipping_loaded(_xavier_uniform),
    )

    class PreTrainedModel(_PreTrainedModel):
        """4.x's `PreTrainedModel` with 5.x's default `_init_weights` for the module types ELMo uses, and 5.x's
        keywords and names: `from_pretrained(dtype=...)` (`torch_dtype` before 4.56), `save_pretrained(
        save_original_format=False)` (4.x always saves the names the model has), `activation_checkpointing_*`
        (4.x: `gradient_checkpointing_*`)."""

        @classmethod
        def from_pretrained(cls, *args: Any, **kwargs: Any) -> "PreTrainedModel":
            if VERSION < (4, 56) and "dtype" in kwargs:
                kwargs["torch_dtype"] = kwargs.pop("dtype")
            return super().from_pretrained(*args, **kwargs)

        def save_pretrained(self, *args: Any, save_original_format: bool = False, **kwargs: Any) -> None:
            if save_original_format:
                raise ValueError("save_pretrained(save_original_format=True) needs transformers>=5.0")
            cls = type(self)
            if cls._auto_class is None and cls.__module__.startswith("transformers_modules."):
                # remote code loaded where a class of the same model type is registered: 4.x leaves it unregistered
                # for saving, so its code would not be saved with it (5.x registers it)
                auto_map = getattr(self.config, "auto_map", None) or {}
                auto_class = next(
                    (key for key, ref in auto_map.items() if ref == f"modeling_elmo.{cls.__name__}"), None
                )
                if auto_class is not None:
                    cls.register_for_auto_class(auto_class)
            super().save_pretrained(*args, **kwargs)

        def activation_checkpointing_enable(self, activation_checkpointing_kwargs: dict | None = None) -> None:
            self.gradient_checkpointing_enable(gradient_checkpointing_kwargs=activation_checkpointing_kwargs)

        def activation_checkpointing_disable(self) -> None:
            self.gradient_checkpointing_disable()

        @property
        def is_activation_checkpointing(self) -> bool:
            return self.is_gradient_checkpointing

        def _init_weights(self, module: nn.Module) -> None:
            std = getattr(self.config, "initializer_range", None) or 0.02
            if isinstance(module, (nn.Linear, nn.Conv1d)):
                init.normal_(module.weight, mean=0.0, std=std)
                if module.bias is not None:
                    init.zeros_(module.bias)
            elif isinstance(module, nn.LSTM):
                for name, parameter in module.named_parameters():
                    if "weight" in name:
                        init.xavier_uniform_(parameter)
                    elif "bias" in name:
                        init.zeros_(parameter)
            elif isinstance(module, nn.Embedding):
                init.normal_(module.weight, mean=0.0, std=std)
                if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                    init.zeros_(module.weight[module.padding_idx])
            elif isinstance(module, nn.LayerNorm):
                if module.weight is not None:
                    init.ones_(module.weight)
                if module.bias is not None:
                    init.zeros_(module.bias)

    class PythonBackend(_PreTrainedTokenizer):
        """4.x's `PreTrainedTokenizer` with 5.x's entry point: `__call__`, `encode`, `encode_plus` and
        `batch_encode_plus` all reach `_encode_plus(text, text_pair, ...)`, which takes one example or a batch."""

        def __init__(self, token_type_ids_pattern: str | None = None, **kwargs: Any):
            super().__init__(**kwargs)  # `token_type_ids_pattern` (5.x) is not saved: the subclass builds the ids

        def _call_one(
            self,
            text: Any,
            text_pair: Any = None,
            padding: Any = False,
            truncation: Any = None,
            max_length: int | None = None,
            verbose: bool = True,
            **kwargs: Any,
        ) -> Any:
            pad_to_multiple_of = kwargs.pop("pad_to_multiple_of", None)
            padding_strategy, truncation_strategy, max_length, kwargs = self._get_padding_truncation_strategies(
                padding=padding,
                truncation=truncation,
                max_length=max_length,
                pad_to_multiple_of=pad_to_multiple_of,
                verbose=verbose,
                **kwargs,
            )
            return self._encode_plus(
                text,
                text_pair,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_strategy=padding_strategy,
                truncation_strategy=truncation_strategy,
                max_length=max_length,
                verbose=verbose,
                **kwargs,
            )

        def _batch_encode_plus(self, batch_text_or_text_pairs: list, is_split_into_words: bool = False, **kwargs):
            """4.x's `batch_encode_plus`: a list of texts, of pre-split texts, or of `(text, text_pair)` tuples."""
            texts, pairs = [], []
            for example in batch_text_or_text_pairs:
                is_pair = isinstance(example, (list, tuple)) and not (
                    is_split_into_words and not isinstance(example[0], (list, tuple))
                )
                texts.append(example[0] if is_pair else example)
                pairs.append(example[1] if is_pair else None)
            if any(pair is None for pair in pairs) and any(pair is not None for pair in pairs):
                raise ValueError("batch_encode_plus: give either texts or (text, text_pair) tuples, not both.")
            text_pair = None if pairs and pairs[0] is None else pairs
            return self._encode_plus(texts, text_pair, is_split_into_words=is_split_into_words, **kwargs)


__all__ = [
    "IS_TRANSFORMERS_5",
    "StrictDataclassClassValidationError",
    "PreTrainedConfig",
    "PreTrainedModel",
    "PythonBackend",
    "init",
    "register_tokenizer",
    "strict",
]
