"""The behaviour AllenNLP's own ELMo tests check (tests/modules/elmo_test.py and
tests/modules/token_embedders/elmo_token_embedder_test.py of allenai/allennlp 2.10.1), written for
`modeling_elmo.allennlp` against the same fixture files (outputs of the original TensorFlow biLM)."""

import json

import h5py
import numpy as np
import pytest
import torch

from modeling_elmo.allennlp import (
    Elmo,
    ElmoTokenEmbedder,
    _ElmoBiLm,
    _ElmoCharacterEncoder,
    batch_to_ids,
    remove_sentence_boundaries,
)

SENTENCES = [["The", "sentence", "."], ["ELMo", "helps", "disambiguate", "ELMo", "from", "Elmo", "."]]


@pytest.fixture(scope="module")
def files(fixture_dir):
    return str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def fixture_batches(fixture_dir):
    """The fixture's 10 batches of 3 sentences in its order (batch i = sentence i of each list) and, per batch, the
    original's top layer of each sentence (n_words, 32)."""
    sentences = json.loads((fixture_dir / "sentences.json").read_text())
    expected = []
    for k in range(len(sentences)):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected.append([np.concatenate([handle[str(i)][0], handle[str(i)][1]], axis=-1) for i in range(10)])
    return [([sentences[k][i].split() for k in range(3)], [expected[k][i] for k in range(3)]) for i in range(10)]


def top_layer_errors(bilm, fixture_batches):
    """Run the fixture's batches in order through `bilm`; per batch, the largest error of the top layer."""
    errors = []
    for batch, expected in fixture_batches:
        output = bilm(batch_to_ids(batch))
        top, mask = remove_sentence_boundaries(output["activations"][-1], output["mask"])
        assert mask.sum(dim=1).tolist() == [len(sentence) for sentence in batch]
        errors.append(
            max(float(np.abs(top[k, : len(batch[k])].detach().numpy() - expected[k]).max()) for k in range(3))
        )
    return errors


def test_elmo_bilm_is_stateful_like_the_original(files, fixture_batches):
    errors = top_layer_errors(_ElmoBiLm(*files), fixture_batches)
    assert max(errors) <= 1e-6, errors


def test_stateless_bilm_matches_only_the_first_batch(files, fixture_batches):
    """The stateful test can fail: without carried states batch 0 still matches, the later ones do not."""
    errors = top_layer_errors(_ElmoBiLm(*files, stateful=False), fixture_batches)
    assert errors[0] <= 1e-6
    assert min(errors[1:]) > 1e-3, errors


def test_reset_states_starts_over(files, fixture_batches):
    bilm = _ElmoBiLm(*files)
    first = top_layer_errors(bilm, fixture_batches[:2])
    bilm._elmo_lstm.reset_states()  # the legacy spelling: `elmo._elmo_lstm._elmo_lstm.reset_states()`
    assert top_layer_errors(bilm, fixture_batches[:2]) == first


def test_stored_rows_beyond_a_smaller_batch_are_kept(files, fixture_batches):
    """AllenNLP's rule (encoder_base): row i continues from row i, and stored rows beyond a smaller batch are kept for
    later. Batch 1 of the fixture split into a 1-row call and a 3-row call still gives the original's numbers."""
    (batch0, _), (batch1, expected1) = fixture_batches[:2]
    bilm = _ElmoBiLm(*files)
    bilm(batch_to_ids(batch0))  # 3 rows of states
    output = bilm(batch_to_ids(batch1[:1]))  # row 0 continues from batch 0; rows 1, 2 keep batch 0's states
    top, _ = remove_sentence_boundaries(output["activations"][-1], output["mask"])
    np.testing.assert_allclose(top[0, : len(batch1[0])].detach().numpy(), expected1[0], atol=1e-6, rtol=0)
    output = bilm(batch_to_ids([["x"], *batch1[1:]]))  # rows 1, 2 continue from batch 0, as in the fixture
    top, _ = remove_sentence_boundaries(output["activations"][-1], output["mask"])
    for k in (1, 2):
        np.testing.assert_allclose(top[k, : len(batch1[k])].detach().numpy(), expected1[k], atol=1e-6, rtol=0)


