"""Transformers' generic model tests (ModelTesterMixin, ConfigTester) on ElmoModel, ElmoForTokenClassification and
ElmoForPreTraining (fed stream windows by `_prepare_for_class`).

In the style of transformers' tests/models/canine/test_modeling_canine.py, under two configurations: the default
frozen biLM with a linear head (ElmoModelTest), and an unfrozen biLM with a BiLSTM-CRF head, layer-normed scalar
mixes, no skip connections and no clipping (ElmoBiLstmCrfModelTest). The mixins come from the tests of the
transformers sdist of the installed version, cached by .ci/fetch_upstream_tests.sh as the package
`transformers_tests`; put the directory it prints on PYTHONPATH. Without it this module is skipped, and fails in CI.

Every skip, per configuration class, is one of:
- the mixin's own, attention (an LSTM has none, `has_attentions = False`): "Model architecture does not support
  attentions", "test requires Flash Attention" (2, 3 and 4), "Model does not output attentions", "Model does not
  support output_attentions", "Parts of this model don't support sdpa", "This model is not composite";
- the mixin's own, hardware and optional libraries: "test requires accelerator", "multiple accelerators", "MPS",
  "deepspeed", "kernels library", "test is slow" (RUN_SLOW);
- the mixin's own, features ELMo does not have: RoPE, MoE (grouped_mm, router logits), `inputs_embeds` (the input is
  characters), tensor-parallel plan, key-conversion mapping, `_keep_in_fp32_modules`, sub-configs, position
  embeddings, causal and seq2seq LM heads, `capture_outputs`/`_can_record_outputs`;
- listed here: the 3 resize tests, because ELMo's character vocabulary is fixed (`test_resize_embeddings = False`;
  test_resize_is_refused checks the refusal instead); the 2 mismatched-shapes tests (`test_mismatched_shapes =
  False`): they load a sequence classifier saved with 3 labels with `num_labels=42` alone, which `ElmoConfig` refuses
  (a `ValueError` naming both) rather than dropping the saved label names, and they change `vocab_size`, which the
  fixed character vocabulary does not have (test_head_resized_by_id2label_loads_with_ignore_mismatched_sizes checks
  the supported way); and for the frozen configuration only, the 3 test_training_gradient_checkpointing* tests (see
  `check_training_gradient_checkpointing`).
The export tests of the real ExportTesterMixin do not run: the sdist lacks tests/exporters/ (see the fetch script).
"""

import os
import random
import tempfile
import unittest
from unittest import mock

import pytest
import torch
from transformers.models.auto import modeling_auto
from transformers.testing_utils import require_torch, torch_device

from modeling_elmo import (
    ElmoConfig,
    ElmoForPreTraining,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoModel,
)
from modeling_elmo.character_ids import BEGIN_OF_WORD_CHAR, END_OF_WORD_CHAR, PADDING_CHAR

try:
    from transformers_tests.test_configuration_common import ConfigTester
    from transformers_tests.test_modeling_common import ModelTesterMixin, ids_tensor
except ImportError as error:  # as tests/conftest.py's require_shared: fail in CI, skip elsewhere
    if (error.name or "").startswith("transformers_tests"):
        remedy = "run .ci/fetch_upstream_tests.sh and put the directory it prints on PYTHONPATH"
    else:
        remedy = "install the test extra: pip install -e '.[test]'"
    message = f"Transformers' generic tests are not importable ({error}): {remedy}."
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

# The mixins tell base models and word-labelled heads apart by the static `*_MAPPING_NAMES` of transformers'
# modeling_auto, which `AutoModel.register` (run by `import modeling_elmo`) does not fill. Without these entries
# test_training asks ElmoModel for a loss, ElmoForTokenClassification gets no labels, and the tests that look at base
# models only (test_model_forward_default_config_values, test_base_model_prefix_loads_base_weights, ...) test nothing.
_AUTO_MAPPING_PATCHES = [
    mock.patch.dict(modeling_auto.MODEL_MAPPING_NAMES, {ElmoConfig.model_type: "ElmoModel"}),
    mock.patch.dict(
        modeling_auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
        {ElmoConfig.model_type: "ElmoForTokenClassification"},
    ),
    mock.patch.dict(modeling_auto.MODEL_FOR_PRETRAINING_MAPPING_NAMES, {ElmoConfig.model_type: "ElmoForPreTraining"}),
    mock.patch.dict(
        modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
        {ElmoConfig.model_type: "ElmoForSequenceClassification"},
    ),
]


def setUpModule():
    for patch in _AUTO_MAPPING_PATCHES:
        patch.start()


def tearDownModule():
    for patch in _AUTO_MAPPING_PATCHES:
        patch.stop()


