"""The memory a pretraining run needs, estimated before anything is allocated, so that sizes that cannot fit (a huge
batch, LSTM or softmax) are refused with one line saying how much they need, instead of dying in the allocator.

The estimate counts what a training step must hold at once, in float32: the weights, their gradients and AdamW's two
moments (16 bytes per parameter, counted exactly on a `meta`-device model), and the activations the backward pass
keeps, per position and direction (character embeddings and convolutions, highway layers, the LSTM gates and states
of every layer, the softmax logits). It leaves out what the framework adds on top, so it is a lower bound.
"""

import os

import torch

from ..configuration_elmo import ElmoConfig

GIB = 1 << 30
BYTES_PER_PARAMETER = 4 * 4  # float32 weight, gradient, and AdamW's two moments


class MemoryNeedError(ValueError):
    """A run whose sizes need more memory than the machine has."""


def count_parameters(config: ElmoConfig) -> int:
    """The parameters of `ElmoForPreTraining(config)`, counted without allocating them."""
    from ..modeling_elmo import ElmoForPreTraining

    with torch.device("meta"):
        return sum(parameter.numel() for parameter in ElmoForPreTraining(config).parameters())


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


def available_bytes(device: torch.device) -> int | None:
    """Memory free for a run on `device` (`MemAvailable` of the host for the CPU); None where unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def check_training_memory(config: ElmoConfig, rows: int, unroll_steps: int, device: torch.device) -> None:
    """Raise `MemoryNeedError` when a run of `config` at `rows` x `unroll_steps` positions per batch needs more
    memory than `device` has free, naming the figures and the flags that set them."""
    parameters = count_parameters(config)
    weights = parameters * BYTES_PER_PARAMETER
    activations = activation_bytes(config, rows, unroll_steps)
    available = available_bytes(device)
    if available is None or weights + activations <= available:
        return
    raise MemoryNeedError(
        f"this run needs at least {(weights + activations) / GIB:,.1f} GiB of memory, more than the "
        f"{available / GIB:,.1f} GiB free on {device.type}: {weights / GIB:,.1f} GiB for {parameters:,} parameters "
        f"(weights, gradients, AdamW moments; set by options.json's char_cnn and lstm and the vocabulary) and "
        f"{activations / GIB:,.1f} GiB of activations for {rows:,} rows x {unroll_steps:,} steps "
        "(--per_device_train_batch_size, --unroll_steps, --n_negative_samples_batch). Lower them."
    )
