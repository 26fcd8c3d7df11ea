"""The memory a pretraining run needs, estimated before anything is allocated, so that sizes that cannot fit (a huge
batch, LSTM or softmax) are refused with one line saying how much they need, instead of dying in the allocator.

The estimate counts what a training step must hold at once, in float32: the weights, their gradients and AdamW's two
moments (16 bytes per parameter, counted exactly on a `meta`-device model), and the activations the backward pass
keeps, per position and direction (character embeddings and convolutions, highway layers, the LSTM gates and states
of every layer, the softmax logits). It leaves out what the framework adds on top, so it is a lower bound.
"""

import torch

from ..commands.memory import GIB, check_memory, training_bytes
from ..configuration_elmo import ElmoConfig


def activation_bytes(config: ElmoConfig, rows: int, unroll_steps: int) -> int:
    """Bytes of the activations one training batch (`rows` x `unroll_steps` positions, both directions) keeps for the
    backward pass (see the module docstring)."""
    filters = sum(number for _, number in config.char_filters)
    characters = config.max_characters_per_token
    char_cnn = characters * (config.char_embedding_dim + filters) + 3 * config.num_highway_layers * filters
    lstm = config.num_hidden_layers * (6 * config.lstm_cell_size + 2 * config.projection_dim)
    logits = config.lm_num_negative_samples + 1 if config.lm_num_negative_samples else config.lm_vocab_size
    per_position = 8 * characters + 4 * (char_cnn + lstm + logits + config.projection_dim)  # int64 ids, float32 rest
    return 2 * rows * unroll_steps * per_position


def check_training_memory(config: ElmoConfig, rows: int, unroll_steps: int, device: torch.device) -> None:
    """Raise `MemoryNeedError` when a run of `config` at `rows` x `unroll_steps` positions per batch needs more
    memory than `device` has free, naming the figures and the flags that set them."""
    from ..modeling_elmo import ElmoForPreTraining

    parameters, weights = training_bytes(lambda: ElmoForPreTraining(config))
    activations = activation_bytes(config, rows, unroll_steps)
    check_memory(
        weights + activations,
        device,
        f"{weights / GIB:,.1f} GiB for {parameters:,} parameters (weights, gradients, AdamW moments; set by "
        f"options.json's char_cnn and lstm and the vocabulary) and {activations / GIB:,.1f} GiB of activations for "
        f"{rows:,} rows x {unroll_steps:,} steps (--per_device_train_batch_size, --unroll_steps, "
        "--n_negative_samples_batch)",
    )
