"""AllenNLP's `ScalarMix`: the model's `ElmoScalarMix` with AllenNLP's signature, checks, epsilon (1e-13) and
parameter names (`scalar_parameters.k`, `gamma`), so a mix trained with AllenNLP loads as it is. Layer norm uses the
mean and variance of all unmasked elements in the batch; the mix is not zeroed at masked positions."""

import torch
from torch import nn

from ..modeling_elmo import ElmoScalarMix
from .checkpoint import ConfigurationError

ALLENNLP_EPSILON = 1e-13


class ScalarMix(ElmoScalarMix):
    def __init__(
        self,
        mixture_size: int,
        do_layer_norm: bool = False,
        initial_scalar_parameters: list[float] | None = None,
        trainable: bool = True,
    ) -> None:
        if initial_scalar_parameters is None:
            initial_scalar_parameters = [0.0] * mixture_size
        elif len(initial_scalar_parameters) != mixture_size:
            raise ConfigurationError(
                f"scalar_mix_parameters has {len(initial_scalar_parameters)} values "
                f"({list(initial_scalar_parameters)}), but the biLM has {mixture_size} layers to mix."
            )
        nn.Module.__init__(self)  # AllenNLP's parameter layout instead of the model's, its computation unchanged
        self.mixture_size = mixture_size
        self.do_layer_norm = self.layer_norm = do_layer_norm
        self.norm_dims = None  # tensors of any shape (..., dim): every dimension reduced
        self.epsilon = ALLENNLP_EPSILON
        self.scalar_parameters = nn.ParameterList(
            nn.Parameter(torch.tensor([float(value)]), requires_grad=trainable) for value in initial_scalar_parameters
        )
        self.gamma = nn.Parameter(torch.tensor([1.0]), requires_grad=trainable)

    def layer_weights(self) -> torch.Tensor:
        return torch.softmax(torch.cat(list(self.scalar_parameters)), dim=0)

    def forward(self, tensors: list[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """`tensors`: `mixture_size` tensors of one shape (..., dim); `mask` (...), needed with layer norm."""
        if len(tensors) != self.mixture_size:
            raise ConfigurationError(f"{len(tensors)} tensors were passed to a ScalarMix of {self.mixture_size}.")
        if self.do_layer_norm and mask is None:
            raise ConfigurationError("ScalarMix with do_layer_norm=True needs the mask.")
        return self.mix(tensors, mask)