class ElmoModelTester:
    def __init__(
        self,
        parent,
        batch_size=2,
        seq_length=5,  # words per sentence: the second dimension of input_ids
        is_training=True,
        use_input_mask=True,
        use_labels=True,
        max_characters_per_token=12,
        char_embedding_dim=4,
        char_filters=((1, 4), (2, 8)),
        num_highway_layers=1,
        projection_dim=8,
        lstm_cell_size=16,
        num_hidden_layers=2,
        num_labels=3,
        lm_vocab_size=20,
        config_overrides=None,
        scope=None,
    ):
        self.parent = parent
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.use_input_mask = use_input_mask
        self.use_labels = use_labels
        self.max_characters_per_token = max_characters_per_token
        self.char_embedding_dim = char_embedding_dim
        self.char_filters = [list(spec) for spec in char_filters]
        self.num_highway_layers = num_highway_layers
        self.projection_dim = projection_dim
        self.hidden_size = 2 * projection_dim  # every layer is [forward; backward]
        self.lstm_cell_size = lstm_cell_size
        self.num_hidden_layers = num_hidden_layers
        self.num_labels = num_labels
        self.lm_vocab_size = lm_vocab_size
        self.config_overrides = config_overrides or {}
        self.scope = scope

    def prepare_config_and_inputs(self):
        """Character ids as ElmoTokenizer builds them: every word `<bow> bytes+1 <eow> <pad>...`, a padded word all
        zeros; the first sentence full, the others right-padded (ELMo accepts any padding side)."""
        rng = random.Random(0)
        lengths = [self.seq_length] * self.batch_size
        if self.use_input_mask:
            lengths[1:] = [rng.randint(1, self.seq_length) for _ in lengths[1:]]
        input_ids = torch.zeros(self.batch_size, self.seq_length, self.max_characters_per_token, dtype=torch.long)
        input_mask = torch.zeros(self.batch_size, self.seq_length, dtype=torch.long)
        for row, length in enumerate(lengths):
            for column in range(length):
                num_bytes = rng.randint(1, self.max_characters_per_token - 2)
                word = [BEGIN_OF_WORD_CHAR, *(rng.randint(1, 256) for _ in range(num_bytes)), END_OF_WORD_CHAR]
                word += [PADDING_CHAR] * (self.max_characters_per_token - len(word))
                input_ids[row, column] = torch.tensor(word)
                input_mask[row, column] = 1
        token_labels = ids_tensor([self.batch_size, self.seq_length], self.num_labels) if self.use_labels else None
        return self.get_config(), input_ids.to(torch_device), input_mask.to(torch_device), token_labels

    def get_config(self):
        return ElmoConfig(
            max_characters_per_token=self.max_characters_per_token,
            char_embedding_dim=self.char_embedding_dim,
            char_filters=self.char_filters,
            num_highway_layers=self.num_highway_layers,
            projection_dim=self.projection_dim,
            lstm_cell_size=self.lstm_cell_size,
            num_hidden_layers=self.num_hidden_layers,
            num_labels=self.num_labels,
            lm_vocab_size=self.lm_vocab_size,
            lm_num_negative_samples=5,
            **self.config_overrides,
        )

    def create_and_check_model(self, config, input_ids, input_mask, token_labels):
        model = ElmoModel(config=config)
        model.to(torch_device)
        model.eval()
        result = model(input_ids, attention_mask=input_mask)
        result = model(input_ids)
        self.parent.assertEqual(result.last_hidden_state.shape, (self.batch_size, self.seq_length, self.hidden_size))

    def create_and_check_for_token_classification(self, config, input_ids, input_mask, token_labels):
        model = ElmoForTokenClassification(config=config)
        model.to(torch_device)
        model.eval()
        result = model(input_ids, attention_mask=input_mask, labels=token_labels)
        self.parent.assertEqual(result.logits.shape, (self.batch_size, self.seq_length, self.num_labels))
        self.parent.assertEqual(result.loss.shape, ())

    def prepare_config_and_inputs_for_common(self):
        config, input_ids, input_mask, _ = self.prepare_config_and_inputs()
        return config, {"input_ids": input_ids, "attention_mask": input_mask}


