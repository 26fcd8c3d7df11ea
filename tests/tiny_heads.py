"""What the tests of the two fine-tuning heads (`ElmoForSequenceClassification`, `ElmoForTokenClassification`)
share: a tiny config with their labels, a save and load, and the checks of the base biLM, the scalar mix's L2 penalty
and the activation cache."""

from pathlib import Path

import torch

from modeling_elmo import ElmoConfig, ElmoModel
from modeling_elmo.finetuning.activation_cache import ElmoActivationCache


def tiny_head_config(labels: list[str], **overrides) -> ElmoConfig:
    """A biLM of a few hundred weights (2 layers of 16 cells, 8 projected) with a small head over `labels`."""
    values = {
        "char_filters": [[1, 8], [2, 8], [3, 8]],
        "char_embedding_dim": 4,
        "num_highway_layers": 1,
        "lstm_cell_size": 16,
        "projection_dim": 8,
        "tagger_hidden_size": 6,
        "id2label": dict(enumerate(labels)),
        "label2id": {label: index for index, label in enumerate(labels)},
    }
    return ElmoConfig(**{**values, **overrides})


def assert_l2_penalty_added_in_training(model, inputs: dict[str, torch.Tensor]) -> None:
    """`model` (built with `scalar_mix_l2_coef=0.5`, in eval mode) adds 0.5 * the squared norm of its mix's weights
    (1, 2, -1: 6) to the loss in training only."""
    with torch.no_grad():
        model.scalar_mix.scalar_parameters.copy_(torch.tensor([1.0, 2.0, -1.0]))
    plain = model(**inputs).loss
    model.train()
    torch.testing.assert_close(model(**inputs).loss, plain + 0.5 * 6.0)


def assert_cache_skips_the_bilm(model, inputs: dict[str, torch.Tensor], cache: ElmoActivationCache) -> None:
    """`cache` (of `model`, not attached yet) attached: the first call of `inputs` (3 sentences) fills it, the second
    skips the biLM; both give the logits and loss of `model` without a cache."""
    expected = model(**inputs)
    cache.attach()
    first = model(**inputs)
    calls = []
    model.elmo.register_forward_hook(lambda *args: calls.append(1))
    second = model(**inputs)
    assert calls == [] and cache.hits == 3 and cache.misses == 3
    for output in (first, second):
        torch.testing.assert_close(output.logits, expected.logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(output.loss, expected.loss, atol=1e-5, rtol=1e-5)


def assert_bilm_is_the_frozen_base(model, base_folder: Path) -> None:
    """`model`'s biLM holds the weights of the `ElmoModel` saved in `base_folder`, frozen."""
    base = ElmoModel.from_pretrained(base_folder)
    loaded = model.elmo.state_dict()
    assert all(torch.equal(tensor, loaded[name]) for name, tensor in base.state_dict().items())
    assert not any(p.requires_grad for p in model.elmo.parameters())


def reloaded(model, folder: Path, auto_class):
    """`model`, its weights moved off their initial values (a weight left at its initial value shows), saved into
    `folder` and loaded back by `auto_class` (an Auto class): the same class, with the same labels."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(folder)
    loaded = auto_class.from_pretrained(folder)
    assert type(loaded) is type(model) and loaded.config.id2label == model.config.id2label
    return loaded