def test_rows_beyond_the_stored_states_start_from_zero(files, fixture_batches):
    (batch0, expected0), _ = fixture_batches[:2]
    bilm = _ElmoBiLm(*files)
    bilm(batch_to_ids([["a", "b"]]))  # one row of states
    output = bilm(batch_to_ids([["a"], *batch0[1:]]))  # rows 1, 2 are new: zero states, like batch 0 of the fixture
    top, _ = remove_sentence_boundaries(output["activations"][-1], output["mask"])
    for k in (1, 2):
        np.testing.assert_allclose(top[k, : len(batch0[k])].detach().numpy(), expected0[k], atol=1e-6, rtol=0)


def test_reset_states_with_a_row_mask(files, fixture_batches):
    (batch0, expected0), (batch1, expected1) = fixture_batches[:2]
    bilm = _ElmoBiLm(*files)
    bilm(batch_to_ids(batch0))
    bilm.reset_states(torch.tensor([True, False, False]))
    output = bilm(batch_to_ids([batch0[0], *batch1[1:]]))  # row 0 starts over; rows 1, 2 go on
    top, _ = remove_sentence_boundaries(output["activations"][-1], output["mask"])
    np.testing.assert_allclose(top[0, : len(batch0[0])].detach().numpy(), expected0[0], atol=1e-6, rtol=0)
    np.testing.assert_allclose(top[1, : len(batch1[1])].detach().numpy(), expected1[1], atol=1e-6, rtol=0)


def test_activations_keep_the_sentence_boundaries(files):
    bilm = _ElmoBiLm(*files, stateful=False)
    output = bilm(batch_to_ids(SENTENCES))
    assert [tuple(layer.shape) for layer in output["activations"]] == [(2, 9, 32)] * 3
    assert output["mask"].dtype == torch.bool and output["mask"].sum(dim=1).tolist() == [5, 9]
    layer0 = output["activations"][0]
    token_embeddings = _ElmoCharacterEncoder(*files)(batch_to_ids(SENTENCES))["token_embedding"]
    expected = torch.cat([token_embeddings, token_embeddings], dim=-1) * output["mask"].unsqueeze(-1)
    torch.testing.assert_close(layer0, expected, atol=1e-6, rtol=0)
    for layer in output["activations"]:
        assert not layer[0, 5:].any()  # zero after </S>
    # the top layer without the boundaries is what the stateless HF model returns
    from modeling_elmo import ElmoModel

    hf = bilm.model(batch_to_ids(SENTENCES), output_hidden_states=True).hidden_states
    for with_boundaries, plain in zip(output["activations"], hf, strict=True):
        torch.testing.assert_close(remove_sentence_boundaries(with_boundaries, output["mask"])[0], plain)
    assert isinstance(bilm.model, ElmoModel)


def test_char_cnn_cache_gives_the_same_layers(files):
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", *sorted({word for sentence in sentences for word in sentence})]
    word_ids = torch.tensor([[vocab.index(word) for word in s] + [0] * (4 - len(s)) for s in sentences])
    no_cache = _ElmoBiLm(*files).eval()(batch_to_ids(sentences))
    cached = _ElmoBiLm(*files, vocab_to_cache=vocab).eval()(batch_to_ids(sentences), word_ids)
    assert torch.equal(no_cache["mask"], cached["mask"])
    for with_cache, without in zip(cached["activations"], no_cache["activations"], strict=True):
        np.testing.assert_array_almost_equal(with_cache.detach().numpy(), without.detach().numpy(), decimal=6)


