"""ElmoForSequenceClassification: heads and pooling, padding invariance, loss and problem types, freezing, loading a
base checkpoint, save/load, activation cache; text pairs (split, padding, cache, errors)."""

from pathlib import Path

import pytest
import torch
from tiny_heads import (
    assert_bilm_is_the_frozen_base,
    assert_cache_skips_the_bilm,
    assert_l2_penalty_added_in_training,
    reloaded,
    tiny_head_config,
)
from torch import nn
from transformers import AutoModelForSequenceClassification, pipeline
from transformers.modeling_outputs import SequenceClassifierOutput

from modeling_elmo import ElmoConfig, ElmoForSequenceClassification, ElmoTokenizer
from modeling_elmo.configuration_elmo import ElmoConfigError
from modeling_elmo.finetuning.activation_cache import ElmoActivationCache, sentence_key

LABELS = ["negative", "neutral", "positive"]
SENTENCES = [["A", "truly", "wonderful", "film", "."], ["Dull", "!"], ["Meh"]]
SENTIMENTS = [2, 0, 1]
# raw text pairs for pipeline(); the last one has an empty second text
PIPELINE_INPUTS = [
    {"text": "A man plays a guitar.", "text_pair": "Someone makes music."},
    {"text": "It rains.", "text_pair": "The sun shines brightly, doesn't it?"},
    {"text": "Yes", "text_pair": ""},
]
PAIRS = [
    (["A", "man", "plays", "a", "guitar", "."], ["Someone", "makes", "music", "."]),
    (["It", "rains"], ["The", "sun", "shines", "brightly"]),
    (["Yes"], ["No", "."]),
]


def tiny_config(**overrides) -> ElmoConfig:
    return tiny_head_config(LABELS, **overrides)


def tiny_model(seed: int = 0, **overrides) -> ElmoForSequenceClassification:
    torch.manual_seed(seed)
    model = ElmoForSequenceClassification(tiny_config(**overrides)).eval()
    if model.scalar_mix is not None:  # a mix that is not uniform, so that every layer's weight matters
        with torch.no_grad():
            model.scalar_mix.scalar_parameters.copy_(torch.linspace(-1.0, 1.0, model.config.num_hidden_layers + 1))
    return model


def batch(padding_side: str = "right") -> dict[str, torch.Tensor]:
    encoding = ElmoTokenizer(padding_side=padding_side)(
        SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt"
    )
    return {**encoding, "labels": torch.tensor(SENTIMENTS)}


def pair_batch(padding_side: str = "right") -> dict[str, torch.Tensor]:
    first, second = zip(*PAIRS, strict=True)
    tokenizer = ElmoTokenizer(padding_side=padding_side)
    return dict(tokenizer(list(first), list(second), is_split_into_words=True, padding=True, return_tensors="pt"))


def alone(words: list[str]) -> dict[str, torch.Tensor]:
    return dict(ElmoTokenizer()([words], is_split_into_words=True, return_tensors="pt"))


def pooled_alone(model: ElmoForSequenceClassification, words: list[str]) -> torch.Tensor:
    """The pooled vector of one sentence run on its own, without padding: (pooled_size,)."""
    inputs = alone(words)
    mask = inputs["attention_mask"].bool()
    hidden = model.encode_words(model.elmo_layers(inputs["input_ids"], mask), mask)[0]
    return {"mean": hidden.mean(dim=0), "max": hidden.amax(dim=0)}


HEADS = [
    {"classifier_head": "linear", "classifier_pooling": "mean"},
    {"classifier_head": "linear", "classifier_pooling": "max"},
    {"classifier_head": "linear", "classifier_pooling": "mean_max"},
    {"classifier_head": "bilstm", "classifier_pooling": "mean_max", "tagger_num_layers": 2},
]


