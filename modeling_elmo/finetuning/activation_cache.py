"""Opt-in cache of frozen-biLM activations per sentence, so that epochs after the first skip the biLM entirely.

Keys. A sentence's entry is keyed by the SHA-256 of its exact model input (the character ids of its words, shape
included), so any tokenizer difference (word splitting, `max_characters_per_token`, ...) gives different ids and
therefore a different key: a stale entry can only be reused for bit-identical inputs. The whole cache belongs to one
model fingerprint: SHA-256 of the biLM config and of every biLM weight. Entries on disk live in
`directory/<fingerprint>.safetensors`, so another model never reads them, and an in-memory cache refuses a model
whose fingerprint differs from the one it was built for.
"""

import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..configuration_elmo import BILM_FIELDS
from ..foundation.output_folder import path_replaced_atomically


def bilm_fingerprint(model) -> str:
    """SHA-256 over the config fields that define the biLM (`BILM_FIELDS`) and its weights (`model` has an `elmo`
    [`ElmoModel`])."""
    digest = hashlib.sha256()
    fields = {name: getattr(model.config, name) for name in BILM_FIELDS}
    digest.update(json.dumps(fields, sort_keys=True).encode())
    for name, tensor in sorted(model.elmo.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def sentence_key(char_ids: torch.Tensor) -> str:
    """SHA-256 of one sentence's character ids (num_words, max_characters_per_token)."""
    data = char_ids.detach().to(device="cpu", dtype=torch.int32).contiguous()
    return hashlib.sha256(repr(tuple(data.shape)).encode() + data.numpy().tobytes()).hexdigest()


class ElmoActivationCache:
    """
    In-memory per-sentence cache of all biLM layers for one frozen model, optionally persisted to `directory`.

    Usage: `cache = ElmoActivationCache(model, directory); model.activation_cache = cache` (or `cache.attach()`);
    train; `cache.save()`. Entries are (num_layers, num_words, 2 * projection_dim) float tensors on the CPU.
    """

    def __init__(self, model, directory: str | os.PathLike | None = None):
        if not model.config.freeze_elmo:
            raise ValueError("The activation cache needs a frozen biLM (config.freeze_elmo=True).")
        if model.config.stateful:
            raise ValueError("The activation cache cannot be used with a stateful biLM (config.stateful=True).")
        self.model = model
        self.fingerprint = bilm_fingerprint(model)
        self.directory = Path(directory) if directory is not None else None
        self.entries: dict[str, torch.Tensor] = {}
        self.hits = 0
        self.misses = 0
        if self.path is not None and self.path.exists():
            self.entries = load_file(self.path)

    @property
    def path(self) -> Path | None:
        """Where this model's entries are saved: `directory/<fingerprint>.safetensors`."""
        return self.directory / f"{self.fingerprint}.safetensors" if self.directory is not None else None

    def attach(self) -> "ElmoActivationCache":
        """Make the model use this cache."""
        self.model.activation_cache = self
        return self

    def save(self) -> Path:
        """Write the entries (atomically) to `path`."""
        if self.path is None:
            raise ValueError("This cache has no directory to save to.")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with path_replaced_atomically(self.path, OSError) as temporary:
            save_file(self.entries, temporary)
        return self.path

    def layers(self, model, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """
        All biLM layers for a batch, like `model.elmo_layers`: `num_layers` tensors (batch, words, 2 * projection_dim),
        zero at padding. Only sentences not seen before run through the biLM.
        """
        if model is not self.model or not model.config.freeze_elmo:
            raise ValueError("This activation cache belongs to another (or no longer frozen) model.")
        mask = attention_mask.bool()
        keys = [sentence_key(input_ids[row, mask[row]]) for row in range(input_ids.shape[0])]
        missing = [row for row, key in enumerate(keys) if key not in self.entries]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            rows = torch.tensor(missing, device=input_ids.device)
            computed = torch.stack(model.elmo_layers(input_ids[rows], attention_mask[rows]))  # (L, n, W, D)
            for position, row in enumerate(missing):
                self.entries[keys[row]] = computed[:, position, mask[row]].to("cpu").contiguous()
        first = self.entries[keys[0]]
        batch = first.new_zeros(first.shape[0], input_ids.shape[0], input_ids.shape[1], first.shape[-1])
        for row, key in enumerate(keys):
            batch[:, row, mask[row]] = self.entries[key]
        return tuple(batch.to(input_ids.device).unbind(0))


__all__ = ["ElmoActivationCache", "bilm_fingerprint", "sentence_key"]
