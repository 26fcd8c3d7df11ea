"""ElmoForTokenClassification: heads, loss, CRF decoding, freezing, loading a base checkpoint, save/load, cache."""

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
from transformers import AutoModelForTokenClassification
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging

from modeling_elmo import ElmoConfig, ElmoForTokenClassification, ElmoModel, ElmoTokenizer
from modeling_elmo.finetuning.activation_cache import ElmoActivationCache

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCES = [["John", "Smith", "lives", "in", "New", "York", "."], ["Hi", "!"], ["Paris"]]
TAGS = [[1, 2, 0, 0, 3, 4, 0], [0, 0], [3]]


def tiny_config(**overrides) -> ElmoConfig:
    return tiny_head_config(LABELS, **overrides)


def tiny_model(seed: int = 0, **overrides) -> ElmoForTokenClassification:
    torch.manual_seed(seed)
    return ElmoForTokenClassification(tiny_config(**overrides)).eval()


def batch(padding_side: str = "right") -> dict[str, torch.Tensor]:
    tokenizer = ElmoTokenizer(padding_side=padding_side)
    encoding = tokenizer(SENTENCES, is_split_into_words=True, padding=True, return_tensors="pt")
    width = encoding["input_ids"].shape[1]
    labels = torch.full((len(SENTENCES), width), -100)
    for row, tags in enumerate(TAGS):
        positions = encoding["attention_mask"][row].nonzero().squeeze(1)
        labels[row, positions] = torch.tensor(tags)
    return {**encoding, "labels": labels}


HEADS = [
    {"classifier_head": "linear"},
    {"classifier_head": "bilstm"},
    {"classifier_head": "linear", "use_crf": True},
    {"classifier_head": "bilstm", "use_crf": True},
]


@pytest.mark.parametrize("head", HEADS)
def test_heads_shapes_and_padding_side_invariance(head):
    model = tiny_model(**head)
    right, left = batch("right"), batch("left")
    out_right, out_left = model(**right), model(**left)
    assert out_right.logits.shape == (3, 7, len(LABELS))
    mask_right, mask_left = right["attention_mask"].bool(), left["attention_mask"].bool()
    torch.testing.assert_close(out_right.logits[mask_right], out_left.logits[mask_left], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_right.loss, out_left.loss, atol=1e-5, rtol=1e-5)


def test_linear_loss_is_cross_entropy_over_labelled_words():
    model = tiny_model()
    inputs = batch()
    output = model(**inputs)
    keep = inputs["labels"] != -100
    expected = nn.functional.cross_entropy(output.logits[keep], inputs["labels"][keep])
    torch.testing.assert_close(output.loss, expected)
    summed = nn.functional.cross_entropy(output.logits[keep], inputs["labels"][keep], reduction="sum")
    torch.testing.assert_close(model(**inputs, num_items_in_batch=torch.tensor(40)).loss, summed / 40)


