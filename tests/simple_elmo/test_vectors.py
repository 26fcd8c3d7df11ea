"""simple_elmo's documented numbers on the fixture: LSTM states carried across the `max_batch_size` chunks of a call
(bilm-tf's reference outputs), every call from zero states, warm-up, the padding of layer 0, the layer choices and
`get_elmo_vector_average`'s average over the padded length (its reshape for "all" included)."""

import json

import h5py
import numpy as np
import pytest
from original_numpy import original_layers

from modeling_elmo.simple_elmo import ElmoModel

TEXTS_OF_DIFFERENT_LENGTHS = [["a", "b", "c"], ["d"], ["e"], ["f", "g"], ["h", "i"]]  # chunks of 2: longest 3, 2, 2


def loaded(folder, **kwargs) -> ElmoModel:
    model = ElmoModel()
    assert model.load(folder, **kwargs) == "The model is now loaded."
    return model


@pytest.fixture(scope="module")
def model_of_3(nlpl_folder):
    return loaded(nlpl_folder, max_batch_size=3)


@pytest.fixture(scope="module")
def model_of_2(nlpl_folder):
    return loaded(nlpl_folder, max_batch_size=2)


@pytest.mark.parametrize("count", [30, 29])  # 29: the last chunk has 2 texts, which continue rows 0 and 1
def test_states_carried_across_chunks_reproduce_bilm_tf(model_of_3, fixture_texts, reference_top, count):
    vectors = model_of_3.get_elmo_vectors(fixture_texts[:count], warmup=False, layers="top")
    longest = max(len(text) for text in fixture_texts[:count])
    assert vectors.shape == (count, longest, 32) and vectors.dtype == np.float64
    for index, text in enumerate(fixture_texts[:count]):
        np.testing.assert_allclose(vectors[index, : len(text)], reference_top[index], atol=2e-6, rtol=0)
        assert not vectors[index, len(text) :].any()  # the top layer is zero after a text


def test_every_call_starts_from_zero_states(model_of_3, fixture_texts, reference_top):
    first = model_of_3.get_elmo_vectors(fixture_texts, warmup=False, layers="all")
    np.testing.assert_array_equal(model_of_3.get_elmo_vectors(fixture_texts, warmup=False, layers="all"), first)
    later_batch = fixture_texts[15:18]  # batch 5 alone: from zero states, unlike in the reference run
    alone = model_of_3.get_elmo_vectors(later_batch, warmup=False, layers="top")
    assert np.abs(alone[0, : len(later_batch[0])] - reference_top[15]).max() > 1e-2