def test_char_cnn_cache_falls_back_to_characters_for_unknown_word_ids(files):
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", "here", "is", "a", "vocab"]
    bilm = _ElmoBiLm(*files, vocab_to_cache=vocab, stateful=False)
    oov = [["This", "is", "OOV"], ["so", "is", "this"]]
    out_of_range = torch.tensor([[7, 3, 9], [8, 3, 10]])
    expected = bilm(batch_to_ids(oov))
    found = bilm(batch_to_ids(oov), out_of_range)
    for a, b in zip(found["activations"], expected["activations"], strict=True):
        torch.testing.assert_close(a, b)


@pytest.fixture(scope="module")
def elmo(files):
    return Elmo(*files, 2, dropout=0.0)


def test_elmo_shapes(elmo):
    output = elmo(batch_to_ids(SENTENCES))
    assert [tuple(r.shape) for r in output["elmo_representations"]] == [(2, 7, 32), (2, 7, 32)]
    assert tuple(output["mask"].shape) == (2, 7) and output["mask"].sum(dim=1).tolist() == [3, 7]
    assert elmo.get_output_dim() == 32


def test_elmo_keep_sentence_boundaries(files):
    output = Elmo(*files, 2, dropout=0.0, keep_sentence_boundaries=True)(batch_to_ids(SENTENCES))
    assert [tuple(r.shape) for r in output["elmo_representations"]] == [(2, 9, 32), (2, 9, 32)]
    assert tuple(output["mask"].shape) == (2, 9)


def test_elmo_4d_input_is_three_batches(files):
    groups = [
        SENTENCES,
        [["1", "2"], ["1", "2", "3", "4", "5", "6", "7"]],
        [["1", "2", "3", "4", "50", "60", "70"], ["The"]],
    ]
    ids = [batch_to_ids(group) for group in groups]
    elmo = Elmo(*files, 1, dropout=0.0)
    four_d = elmo(torch.stack(ids, dim=1))  # (2, 3, 7, 50)
    assert tuple(four_d["mask"].shape) == (2, 3, 7)
    for k, group_ids in enumerate(ids):
        elmo._elmo_lstm._elmo_lstm.reset_states()
        three_d = elmo(group_ids)["elmo_representations"][0]
        np.testing.assert_array_almost_equal(
            four_d["elmo_representations"][0][:, k].detach().numpy(), three_d.detach().numpy()
        )


def test_elmo_with_module(files):
    elmo = Elmo(None, None, 2, dropout=0.0, module=_ElmoBiLm(*files))
    output = elmo(batch_to_ids(SENTENCES))
    assert [tuple(r.shape) for r in output["elmo_representations"]] == [(2, 7, 32), (2, 7, 32)]


def test_elmo_higher_dimensional_input_with_cache(files):
    sentences = [["This", "is", "a", "sentence"], ["Here", "'s", "one"], ["Another", "one"]]
    vocab = ["@@PADDING@@", "@@UNKNOWN@@", *sorted({word for sentence in sentences for word in sentence})]
    word_ids = torch.tensor([[vocab.index(word) for word in s] + [0] * (4 - len(s)) for s in sentences])
    char_ids = batch_to_ids(sentences)
    single = Elmo(*files, 1, vocab_to_cache=vocab).eval()(char_ids, word_ids)["elmo_representations"][0]
    expanded = Elmo(*files, 1, vocab_to_cache=vocab).eval()(
        torch.stack([char_ids] * 4, dim=1), torch.stack([word_ids] * 4, dim=1)
    )["elmo_representations"][0]
    for k in range(4):
        np.testing.assert_array_almost_equal(expanded[:, k].detach().numpy(), single.detach().numpy())


@pytest.mark.parametrize("requires_grad", [True, False])
def test_requires_grad_freezes_only_the_bilm(files, requires_grad):
    embedder = ElmoTokenEmbedder(*files, requires_grad=requires_grad)
    char_ids = torch.from_numpy(np.random.default_rng(0).integers(1, 262, (3, 4, 50)))
    embedder(char_ids).sum().backward()
    bilm_grads = [p.grad for name, p in embedder.named_parameters() if "_elmo_lstm" in name]
    mix_grads = [p.grad for name, p in embedder.named_parameters() if "scalar_mix" in name]
    assert bilm_grads and len(mix_grads) == 4  # 3 layer weights and gamma
    assert all((grad is not None) == requires_grad for grad in bilm_grads)
    assert all(grad is not None for grad in mix_grads)


