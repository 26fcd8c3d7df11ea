"""AllenNLP's `nn.util` helpers for sentence boundaries: add `<S>`/`</S>` around each right-padded row, and remove
them again."""

from typing import Any

import torch


def add_sentence_boundary_token_ids(
    tensor: torch.Tensor, mask: torch.Tensor, sentence_begin_token: Any, sentence_end_token: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    `tensor` (batch, timesteps[, dim]) with `mask` (batch, timesteps) -> (batch, timesteps + 2[, dim]) with the begin
    token at 0 and the end token after each row's `mask.sum()` items, and the new mask (nonzero items).
    """
    lengths = mask.sum(dim=1).tolist()
    shape = list(tensor.shape)
    shape[1] += 2
    result = tensor.new_zeros(shape)
    result[:, 1:-1] = tensor
    if tensor.dim() == 2:
        result[:, 0] = sentence_begin_token
        for row, length in enumerate(lengths):
            result[row, length + 1] = sentence_end_token
        return result, result != 0
    if tensor.dim() == 3:
        for row, length in enumerate(lengths):
            result[row, 0] = sentence_begin_token
            result[row, length + 1] = sentence_end_token
        return result, (result > 0).sum(dim=-1) > 0
    raise ValueError(f"add_sentence_boundary_token_ids takes a 2D or 3D tensor, got shape {tuple(tensor.shape)}.")


def remove_sentence_boundaries(tensor: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """
    `tensor` (batch, timesteps, dim) whose rows are `<S> items </S>` then padding, `mask` (batch, timesteps) -> the
    items (batch, timesteps - 2, dim), zero after each row's items, and their mask (batch, timesteps - 2), bool.
    """
    if tensor.dim() != 3 or mask.shape != tensor.shape[:2]:
        raise ValueError(
            f"remove_sentence_boundaries takes a (batch, timesteps, dim) tensor and a (batch, timesteps) mask, got "
            f"{tuple(tensor.shape)} and {tuple(mask.shape)}."
        )
    items = mask.sum(dim=1, keepdim=True) - 2
    new_mask = torch.arange(tensor.shape[1] - 2, device=tensor.device) < items
    return torch.where(new_mask.unsqueeze(-1), tensor[:, 1:-1], 0.0), new_mask
