"""Pieces shared by the fine-tuning commands (`elmo-train-ner`, `elmo-train-classifier`): the wall-clock budget,
the activation-cache wiring, and a `Trainer` that keeps the ELMo model card the command wrote."""

import time
from pathlib import Path

from transformers import AutoConfig, Trainer, TrainerCallback

from ..commands.memory import check_memory, training_bytes
from .activation_cache import ElmoActivationCache


class TimeBudgetCallback(TrainerCallback):
    """Stops training after a wall-clock budget, checked after every step."""

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.start = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start > self.seconds:
            control.should_training_stop = True
            control.should_evaluate = True
            control.should_save = True
        return control


def check_model_memory(auto_class, model_name_or_path: str, overrides: dict, device) -> None:
    """Refuse, before anything is allocated, a head whose sizes (`overrides`: `--tagger_hidden_size`, ...) need more
    memory than `device` has free for training (`commands.memory`)."""
    config = AutoConfig.from_pretrained(model_name_or_path, **overrides)
    parameters, needed = training_bytes(lambda: auto_class.from_config(config))
    check_memory(
        needed,
        device,
        f"{parameters:,} parameters with their gradients and AdamW moments (the head's sizes: --classifier_head, "
        "--tagger_hidden_size, --tagger_num_layers)",
    )


def attach_activation_cache(model, enabled: bool, directory: str | None) -> ElmoActivationCache | None:
    """An activation cache attached to `model` when `enabled` or a `directory` is given (the directory is created
    now, so that a bad path fails before training); else None. Raises `ValueError` for an unfrozen biLM."""
    if not (enabled or directory):
        return None
    cache = ElmoActivationCache(model, directory).attach()
    if cache.directory is not None:
        cache.directory.mkdir(parents=True, exist_ok=True)
    return cache


class ElmoCardTrainer(Trainer):
    """`Trainer` whose `push_to_hub` keeps the ELMo card written by the command (scores, learned scalar-mix
    weights) instead of replacing it with the generic auto-generated one."""

    def create_model_card(self, **kwargs) -> None:
        if not (Path(self.args.output_dir) / "README.md").is_file():
            super().create_model_card(**kwargs)


__all__ = [
    "ElmoCardTrainer",
    "TimeBudgetCallback",
    "attach_activation_cache",
    "check_model_memory",
]