@require_torch
class ElmoModelTest(ModelTesterMixin, unittest.TestCase):
    """Configuration (a): the defaults, a frozen biLM under a linear head."""

    all_model_classes = (ElmoModel, ElmoForTokenClassification, ElmoForSequenceClassification, ElmoForPreTraining)
    config_overrides = {}

    has_attentions = False  # a biLSTM: no attention weights, no attention implementations
    # The character vocabulary is fixed (bytes, markers, padding) and the config has no `vocab_size`: resizing is
    # refused, which test_resize_is_refused checks instead.
    test_resize_embeddings = False
    # A new head size comes with its labels (`id2label`): `num_labels` alone against saved labels is refused, and the
    # character vocabulary has no `vocab_size` to change (see the module docstring).
    test_mismatched_shapes = False
    # The mixin skips this test for models "added before 2023", which it reads from a "# Copyright YYYY" line of the
    # configuration file; configuration_elmo.py has none. The test passes: opt in.
    test_can_init_all_missing_weights_before_2023 = True

    def setUp(self):
        self.model_tester = ElmoModelTester(self, config_overrides=self.config_overrides)
        self.config_tester = ConfigTester(
            self,
            config_class=ElmoConfig,
            has_text_modality=False,  # no `vocab_size`: the character vocabulary is fixed
            common_properties=["hidden_size", "num_hidden_layers"],  # no attention heads
            projection_dim=8,
            lstm_cell_size=16,
        )

    def check_training_gradient_checkpointing(self, gradient_checkpointing_kwargs=None):
        if self.model_tester.get_config().freeze_elmo:
            self.skipTest(
                reason="A frozen biLM runs without autograd and stays in eval mode, so none of its layers is ever "
                "checkpointed; ElmoBiLstmCrfModelTest (unfrozen) runs these tests."
            )
        super().check_training_gradient_checkpointing(gradient_checkpointing_kwargs)

    def test_config(self):
        self.config_tester.run_common_tests()

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        """ElmoForPreTraining reads stream windows: the forward one, the backward one and their next-token labels."""
        if model_class is not ElmoForPreTraining:
            return super()._prepare_for_class(inputs_dict, model_class, return_labels)
        input_ids = inputs_dict["input_ids"]
        inputs = {"input_ids": input_ids.clone(), "backward_input_ids": input_ids.flip(1).contiguous()}
        if return_labels:  # the same on every call: some tests compare two calls
            inputs["labels"] = input_ids.sum(dim=-1) % self.model_tester.lm_vocab_size
            inputs["backward_labels"] = inputs["labels"].flip(1).contiguous()
        return inputs

    def test_model(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_model(*config_and_inputs)

    def test_for_token_classification(self):
        config_and_inputs = self.model_tester.prepare_config_and_inputs()
        self.model_tester.create_and_check_for_token_classification(*config_and_inputs)

    def test_resize_keeps_the_character_embedding(self):
        """Shrinking or padding is refused; growing (for tokens added to the tokenizer, which are spelled in
        characters: flair's context marker) keeps the same embedding."""
        config, _ = self.model_tester.prepare_config_and_inputs_for_common()
        for model_class in self.all_model_classes:
            model = model_class(config)
            embeddings = model.get_input_embeddings()
            with self.assertRaisesRegex(ValueError, "character vocabulary is fixed"):
                model.resize_token_embeddings(config.char_vocab_size - 1)
            with self.assertRaisesRegex(ValueError, "character vocabulary is fixed"):
                model.resize_token_embeddings(config.char_vocab_size, pad_to_multiple_of=64)
            self.assertIs(model.resize_token_embeddings(config.char_vocab_size), embeddings)
            self.assertIs(model.resize_token_embeddings(config.char_vocab_size + 38), embeddings)
            self.assertEqual(tuple(embeddings.weight.shape)[0], config.char_vocab_size)

    def test_head_resized_by_id2label_loads_with_ignore_mismatched_sizes(self):
        config, inputs = self.model_tester.prepare_config_and_inputs_for_common()
        labels = {index: f"class-{index}" for index in range(5)}
        resized = {"id2label": labels, "label2id": {label: index for index, label in labels.items()}}
        for model_class in (ElmoForTokenClassification, ElmoForSequenceClassification):
            with self.subTest(model_class.__name__), tempfile.TemporaryDirectory() as folder:
                model = model_class(config)
                model.save_pretrained(folder)
                with self.assertRaisesRegex(ValueError, "num_labels=42 does not match id2label"):
                    model_class.from_pretrained(folder, num_labels=42)
                with self.assertRaises(RuntimeError):  # a classifier of another size, without the flag
                    model_class.from_pretrained(folder, **resized)
                loaded = model_class.from_pretrained(folder, ignore_mismatched_sizes=True, **resized).to(torch_device)
                self.assertEqual(loaded(**inputs).logits.shape[-1], 5)
                for name, tensor in model.elmo.state_dict().items():
                    torch.testing.assert_close(loaded.elmo.state_dict()[name], tensor, rtol=0, atol=0)


@require_torch
class ElmoBiLstmCrfModelTest(ElmoModelTest):
    """Configuration (b): unfrozen biLM, BiLSTM-CRF head, layer-normed scalar mixes, no skip connections, no clip."""

    config_overrides = {
        "freeze_elmo": False,
        "classifier_head": "bilstm",
        "tagger_hidden_size": 6,
        "use_crf": True,
        "scalar_mix_layer_norm": True,
        "use_skip_connections": False,
        "cell_clip": None,
        "proj_clip": None,
        "num_output_representations": 1,  # ElmoModel's own (layer-normed) mix too
    }


if __name__ == "__main__":
    unittest.main()
