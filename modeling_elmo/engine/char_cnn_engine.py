"""
The CPU inference products of the character CNN: what computes the convolutions and the linear maps of the model's
character CNN when no gradient is needed, in float32 on x86 CPUs, in place of PyTorch's convolution and `nn.Linear`.
It serves the CPU implementations (`cpu_implementation`); the model's blocks keep the math (max-pooling, activation,
highway gates) and take their products from the implementation chosen for the call.

Public interface: `CharCnnEngine`, with `applies(dtype, weight_dtype)`, whether it computes the products of a call,
and the two products of an implementation (`elmo_implementations.ElmoImplementation`): `linear(module, inputs)` and
`max_pooled_convolution(conv, chars)`, PyTorch's `nn.Linear` and `nn.Conv1d` read for their weights. Each product is
one oneDNN product (`cpu_linear.onednn_affine`), the convolution one over the unfolded windows of characters: faster
than PyTorch's convolution on the character CNN's shapes, and the same bits at every thread count.
"""

import torch
from torch import nn

from .cpu_linear import onednn_affine, onednn_applies


class CharCnnEngine:
    """The character CNN's products through oneDNN, for inference (no state: one object serves any encoder)."""

    @staticmethod
    def applies(dtype: torch.dtype, weight_dtype: torch.dtype) -> bool:
        """Whether the engine computes the products of a call on a CPU with inputs of `dtype` and weights of
        `weight_dtype`: float32 where oneDNN works (`cpu_linear.onednn_applies`)."""
        return dtype == weight_dtype and onednn_applies(torch.device("cpu"), dtype)

    @staticmethod
    def linear(module: nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
        """`module(inputs)`: (..., in_features) -> (..., out_features)."""
        return onednn_affine(inputs, module.weight, module.bias)

    @staticmethod
    def max_pooled_convolution(conv: nn.Conv1d, chars: torch.Tensor) -> torch.Tensor:
        """`conv` over `chars` (num_words, num_chars, char_embedding_dim), max-pooled over positions: (num_words,
        num_filters). Each window of characters is one row of the product."""
        windows = chars.unfold(1, conv.kernel_size[0], 1).flatten(2)  # (num_words, positions, char_dim * width)
        return onednn_affine(windows, conv.weight.flatten(1), conv.bias).amax(dim=1)