@pytest.mark.parametrize("head", HEADS)
def test_padding_never_changes_a_sentences_logits(head):
    model = tiny_model(**head)
    for padding_side in ("right", "left"):
        output = model(**batch(padding_side))
        assert isinstance(output, SequenceClassifierOutput) and output.logits.shape == (3, len(LABELS))
        for row, words in enumerate(SENTENCES):
            torch.testing.assert_close(output.logits[row], model(**alone(words)).logits[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("head", HEADS)
def test_pooling_is_the_mean_or_max_of_the_word_vectors(head):
    model = tiny_model(**head)
    inputs = batch("left")
    mask = inputs["attention_mask"].bool()
    pooled = model.pooler(model.encode_words(model.elmo_layers(inputs["input_ids"], mask), mask), mask)
    for row, words in enumerate(SENTENCES):
        parts = pooled_alone(model, words)
        expected = torch.cat([parts[name] for name in head["classifier_pooling"].split("_")])
        torch.testing.assert_close(pooled[row], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(**inputs).logits, model.classifier(pooled))


def test_a_sentence_without_words_pools_to_zeros():
    model = tiny_model()
    inputs = ElmoTokenizer()(["", "good"], padding=True, return_tensors="pt")
    mask = inputs["attention_mask"].bool()
    hidden = model.encode_words(model.elmo_layers(inputs["input_ids"], mask), mask)
    assert torch.equal(model.pooler(hidden, mask)[0], torch.zeros(model.pooler.output_size))
    torch.testing.assert_close(model(**inputs).logits[0], model.classifier.bias)


def test_single_label_loss_is_cross_entropy():
    model = tiny_model()
    inputs = batch()
    output = model(**inputs)
    assert model.config.problem_type == "single_label_classification"
    torch.testing.assert_close(output.loss, nn.functional.cross_entropy(output.logits, inputs["labels"]))


def test_regression_loss_is_mean_squared_error():
    model = tiny_model(num_labels=1, id2label=None, label2id=None)
    inputs = {**batch(), "labels": torch.tensor([0.5, -1.0, 2.0])}
    output = model(**inputs)
    assert model.config.problem_type == "regression" and output.logits.shape == (3, 1)
    torch.testing.assert_close(output.loss, nn.functional.mse_loss(output.logits[:, 0], inputs["labels"]))
    one = {key: value[:1] for key, value in inputs.items()}  # a batch of one: logits (1, 1), labels (1,)
    torch.testing.assert_close(model(**one).loss, (model(**one).logits[0, 0] - 0.5) ** 2)


def test_multi_label_loss_is_binary_cross_entropy_with_logits():
    model = tiny_model()
    labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    output = model(**{**batch(), "labels": labels})
    assert model.config.problem_type == "multi_label_classification"
    expected = nn.functional.binary_cross_entropy_with_logits(output.logits, labels)
    torch.testing.assert_close(output.loss, expected)


def test_a_set_problem_type_is_kept():
    model = tiny_model(problem_type="multi_label_classification")
    labels = torch.tensor([[1, 0, 1], [0, 0, 0], [0, 1, 0]])  # integers, but the config says multi-label
    output = model(**{**batch(), "labels": labels})
    assert model.config.problem_type == "multi_label_classification"
    torch.testing.assert_close(
        output.loss, nn.functional.binary_cross_entropy_with_logits(output.logits, labels.float())
    )


@pytest.mark.parametrize(
    ("labels", "error", "pattern"),
    [
        (torch.tensor([0, 3, 1]), ValueError, r"labels must be in \[0, 2\], found 3"),
        (torch.tensor([0, -100, 1]), ValueError, r"labels must be in \[0, 2\], found -100"),
        (torch.tensor([0, 1]), ValueError, r"labels must have shape \(3,\)"),
        (torch.ones(3, 2), ValueError, r"labels must have shape \(3, 3\) \(batch_size, num_labels\)"),
    ],
)
def test_bad_labels_are_named(labels, error, pattern):
    with pytest.raises(error, match=pattern):
        tiny_model()(**{**batch(), "labels": labels})


def test_hidden_states_are_the_biLM_layers():
    model = tiny_model()
    inputs = batch()
    output = model(**inputs, output_hidden_states=True)
    reference = model.elmo(inputs["input_ids"], inputs["attention_mask"], output_hidden_states=True).hidden_states
    assert len(output.hidden_states) == model.config.num_hidden_layers + 1
    for layer, expected_layer in zip(output.hidden_states, reference, strict=True):
        torch.testing.assert_close(layer, expected_layer)
    assert model(**inputs).hidden_states is None
    assert model(**inputs, return_dict=False)[0].shape == ()  # (loss, logits) as a tuple


def test_frozen_biLM_gets_no_gradient_and_stays_in_eval_mode():
    model = tiny_model(classifier_head="bilstm", classifier_dropout=0.0).train()
    assert not model.elmo.training and model.tagger.training
    model(**batch()).loss.backward()
    assert all(p.grad is None and not p.requires_grad for p in model.elmo.parameters())
    assert model.scalar_mix.scalar_parameters.grad is not None and model.classifier.weight.grad.abs().sum() > 0

    unfrozen = tiny_model(freeze_elmo=False, num_output_representations=2, classifier_dropout=0.0).train()
    assert unfrozen.elmo.training
    unfrozen(**batch()).loss.backward()
    assert [name for name, parameter in unfrozen.named_parameters() if parameter.grad is None] == []


def test_scalar_mix_l2_penalty_is_added_in_training():
    assert_l2_penalty_added_in_training(tiny_model(scalar_mix_l2_coef=0.5, classifier_dropout=0.0), batch())


def test_classifier_pooling_is_validated():
    with pytest.raises(ElmoConfigError, match=r"classifier_pooling must be one of 'mean', 'max', 'mean_max'"):
        tiny_config(classifier_pooling="sum")
    with pytest.raises(ElmoConfigError, match="classifier_sentence_pairs must be a boolean"):
        tiny_config(classifier_sentence_pairs=1)


def test_from_base_checkpoint_inits_only_the_head(converted_fixture):
    model, info = AutoModelForSequenceClassification.from_pretrained(
        converted_fixture, num_labels=5, classifier_head="bilstm", output_loading_info=True
    )
    assert isinstance(model, ElmoForSequenceClassification)
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    assert {key.split(".")[0] for key in info["missing_keys"]} == {"scalar_mix", "tagger", "classifier"}
    assert_bilm_is_the_frozen_base(model, converted_fixture)


@pytest.mark.parametrize("overrides", [{"classifier_head": "bilstm"}, {"classifier_sentence_pairs": True}])
def test_save_load_gives_same_predictions(tmp_path, overrides):
    model = tiny_model(seed=3, **overrides)
    loaded = reloaded(model, tmp_path, AutoModelForSequenceClassification)
    inputs = pair_batch() if overrides.get("classifier_sentence_pairs") else batch()
    torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits)


def test_activation_cache_matches_the_biLM_and_skips_it():
    model = tiny_model(classifier_head="bilstm")
    assert_cache_skips_the_bilm(model, batch(), ElmoActivationCache(model))


# ---------------------------------------------------------------------------------------------------------------------
# Text pairs
# ---------------------------------------------------------------------------------------------------------------------

PAIR_HEADS = [
    {"classifier_sentence_pairs": True, "classifier_pooling": "mean_max"},
    {"classifier_sentence_pairs": True, "classifier_pooling": "max", "classifier_head": "bilstm"},
]


def classifier_inputs(model: ElmoForSequenceClassification, inputs: dict) -> torch.Tensor:
    """What the linear classifier reads for `inputs`: (batch, features)."""
    captured = []
    handle = model.classifier.register_forward_hook(lambda module, args, output: captured.append(args[0]))
    try:
        model(**inputs)
    finally:
        handle.remove()
    return captured[0]


@pytest.mark.parametrize("head", PAIR_HEADS)
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_each_text_of_a_pair_is_encoded_as_its_own_sentence(head, padding_side):
    model = tiny_model(**head)
    features = classifier_inputs(model, pair_batch(padding_side))
    size = model.pooler.output_size
    assert features.shape == (len(PAIRS), 4 * size)
    for row, (first, second) in enumerate(PAIRS):
        u, v = (
            torch.cat([pooled_alone(model, words)[name] for name in head["classifier_pooling"].split("_")])
            for words in (first, second)
        )
        expected = torch.cat([u, v, (u - v).abs(), u * v])
        torch.testing.assert_close(features[row], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("head", PAIR_HEADS)
def test_padding_never_changes_a_pairs_logits(head):
    model = tiny_model(**head)
    tokenizer = ElmoTokenizer()
    for padding_side in ("right", "left"):
        logits = model(**pair_batch(padding_side)).logits
        for row, (first, second) in enumerate(PAIRS):
            single = tokenizer([first], [second], is_split_into_words=True, return_tensors="pt")
            torch.testing.assert_close(logits[row], model(**single).logits[0], atol=1e-5, rtol=1e-5)


def test_a_pairs_hidden_states_are_each_texts_own_layers():
    model = tiny_model(classifier_sentence_pairs=True)
    inputs = pair_batch("left")
    layers = model(**inputs, output_hidden_states=True).hidden_states
    for row, (first, second) in enumerate(PAIRS):
        positions = inputs["attention_mask"][row].bool()
        kinds = inputs["token_type_ids"][row][positions]
        for kind, words in ((0, first), (1, second)):
            single = alone(words)
            expected = model.elmo(**single, output_hidden_states=True).hidden_states
            for layer, expected_layer in zip(layers, expected, strict=True):
                torch.testing.assert_close(
                    layer[row, positions][kinds == kind], expected_layer[0], atol=1e-5, rtol=1e-5
                )
        assert all(layer[row, ~positions].abs().sum() == 0 for layer in layers)


def test_the_activation_cache_keeps_one_entry_per_text_of_a_pair():
    model = tiny_model(classifier_sentence_pairs=True)
    inputs = pair_batch()
    expected = model(**inputs).logits
    cache = ElmoActivationCache(model).attach()
    model(**inputs)
    texts = [words for pair in PAIRS for words in pair]
    assert set(cache.entries) == {sentence_key(alone(words)["input_ids"][0]) for words in texts}
    torch.testing.assert_close(model(**inputs).logits, expected, atol=1e-5, rtol=1e-5)
    assert cache.misses == 6 and cache.hits == 6


def test_pairs_and_single_texts_are_not_mixed_up():
    with pytest.raises(ValueError, match="classifies text pairs .* give token_type_ids"):
        tiny_model(classifier_sentence_pairs=True)(**batch())
    with pytest.raises(ValueError, match="mark words of a second text, but this model classifies single texts"):
        tiny_model()(**pair_batch())
    single = {**batch(), "token_type_ids": torch.zeros(3, 5, dtype=torch.long)}  # all zeros: one text per row
    torch.testing.assert_close(tiny_model()(**single).logits, tiny_model()(**batch()).logits)
    inputs = pair_batch()
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, 1\], found 2"):
        tiny_model(classifier_sentence_pairs=True)(**{**inputs, "token_type_ids": inputs["token_type_ids"] * 2})
    with pytest.raises(ValueError, match=r"token_type_ids must have shape \(3, 10\)"):
        tiny_model(classifier_sentence_pairs=True)(**{**inputs, "token_type_ids": inputs["token_type_ids"][:, :4]})


# ---------------------------------------------------------------------------------------------------------------------
# pipeline("text-classification")
# ---------------------------------------------------------------------------------------------------------------------


def classifier_folder(tmp_path: Path, **overrides) -> Path:
    """A saved tiny classifier (and tokenizer) whose predictions differ from one input to the next."""
    model = tiny_model(seed=1, **overrides)
    with torch.no_grad():
        model.classifier.weight.mul_(50.0)
    folder = tmp_path / ("pairs" if overrides.get("classifier_sentence_pairs") else "texts")
    model.save_pretrained(folder)
    ElmoTokenizer().save_pretrained(folder)
    return folder


@pytest.mark.parametrize("pairs", [False, True])
def test_pipeline_gives_the_models_softmax_for_texts_and_pairs(tmp_path, pairs):
    folder = classifier_folder(tmp_path, classifier_sentence_pairs=pairs)
    inputs = PIPELINE_INPUTS if pairs else [example["text"] for example in PIPELINE_INPUTS]
    model, tokenizer = ElmoForSequenceClassification.from_pretrained(folder), ElmoTokenizer()
    runner = pipeline("text-classification", model=str(folder), top_k=None)
    assert type(runner.model) is ElmoForSequenceClassification
    for example, found in zip(inputs, runner(inputs), strict=True):
        encoding = tokenizer(**example, return_tensors="pt") if pairs else tokenizer(example, return_tensors="pt")
        with torch.no_grad():
            probabilities = model(**encoding).logits[0].softmax(-1)
        assert {result["label"]: pytest.approx(result["score"], abs=1e-6) for result in found} == {
            LABELS[index]: probability for index, probability in enumerate(probabilities.tolist())
        }
    one_at_a_time = [runner([example])[0] for example in inputs]
    batched = pipeline("text-classification", model=str(folder), top_k=None, batch_size=3)(inputs)  # padded
    for alone_result, batch_result in zip(one_at_a_time, batched, strict=True):
        assert [r["label"] for r in alone_result] == [r["label"] for r in batch_result]
        assert [r["score"] for r in alone_result] == pytest.approx([r["score"] for r in batch_result], abs=1e-6)
    top = [result["label"] for result in pipeline("text-classification", model=str(folder))(inputs)]
    assert top == [found[0]["label"] for found in one_at_a_time] and len(set(top)) > 1


@pytest.mark.parametrize("pairs", [False, True])
def test_attention_mask_values_are_checked(pairs):
    inputs = pair_batch() if pairs else batch()
    inputs["attention_mask"][0, 0] = 2
    with pytest.raises(ValueError, match="attention_mask must hold 1 for words and 0 for padding"):
        tiny_model(classifier_sentence_pairs=pairs)(**inputs)


def _features_before_the_classifier(model: ElmoForSequenceClassification, inputs: dict) -> list[torch.Tensor]:
    captured = []
    handle = model.classifier.register_forward_hook(lambda module, args, output: captured.append(args[0]))
    model(**inputs)
    handle.remove()
    return captured


def layers_pooled_alone(model: ElmoForSequenceClassification, words: list[str]) -> torch.Tensor:
    """Every biLM layer of one sentence run on its own, pooled as `config.classifier_pooling` says, concatenated:
    ((num_hidden_layers + 1) * pooled_size,)."""
    inputs = alone(words)
    layers = model.elmo_layers(inputs["input_ids"], inputs["attention_mask"])
    statistics = {"mean": lambda layer: layer.mean(dim=0), "max": lambda layer: layer.amax(dim=0)}
    names = model.config.classifier_pooling.split("_")
    return torch.cat([statistics[name](layer[0]) for layer in layers for name in names])


@pytest.mark.parametrize("pooling", ["mean", "max", "mean_max"])
@pytest.mark.parametrize("pairs", [False, True])
def test_concatenated_layers_are_each_layer_pooled_on_its_own(pooling, pairs):
    model = tiny_model(classifier_concat_layers=True, classifier_pooling=pooling, classifier_sentence_pairs=pairs)
    assert model.scalar_mix is None
    width = (model.config.num_hidden_layers + 1) * model.pooler.output_size * (4 if pairs else 1)
    assert model.classifier.in_features == width
    for padding_side in ("right", "left"):
        inputs = pair_batch(padding_side) if pairs else {k: v for k, v in batch(padding_side).items() if k != "labels"}
        (features,) = _features_before_the_classifier(model, inputs)
        for row, texts in enumerate(PAIRS if pairs else SENTENCES):
            if pairs:
                u, v = (layers_pooled_alone(model, words) for words in texts)
                expected = torch.cat([u, v, (u - v).abs(), u * v])
            else:
                expected = layers_pooled_alone(model, texts)
            torch.testing.assert_close(features[row], expected, atol=1e-5, rtol=1e-5)


def test_concatenated_layers_train_the_linear_layer_only_and_round_trip(tmp_path):
    model = tiny_model(classifier_concat_layers=True, classifier_dropout=0.0, scalar_mix_l2_coef=0.5).train()
    output = model(**batch())
    torch.testing.assert_close(output.loss, nn.functional.cross_entropy(output.logits, batch()["labels"]))
    output.loss.backward()
    trained = [name for name, parameter in model.named_parameters() if parameter.grad is not None]
    assert trained == ["classifier.weight", "classifier.bias"]
    model.eval().save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert loaded.config.classifier_concat_layers and loaded.scalar_mix is None
    torch.testing.assert_close(loaded(**batch()).logits, model(**batch()).logits)


@pytest.mark.parametrize("pairs", [False, True])
def test_batch_norm_standardises_each_feature_over_the_batch_in_training(pairs):
    model = tiny_model(classifier_batch_norm=True, classifier_dropout=0.0, classifier_sentence_pairs=pairs).train()
    plain = tiny_model(classifier_dropout=0.0, classifier_sentence_pairs=pairs).train()
    inputs = pair_batch() if pairs else {key: value for key, value in batch().items() if key != "labels"}
    (features,) = _features_before_the_classifier(model, inputs)
    (unnormalised,) = _features_before_the_classifier(plain, inputs)
    mean = unnormalised.mean(dim=0)
    variance = unnormalised.var(dim=0, unbiased=False)
    torch.testing.assert_close(features, (unnormalised - mean) / torch.sqrt(variance + 1e-5))
    # the running averages moved from (0, 1) towards the batch's statistics (momentum 0.1)
    torch.testing.assert_close(model.feature_norm.running_mean, 0.1 * mean)


def test_batch_norm_uses_running_averages_in_evaluation_and_for_a_single_training_row():
    model = tiny_model(classifier_batch_norm=True)
    with torch.no_grad():
        model.feature_norm.running_mean.normal_()
        model.feature_norm.running_var.uniform_(0.5, 2.0)
    inputs = {key: value for key, value in batch().items() if key != "labels"}
    plain = tiny_model()  # same seed: the same weights, no normalisation
    (unnormalised,) = _features_before_the_classifier(plain, inputs)
    expected = (unnormalised - model.feature_norm.running_mean) / torch.sqrt(model.feature_norm.running_var + 1e-5)
    (features,) = _features_before_the_classifier(model, inputs)
    torch.testing.assert_close(features, expected)
    # padding and batch-mates do not change a sentence's logits in evaluation
    single = dict(ElmoTokenizer()([SENTENCES[2]], is_split_into_words=True, return_tensors="pt"))
    torch.testing.assert_close(model(**single).logits[0], model(**inputs).logits[2])
    before = model.feature_norm.running_mean.clone()
    model.train()
    output = model(**single, labels=torch.tensor([1]))  # one row has no variance: the running averages are used
    assert torch.isfinite(output.loss) and torch.equal(model.feature_norm.running_mean, before)


def test_batch_norm_running_averages_are_saved_and_loaded(tmp_path):
    model = tiny_model(classifier_batch_norm=True).train()
    model(**batch())
    model.eval().save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert loaded.config.classifier_batch_norm
    torch.testing.assert_close(loaded.feature_norm.running_var, model.feature_norm.running_var)
    torch.testing.assert_close(loaded(**batch()).logits, model(**batch()).logits)
    assert tiny_model().feature_norm is None  # off unless asked for
