"""The activation cache's fingerprint: every config field that defines the biLM (`BILM_FIELDS`, one list for every
cache and fingerprint) is part of it, so changing any of them misses the cache instead of reusing stale activations."""

import os
from pathlib import Path

import pytest
import torch

from modeling_elmo import ElmoConfig, ElmoForTokenClassification, ElmoTokenizer
from modeling_elmo.configuration_elmo import BILM_ARCHITECTURE_FIELDS, BILM_FIELDS, FIELD_RULES
from modeling_elmo.finetuning.activation_cache import ElmoActivationCache, bilm_fingerprint

# A valid value other than the tiny model's for each biLM-defining field.
CHANGED_BILM_FIELDS = {
    "char_vocab_size": 300,
    "max_characters_per_token": 49,
    "char_embedding_dim": 5,
    "char_filters": [[1, 8], [2, 8], [4, 8]],
    "num_highway_layers": 2,
    "char_activation": "tanh",
    "lstm_cell_size": 17,
    "projection_dim": 9,
    "num_hidden_layers": 3,
    "cell_clip": 2.0,
    "proj_clip": 2.0,
    "use_skip_connections": False,
    "lstm_forget_bias": 0.5,
    "char_input": "lexicon",
    "char_padding_id": 5,
    "bos_char_ids": [3, 4, 5],
    "eos_char_ids": [3, 6, 5],
    "word_vocab_size": 40,
    "word_embedding_dim": 7,
    "bos_word_id": 2,
    "eos_word_id": 3,
}
# Every other ElmoConfig field belongs to a head, the language model or initialisation: none changes the biLM's layers.
OTHER_FIELDS = {
    "stateful",  # where the LSTM states of a call come from; a stateful biLM gets no cache at all
    "num_output_representations",
    "scalar_mix_layer_norm",
    "scalar_mix_layer_norm_scope",
    "initializer_range",
    "pad_token_id",
    "classifier_head",
    "tagger_hidden_size",
    "tagger_num_layers",
    "classifier_dropout",
    "classifier_pooling",
    "classifier_sentence_pairs",
    "classifier_batch_norm",
    "classifier_concat_layers",
    "use_crf",
    "freeze_elmo",
    "scalar_mix_l2_coef",
    "lm_vocab_size",
    "lm_dropout",
    "lm_num_negative_samples",
}


def tiny_tagger() -> ElmoForTokenClassification:
    torch.manual_seed(0)
    config = ElmoConfig(
        char_filters=[[1, 8], [2, 8], [3, 8]],
        char_embedding_dim=4,
        num_highway_layers=1,
        lstm_cell_size=16,
        projection_dim=8,
        num_labels=3,
    )
    return ElmoForTokenClassification(config).eval()


def test_every_config_field_is_classified_as_defining_the_biLM_or_not():
    assert set(BILM_ARCHITECTURE_FIELDS) <= set(BILM_FIELDS)
    assert len(set(BILM_FIELDS)) == len(BILM_FIELDS)
    assert set(CHANGED_BILM_FIELDS) == set(BILM_FIELDS)
    assert set(FIELD_RULES) == set(BILM_FIELDS) | OTHER_FIELDS
    assert not set(BILM_FIELDS) & OTHER_FIELDS


@pytest.mark.parametrize("field", BILM_FIELDS)
def test_changing_a_biLM_field_misses_the_cache(tmp_path, field):
    model = tiny_tagger()
    inputs = ElmoTokenizer()([["A", "tiny", "sentence"], ["Two"]], is_split_into_words=True, padding=True)
    inputs = inputs.convert_to_tensors("pt")
    cache = ElmoActivationCache(model, tmp_path).attach()
    model(**inputs)
    cache.save()
    assert ElmoActivationCache(model, tmp_path).entries.keys() == cache.entries.keys()  # same model: a hit

    fingerprint = bilm_fingerprint(model)
    assert getattr(model.config, field) != CHANGED_BILM_FIELDS[field]
    setattr(model.config, field, CHANGED_BILM_FIELDS[field])  # same weights, another biLM
    assert bilm_fingerprint(model) != fingerprint
    assert ElmoActivationCache(model, tmp_path).entries == {}


def test_a_stateful_biLM_gets_no_cache(tmp_path):
    """A stateful biLM's outputs depend on earlier batches: no cache at all."""
    model = tiny_tagger()
    model.config.stateful = True
    with pytest.raises(ValueError, match="stateful"):
        ElmoActivationCache(model, tmp_path)


@pytest.mark.parametrize("field", sorted(OTHER_FIELDS - {"freeze_elmo", "pad_token_id"}))
def test_head_fields_keep_the_fingerprint(field):
    model = tiny_tagger()
    fingerprint = bilm_fingerprint(model)
    rule = FIELD_RULES[field]
    for candidate in (True, False, 0.25, 2, 7, "bilstm", "batch", "max"):
        if candidate != getattr(model.config, field) and rule.problem(candidate, nullable=rule.nullable) is None:
            setattr(model.config, field, candidate)
            break
    else:
        pytest.fail(f"no other valid value tried for {field}")
    assert bilm_fingerprint(model) == fingerprint


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_save_is_atomic_and_gets_the_umasks_permissions(tmp_path, monkeypatch, umask):
    """Through the package's one atomic write: a failed save keeps the previous file and leaves nothing else."""
    from modeling_elmo.finetuning import activation_cache

    model = tiny_tagger()
    inputs = ElmoTokenizer()([["A", "tiny", "sentence"]], is_split_into_words=True, return_tensors="pt")
    cache = ElmoActivationCache(model, tmp_path).attach()
    model(**inputs)
    previous = os.umask(umask)
    try:
        path = cache.save()
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    saved = path.read_bytes()

    def failing(entries, filename):
        Path(filename).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(activation_cache, "save_file", failing)
    cache.entries["another"] = torch.zeros(1)
    with pytest.raises(OSError, match="No space left"):
        cache.save()
    assert path.read_bytes() == saved and os.listdir(tmp_path) == [path.name]