def test_fixed_scalar_mix_parameters_are_not_trainable(files):
    elmo = Elmo(*files, 1, dropout=0.0, scalar_mix_parameters=[-9e10, 1, -9e10], stateful=False)
    assert not any(p.requires_grad for name, p in elmo.named_parameters() if "scalar_mix" in name)
    output = elmo(batch_to_ids(SENTENCES))
    layers = elmo._elmo_lstm(batch_to_ids(SENTENCES))
    first_lstm_layer, _ = remove_sentence_boundaries(layers["activations"][1], layers["mask"])
    torch.testing.assert_close(output["elmo_representations"][0], first_lstm_layer)  # only layer 1 is mixed in


def test_dropout_applies_in_training_mode_only(files):
    elmo = Elmo(*files, 1, dropout=0.5, stateful=False)
    ids = batch_to_ids(SENTENCES)
    elmo.eval()
    reference = elmo(ids)["elmo_representations"][0]
    elmo.train()
    dropped = elmo(ids)["elmo_representations"][0]
    kept = dropped != 0
    assert 0 < kept[ids.ne(0).any(-1)].float().mean() < 1
    torch.testing.assert_close(dropped[kept], 2 * reference[kept])


def test_layer_norm_uses_the_batch_statistics(files):
    elmo = Elmo(*files, 1, dropout=0.0, do_layer_norm=True, keep_sentence_boundaries=True, stateful=False)
    output = elmo(batch_to_ids(SENTENCES))
    layers = elmo._elmo_lstm(batch_to_ids(SENTENCES))
    mask = layers["mask"].unsqueeze(-1)
    expected = 0
    for layer in layers["activations"]:  # equal weights 1/3, gamma 1; mean/variance over every unmasked element
        values = layer[mask.expand_as(layer)]
        expected = expected + (layer - values.mean()) / torch.sqrt(values.var(unbiased=False) + 1e-13) / 3
    torch.testing.assert_close(output["elmo_representations"][0], expected, atol=1e-5, rtol=1e-5)


def test_token_embedder_projection_and_4d_input(files):
    word1, word2 = [6, 5, 4, 3] + [0] * 46, [3, 2, 1, 0] + [0] * 46
    embedder = ElmoTokenEmbedder(*files, projection_dim=20)
    assert embedder.get_output_dim() == 20
    assert tuple(embedder(torch.tensor([[word1, word2]])).shape) == (1, 2, 20)
    assert tuple(embedder(torch.tensor([[[word1]]])).shape) == (1, 1, 1, 20)


def test_character_encoder_matches_the_original_token_embeddings(files, fixture_dir):
    words = (fixture_dir / "vocab_test.txt").read_text().strip().split("\n")
    batch = batch_to_ids([words[k * 50 : (k + 1) * 50] for k in range(10)])
    output = _ElmoCharacterEncoder(*files)(batch)
    found = remove_sentence_boundaries(output["token_embedding"], output["mask"])[0].reshape(-1, 16)
    with h5py.File(fixture_dir / "elmo_token_embeddings.hdf5", "r") as handle:
        expected = handle["embedding"][...]
    np.testing.assert_allclose(found[: len(words)].detach().numpy(), expected, atol=1e-6, rtol=0)


def test_character_encoder_boundary_tokens(files):
    encoder = _ElmoCharacterEncoder(*files)
    for position, token in [(0, "<S>"), (2, "</S>")]:
        embeddings = encoder(batch_to_ids([[token]]))["token_embedding"]
        torch.testing.assert_close(embeddings[0, position], embeddings[0, 1])