def test_crf_loss_and_viterbi_logits():
    model = tiny_model(use_crf=True, classifier_head="bilstm")
    with torch.no_grad():
        for parameter in model.crf.parameters():
            parameter.normal_()
    inputs = batch()
    mask = inputs["attention_mask"].bool()
    output = model(**inputs)
    emissions = model.classifier(
        model.tagger(model.scalar_mix(model.elmo_layers(inputs["input_ids"], mask), mask), mask)
    )
    nll = model.crf.neg_log_likelihood(emissions, inputs["labels"], mask)
    torch.testing.assert_close(output.loss, nll.sum() / mask.sum(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(**inputs, num_items_in_batch=20).loss, nll.sum() / 20, atol=1e-5, rtol=1e-5)
    viterbi = model.crf.viterbi_decode(emissions, mask)
    assert torch.equal(output.logits.argmax(-1)[mask], viterbi[mask])
    # the BIO constraints hold: no I-X after O or another type, and no I-X first
    for row in range(len(SENTENCES)):
        path = [LABELS[i] for i in viterbi[row, mask[row]].tolist()]
        for previous, tag in zip(["O", *path], path, strict=False):
            assert not tag.startswith("I-") or previous[2:] == tag[2:]


def test_frozen_biLM_gets_no_gradient_and_stays_in_eval_mode():
    model = tiny_model(classifier_head="bilstm", use_crf=True, classifier_dropout=0.0).train()
    assert not model.elmo.training and model.tagger.training
    model(**batch()).loss.backward()
    assert all(p.grad is None and not p.requires_grad for p in model.elmo.parameters())
    assert model.scalar_mix.scalar_parameters.grad is not None and model.classifier.weight.grad.abs().sum() > 0

    unfrozen = tiny_model(freeze_elmo=False).train()
    assert unfrozen.elmo.training
    unfrozen(**batch()).loss.backward()
    assert unfrozen.elmo.char_encoder.char_embeddings.weight.grad.abs().sum() > 0


def test_scalar_mix_l2_penalty_is_added_in_training():
    assert_l2_penalty_added_in_training(tiny_model(scalar_mix_l2_coef=0.5, classifier_dropout=0.0), batch())


@pytest.mark.parametrize("bad_label", [len(LABELS), -1, -2])
def test_labels_out_of_range_are_named(bad_label):
    inputs = batch()
    inputs["labels"][0, 0] = bad_label
    with pytest.raises(ValueError, match=rf"labels must be in \[0, {len(LABELS) - 1}\] or -100, found {bad_label}"):
        tiny_model()(**inputs)


def test_labels_of_the_wrong_shape_or_type_are_refused():
    inputs = batch()
    with pytest.raises(ValueError, match=r"labels must have shape \(3, 7\)"):
        tiny_model()(**{**inputs, "labels": inputs["labels"][:, :4]})
    with pytest.raises(TypeError, match="labels must hold integer ids"):
        tiny_model()(**{**inputs, "labels": inputs["labels"].float()})


def test_mismatched_num_labels_is_an_error():
    with pytest.raises(ValueError, match="num_labels=3 does not match id2label"):
        tiny_config(num_labels=3)


def test_from_base_checkpoint_inits_only_the_head(converted_fixture):
    model, info = AutoModelForTokenClassification.from_pretrained(
        converted_fixture,
        id2label=dict(enumerate(LABELS)),
        label2id={label: index for index, label in enumerate(LABELS)},
        classifier_head="bilstm",
        use_crf=True,
        output_loading_info=True,
    )
    assert isinstance(model, ElmoForTokenClassification)
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    assert all(key.split(".")[0] in ("scalar_mix", "tagger", "classifier", "crf") for key in info["missing_keys"])
    assert {"classifier.weight", "crf.transitions", "scalar_mix.gamma"} <= set(info["missing_keys"])
    assert_bilm_is_the_frozen_base(model, converted_fixture)
    assert torch.equal(model.crf.transitions, torch.zeros(len(LABELS), len(LABELS)))


def test_tagger_has_no_unused_parameters_and_loads_base_mixes_quietly(tmp_path):
    """
    The head mixes the layers itself, so it does not build ElmoModel's `num_output_representations` mixes: they would
    never get a gradient (wasted work, dead weights, DDP's unused-parameter error). Checkpoints that hold them (a base
    model, a tagger saved before) load without reporting them.
    """
    model = tiny_model(freeze_elmo=False, num_output_representations=2, classifier_dropout=0.0).train()
    model(**batch()).loss.backward()
    assert [name for name, parameter in model.named_parameters() if parameter.grad is None] == []
    assert not any("scalar_mixes" in key for key in model.state_dict())

    ElmoModel(tiny_config(num_output_representations=2)).save_pretrained(tmp_path / "base")
    with_mixes = model.state_dict() | {"elmo.scalar_mixes.0.gamma": torch.ones(1)}
    model.save_pretrained(tmp_path / "tagger", state_dict=with_mixes)
    for folder in ("base", "tagger"):
        with CaptureLogger(logging.get_logger("transformers.modeling_utils")) as captured:
            _, info = ElmoForTokenClassification.from_pretrained(tmp_path / folder, output_loading_info=True)
        assert not info["unexpected_keys"] and "scalar_mixes" not in captured.out, folder


@pytest.mark.parametrize("head", HEADS[1:])
def test_save_load_gives_same_predictions(tmp_path, head):
    model = tiny_model(seed=3, **head)
    ElmoTokenizer().save_pretrained(tmp_path)
    loaded = reloaded(model, tmp_path, AutoModelForTokenClassification)
    inputs = batch()
    torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits)
    torch.testing.assert_close(loaded(**inputs).loss, model(**inputs).loss)


def test_activation_cache_matches_the_biLM_and_skips_it(tmp_path):
    model = tiny_model(classifier_head="bilstm", use_crf=True)
    cache = ElmoActivationCache(model, tmp_path)
    assert_cache_skips_the_bilm(model, batch(), cache)

    # a new cache for the same weights finds the saved entries; another model never sees them
    path = cache.save()
    same = ElmoActivationCache(tiny_model(classifier_head="bilstm", use_crf=True), tmp_path)
    assert same.path == path and len(same.entries) == 3
    other = ElmoActivationCache(tiny_model(seed=1), tmp_path)
    assert other.fingerprint != cache.fingerprint and other.entries == {}


def test_activation_cache_keys_follow_the_tokenizer_output():
    from modeling_elmo.finetuning.activation_cache import sentence_key

    words = ["supercalifragilistic", "word"]
    long_ids = torch.tensor(ElmoTokenizer(max_characters_per_token=50)(words, is_split_into_words=True)["input_ids"])
    short_ids = torch.tensor(ElmoTokenizer(max_characters_per_token=12)(words, is_split_into_words=True)["input_ids"])
    assert sentence_key(long_ids) != sentence_key(short_ids)
    assert sentence_key(long_ids) == sentence_key(long_ids.clone())


def test_activation_cache_refuses_unfrozen_and_foreign_models():
    with pytest.raises(ValueError, match="frozen"):
        ElmoActivationCache(tiny_model(freeze_elmo=False))
    cache = ElmoActivationCache(tiny_model())
    stranger = tiny_model().eval()
    stranger.activation_cache = cache
    with pytest.raises(ValueError, match="another"):
        stranger(**batch())


def test_a_bad_label_beside_ignored_ones_is_named():
    inputs = batch()
    inputs["labels"][0, 1] = -5  # the batch also holds -100 (padding): -5 must still be found
    with pytest.raises(ValueError, match="found -5"):
        tiny_model()(**inputs)
