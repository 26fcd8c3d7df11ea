"""AllenNLP's `ScalarMix`: `gamma * sum_k softmax(w)_k * tensor_k`, each tensor optionally normalised with the mean
and variance of all its unmasked elements in the batch. Its parameters keep AllenNLP's names (`scalar_parameters.k`,
`gamma`), so a mix trained with AllenNLP loads as it is."""

import torch
from torch import nn

from .checkpoint import ConfigurationError


class ScalarMix(nn.Module):
    def __init__(
        self,
        mixture_size: int,
        do_layer_norm: bool = False,
        initial_scalar_parameters: list[float] | None = None,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        if initial_scalar_parameters is None:
            initial_scalar_parameters = [0.0] * mixture_size
        elif len(initial_scalar_parameters) != mixture_size:
            raise ConfigurationError(
                f"scalar_mix_parameters has {len(initial_scalar_parameters)} values "
                f"({list(initial_scalar_parameters)}), but the biLM has {mixture_size} layers to mix."
            )
        self.mixture_size = mixture_size
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = nn.ParameterList(
            nn.Parameter(torch.tensor([float(value)]), requires_grad=trainable) for value in initial_scalar_parameters
        )
        self.gamma = nn.Parameter(torch.tensor([1.0]), requires_grad=trainable)

    def forward(self, tensors: list[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """`tensors`: `mixture_size` tensors of one shape (..., dim); `mask` (...), needed with layer norm."""
        if len(tensors) != self.mixture_size:
            raise ConfigurationError(f"{len(tensors)} tensors were passed to a ScalarMix of {self.mixture_size}.")
        weights = torch.softmax(torch.cat(list(self.scalar_parameters)), dim=0).split(1)
        if self.do_layer_norm:
            if mask is None:
                raise ConfigurationError("ScalarMix with do_layer_norm=True needs the mask.")
            tensors = [self._layer_norm(tensor, mask) for tensor in tensors]
        return self.gamma * sum(weight * tensor for weight, tensor in zip(weights, tensors, strict=True))

    @staticmethod
    def _layer_norm(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Normalise with the mean and variance of the unmasked elements (masked positions are normalised too)."""
        broadcast_mask = mask.unsqueeze(-1)
        count = mask.sum() * tensor.shape[-1]
        masked = tensor * broadcast_mask
        mean = masked.sum() / count
        variance = (((masked - mean) * broadcast_mask) ** 2).sum() / count
        return (tensor - mean) / torch.sqrt(variance + 1e-13)