def test_stateless_rows_equal_the_original_computation_per_sentence(nlpl_folder, fixture_dir, fixture_texts):
    model = loaded(nlpl_folder, max_batch_size=3, stateful=False)
    texts = fixture_texts[:6]
    vectors = model.get_elmo_vectors(texts, warmup=True, layers="all")
    for index, text in enumerate(texts):
        expected = original_layers(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5", text)
        np.testing.assert_allclose(vectors[index, :, : len(text)], expected, atol=2e-6, rtol=0)


def test_warmup_runs_the_first_chunk_once_and_discards_it(model_of_3, fixture_texts, reference_top):
    texts = fixture_texts[:12]
    warmed = model_of_3.get_elmo_vectors(texts, warmup=True, layers="all")
    by_hand = model_of_3.get_elmo_vectors(texts[:3] + texts, warmup=False, layers="all")[3:]
    np.testing.assert_array_equal(warmed, by_hand)
    assert np.abs(warmed[0, 2, : len(texts[0])] - reference_top[0]).max() > 1e-2  # batch 0 no longer from zero


def padded_word_embedding(fixture_dir) -> np.ndarray:
    """bilm-tf's character CNN on a padded word (all character ids 0, whose embedding is zero): every convolution
    gives its bias, then the activation, the highway layers and the projection."""
    options = json.loads((fixture_dir / "options.json").read_text())["char_cnn"]
    with h5py.File(fixture_dir / "lm_weights.hdf5", "r") as weights:
        hidden = np.concatenate([weights[f"CNN/b_cnn_{i}"][...] for i in range(len(options["filters"]))])
        hidden = np.maximum(hidden, 0.0)  # relu
        for index in range(options["n_highway"]):
            group = weights[f"CNN_high_{index}"]
            gate = 1 / (1 + np.exp(-(hidden @ group["W_carry"][...] + group["b_carry"][...])))
            hidden = (
                gate * np.maximum(hidden @ group["W_transform"][...] + group["b_transform"][...], 0)
                + (1 - gate) * hidden
            )
        projected = hidden @ weights["CNN_proj/W_proj"][...] + weights["CNN_proj/b_proj"][...]
    return np.concatenate([projected, projected])


def test_padding_inside_a_chunk_and_beyond_it(model_of_2, fixture_dir):
    vectors = model_of_2.get_elmo_vectors(TEXTS_OF_DIFFERENT_LENGTHS, warmup=False, layers="all")
    assert vectors.shape == (5, 3, 3, 32)
    padded_word = padded_word_embedding(fixture_dir)
    np.testing.assert_allclose(vectors[1, 0, 1:3], [padded_word] * 2, atol=1e-6)  # chunk 0 is 3 words long
    np.testing.assert_allclose(vectors[2, 0, 1], padded_word, atol=1e-6)  # chunk 1 is 2 words long
    assert not vectors[2, :, 2].any() and not vectors[3, :, 2].any()  # beyond chunk 1's longest text: zeros
    assert not vectors[1, 1:, 1:].any() and not vectors[2, 1:, 1:].any()  # the LSTM layers are zero at padding
    assert not vectors[4, :, 2].any()  # the last chunk, of one text of 2 words


def test_layer_choices(model_of_2, fixture_dir, fixture_texts):
    texts = fixture_texts[:5]
    every_layer = model_of_2.get_elmo_vectors(texts, layers="all")
    np.testing.assert_array_equal(model_of_2.get_elmo_vectors(texts, layers="top"), every_layer[:, 2])
    average = model_of_2.get_elmo_vectors(texts)  # simple_elmo's default: "average", a plain mean
    assert average.shape == every_layer[:, 0].shape and average.dtype == np.float64
    np.testing.assert_allclose(average, every_layer.mean(axis=1), atol=1e-6, rtol=0)
    with h5py.File(fixture_dir / "elmo_token_embeddings.hdf5", "r") as handle:  # the CNN of the original
        table = handle["embedding"][...]
    vocabulary = (fixture_dir / "vocab_test.txt").read_text(encoding="utf-8").splitlines()
    row, word = next((row, word) for row, word in enumerate(vocabulary) if word == texts[0][0])
    np.testing.assert_allclose(every_layer[0, 0, 0], np.concatenate([table[row], table[row]]), atol=1e-6)


def chunk_means(vectors: np.ndarray, chunk_size: int, chunk_lengths: list[int]) -> np.ndarray:
    """Each text's vectors summed over its chunk's padded length and divided by it."""
    rows = [vectors[index, ..., : chunk_lengths[index // chunk_size], :] for index in range(len(vectors))]
    return np.stack([row.sum(axis=-2) / row.shape[-2] for row in rows])


@pytest.mark.parametrize("layers", ["average", "top"])
def test_vector_average_is_the_normalised_mean_over_the_chunk_length(model_of_2, layers):
    vectors = model_of_2.get_elmo_vectors(TEXTS_OF_DIFFERENT_LENGTHS, layers=layers)
    means = chunk_means(vectors, 2, [3, 2, 2])
    averages = model_of_2.get_elmo_vector_average(TEXTS_OF_DIFFERENT_LENGTHS, layers=layers)
    assert averages.shape == (5, 32) and averages.dtype == np.float64
    np.testing.assert_allclose(averages, means / np.linalg.norm(means, axis=1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(averages, axis=1), 1.0, atol=1e-12)
    own_words = vectors[1, :1].sum(axis=0)  # the one word of text 1, without its chunk's padding
    padding_counts = layers == "average"  # layer 0's padded positions are not zero
    assert (np.abs(averages[1] - own_words / np.linalg.norm(own_words)).max() > 1e-3) == padding_counts


def test_vector_average_of_all_layers_reshapes_rather_than_transposes(model_of_2):
    every_layer = model_of_2.get_elmo_vectors(TEXTS_OF_DIFFERENT_LENGTHS, layers="all")  # (5, 3, 3, 32)
    averages = model_of_2.get_elmo_vector_average(TEXTS_OF_DIFFERENT_LENGTHS, layers="all")
    assert averages.shape == (5, 3, 32) and averages.dtype == np.float64
    for index, (chunk_start, chunk_length) in enumerate([(0, 3), (0, 3), (2, 2), (2, 2), (4, 2)]):
        chunk = every_layer[chunk_start : chunk_start + 2, :, :chunk_length]
        reshaped = chunk.reshape(len(chunk), chunk_length, 3, 32)[index - chunk_start]  # simple_elmo's reshape
        mean = reshaped.sum(axis=0) / chunk_length
        np.testing.assert_allclose(averages[index], mean / np.linalg.norm(mean), atol=1e-12)
        transposed = chunk.transpose(0, 2, 1, 3)[index - chunk_start].mean(axis=0)
        assert np.abs(averages[index] - transposed / np.linalg.norm(transposed)).max() > 1e-3


def test_empty_texts(model_of_2, fixture_dir):
    texts = [[], ["a"], [], []]  # the second chunk has no word at all
    vectors = model_of_2.get_elmo_vectors(texts, layers="all")
    assert vectors.shape == (4, 3, 1, 32)
    np.testing.assert_allclose(vectors[0, 0, 0], padded_word_embedding(fixture_dir), atol=1e-6)
    assert not vectors[0, 1:].any() and not vectors[2:].any()
    with pytest.warns(RuntimeWarning, match=r"texts\[0\] .* NaN"):
        top = model_of_2.get_elmo_vector_average(texts, layers="top")
    assert np.isnan(top[[0, 2, 3]]).all() and np.isfinite(top[1]).all()
    with pytest.warns(RuntimeWarning, match=r"texts\[2\]"):
        average = model_of_2.get_elmo_vector_average(texts)  # layer 0's padding makes text 0's average finite
    assert np.isfinite(average[:2]).all() and np.isnan(average[2:]).all()


def test_a_model_with_three_lstm_layers(random_checkpoint):
    options, weights = random_checkpoint(n_layers=3)
    model = loaded(options.parent, max_batch_size=2, stateful=False)  # its only *.hdf5 is lm_weights.hdf5
    texts = [["a", "b"], ["c"], ["d", "e", "f"]]
    vectors = model.get_elmo_vectors(texts, layers="all")
    assert (model.n_layers, model.vector_size) == (4, vectors.shape[-1]) and vectors.shape[:3] == (3, 4, 3)
    for index, text in enumerate(texts):
        np.testing.assert_allclose(vectors[index, :, : len(text)], original_layers(options, weights, text), atol=2e-6)
    assert model.get_elmo_vector_average(texts, layers="all").shape == (3, 4, vectors.shape[-1])
