"""
The CPU inference products of the character CNN: what computes the convolutions and the linear maps of the model's
character CNN when no gradient is needed, in float32 on x86 CPUs, in place of PyTorch's convolution and `nn.Linear`.
It serves the CPU implementations (`cpu_implementation`); the model's blocks keep the math (max-pooling, activation,
highway gates) and take their products from the implementation chosen for the call.

Public interface: `CharCnnEngine`, with `applies(dtype, weight_dtype)`, whether it computes the products of a call,
and the two products of an implementation (`elmo_implementations.ElmoImplementation`): `linear(inputs, weight, bias)`
and `max_pooled_convolution(chars, weight, bias)`, on the weights of the model's linear maps and convolutions. Each
product is one oneDNN product (`cpu_linear.onednn_affine`), the convolution one over the unfolded windows of
characters: faster than PyTorch's convolution on the character CNN's shapes, and the same bits at every thread count.
"""

import torch

from .cpu_linear import onednn_affine, onednn_applies


class CharCnnEngine:
    """The character CNN's products through oneDNN, for inference (no state: one object serves any encoder)."""

    @staticmethod
    def applies(dtype: torch.dtype, weight_dtype: torch.dtype) -> bool:
        """Whether the engine computes the products of a call on a CPU with inputs of `dtype` and weights of
        `weight_dtype`: float32 where oneDNN works (`cpu_linear.onednn_applies`)."""
        return dtype == weight_dtype and onednn_applies(torch.device("cpu"), dtype)

    @staticmethod
    def linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """`inputs @ weight.T + bias`: (..., in_features) -> (..., out_features), weight (out_features,
        in_features)."""
        return onednn_affine(inputs, weight, bias)

    @staticmethod
    def max_pooled_convolution(chars: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The convolution of `weight` (num_filters, char_embedding_dim, width) and `bias` (num_filters,) over `chars`
        (num_words, num_chars, char_embedding_dim), max-pooled over positions: (num_words, num_filters). Each window
        of characters is one row of the product."""
        windows = chars.unfold(1, weight.shape[-1], 1).flatten(2)  # (num_words, positions, char_dim * width)
        return onednn_affine(windows, weight.flatten(1), bias).amax(dim=1)
