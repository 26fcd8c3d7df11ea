"""ElmoConfig validation: every field's type and range, reported as one `ValueError` that names the field."""

import dataclasses
import json
import math

import pytest
from transformers import AutoConfig

from modeling_elmo import ElmoConfig
from modeling_elmo.configuration_elmo import FIELD_RULES, ElmoConfigError

NAN, INF = math.nan, math.inf
BAD_VALUES = {
    "char_vocab_size": [261, 262.0, "262"],
    "max_characters_per_token": [2, 50.0, 10**6, None],
    "char_embedding_dim": [0, -4, 16.5, True],
    "char_filters": [[], [[1]], [[1, 0]], [[1, 2.0]], [[True, 4]], "[[1, 4]]", [[1, 4, 5]], [(1, 4)]],
    "num_highway_layers": [-1, 1.0, False],
    "char_activation": ["gelu", None, 0],
    "lstm_cell_size": [0, 1.5, "4096"],
    "projection_dim": [0, 512.0],
    "num_hidden_layers": [0, -1, 2.0, True, "2", None],
    "cell_clip": [-3, 0, "three", NAN, INF, -INF, True, [3]],
    "proj_clip": [-0.5, NAN, False],
    "use_skip_connections": ["false", "true", 0, 1, None],
    "num_output_representations": [-1, 1.0],
    "scalar_mix_layer_norm": ["no", 1],
    "scalar_mix_layer_norm_scope": ["layer", None, 1],
    "stateful": [0, None],
    "initializer_range": [-0.02, NAN, "0.02"],
    "pad_token_id": [-1, 0.0, True],
    "classifier_head": ["crf", None],
    "tagger_hidden_size": [0, 200.0],
    "tagger_num_layers": [0, True],
    "classifier_pooling": ["sum", "MEAN", None, 1],
    "classifier_sentence_pairs": ["true", 1, None],
    "classifier_batch_norm": ["true", 1, None],
    "classifier_concat_layers": ["false", 0, None],
    "classifier_dropout": [-0.1, 1.5, NAN, None],
    "use_crf": ["yes", 1],
    "freeze_elmo": ["false", None],
    "scalar_mix_l2_coef": [-1, INF, "0"],
    "lstm_forget_bias": [NAN, INF, "1.0", True, None],
    "lm_vocab_size": [2, 0, 100.0, True, "100"],
    "lm_dropout": [-0.1, 1, 1.0, NAN, None],
    "lm_num_negative_samples": [0, -5, 10.0, False],
    "char_input": ["unicode", None, 1],
    "char_padding_id": [0, -1, 2.0, True],
    "bos_char_ids": [[], [0], [1.0], "1", [True]],
    "eos_char_ids": [[], [-2], (1, 2)],
    "word_vocab_size": [1, 0, 10.0, True],
    "word_embedding_dim": [0, 100.0, False],
    "bos_word_id": [0, 1.5, "1"],
    "eos_word_id": [-1, True],
}
CASES = [(field, value) for field, values in BAD_VALUES.items() for value in values]


def test_every_elmo_field_has_a_rule_and_bad_values():
    declared = {field.name for field in dataclasses.fields(ElmoConfig) if field.name in ElmoConfig.__annotations__}
    assert set(FIELD_RULES) == declared == set(BAD_VALUES)


@pytest.mark.parametrize(("field", "value"), CASES, ids=[f"{field}={value!r}" for field, value in CASES])
def test_bad_values_raise_one_clear_value_error(field, value):
    with pytest.raises(ElmoConfigError) as error:
        ElmoConfig(**{field: value})
    assert isinstance(error.value, ValueError)
    assert error.value.field == field
    message = str(error.value)
    assert message.startswith(f"ElmoConfig: {field} must be ") and f"got {value!r}" in message
    assert "\n" not in message


@pytest.mark.parametrize(("field", "value"), CASES[::3], ids=[f"{field}={value!r}" for field, value in CASES[::3]])
def test_assigning_a_bad_value_raises_and_keeps_the_old_one(field, value):
    config = ElmoConfig()
    before = getattr(config, field)
    with pytest.raises(ElmoConfigError, match=f"^ElmoConfig: {field} must be "):
        setattr(config, field, value)
    assert getattr(config, field) == before


def test_filters_wider_than_a_word_name_max_characters_per_token():
    with pytest.raises(
        ElmoConfigError, match=r"max_characters_per_token must be at least 7 \(the widest character filter\), got 5$"
    ) as error:
        ElmoConfig(max_characters_per_token=5)
    assert error.value.field == "max_characters_per_token"


def test_concatenated_layers_with_the_bilstm_head_name_classifier_concat_layers():
    with pytest.raises(
        ElmoConfigError, match=r"^ElmoConfig: classifier_concat_layers must be False with classifier_head='bilstm'"
    ) as error:
        ElmoConfig(classifier_head="bilstm", classifier_concat_layers=True)
    assert error.value.field == "classifier_concat_layers"


def test_an_assignment_that_breaks_a_rule_between_fields_is_refused_on_save(tmp_path):
    config = ElmoConfig(char_filters=[[1, 4], [3, 6]], max_characters_per_token=3)
    config.char_filters = [[1, 4], [4, 6]]
    with pytest.raises(ElmoConfigError, match=r"max_characters_per_token must be at least 4 .*got 3$"):
        config.save_pretrained(tmp_path)


def test_a_config_json_with_a_bad_value_is_refused_on_load(tmp_path):
    ElmoConfig().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "use_skip_connections": "false"}))
    with pytest.raises(ElmoConfigError, match="use_skip_connections must be a boolean"):
        AutoConfig.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"cell_clip": None, "proj_clip": None, "use_skip_connections": False},
        {"cell_clip": 3, "proj_clip": 0.25, "num_highway_layers": 0, "char_activation": "tanh"},
        {"char_filters": None, "max_characters_per_token": 7, "pad_token_id": None, "classifier_dropout": 0},
        {"char_filters": [[1, 4], [3, 6]], "max_characters_per_token": 3, "classifier_head": "bilstm"},
        {"classifier_concat_layers": True, "classifier_pooling": "mean"},
    ],
)
def test_valid_values_are_accepted(values):
    config = ElmoConfig(**values)
    assert {key: getattr(config, key) for key in values if key != "char_filters"} == {
        key: value for key, value in values.items() if key != "char_filters"
    }
