"""ELMoForManyLangs' `Embedder.sents2elmo` (elmoformanylangs 0.0.4, `elmo.py`) on random-weight models in its exact
folder format (tests/efml_numpy.py): every output layer against the independent NumPy transcription of its
computation; shapes, dtypes, input order, word truncation, determinism, the stateful opt-in, converted folders."""

import numpy as np
import pytest
import torch
from efml_numpy import NON_LATIN_WORDS, efml_numpy_layers, small_architecture, write_efml_model

from modeling_elmo.conversion.convert_command import main as convert_main
from modeling_elmo.elmoformanylangs import Embedder, efml_batches
from modeling_elmo.lstm_states import ElmoLstmStates

TOLERANCE = 1e-5
WIDTH = 12  # 2 * projection_dim of small_architecture
SENTENCES = [
    ["北京", "大学", "日本語", "中文"],
    ["привет", "мир", "приветмирпривет"],  # the last word is longer than max_characters_per_token - 2 = 7
    ["اللغة", "العربية", "café", "北京大学北京大学北京"],  # a long word whose cut form is not in the word lexicon
    ["xyz", "😀", "北🙂京", "Привет", "<bos>"],  # characters missing from the lexicon, a case it lacks, a marker
    ["мир"],
]


@pytest.fixture(scope="module", params=["word-embedding", "characters-only"])
def source(request, tmp_path_factory):
    words = NON_LATIN_WORDS if request.param == "word-embedding" else None
    return write_efml_model(tmp_path_factory.mktemp(request.param) / "efml", words=words)


@pytest.fixture(scope="module")
def embedder(source) -> Embedder:
    return Embedder(str(source))


@pytest.fixture(scope="module")
def expected(source) -> list[np.ndarray]:
    return [efml_numpy_layers(source, sentence) for sentence in SENTENCES]


def test_every_output_layer_matches_the_numpy_transcription(embedder, expected):
    for output_layer in (-2, -1, 0, 1, 2):
        found = embedder.sents2elmo(SENTENCES, output_layer=output_layer)
        assert len(found) == len(SENTENCES)
        for sentence, array, layers in zip(SENTENCES, found, expected, strict=True):
            want = {-2: layers, -1: layers.mean(axis=0)}.get(output_layer, layers[output_layer])
            shape = (3, len(sentence), WIDTH) if output_layer == -2 else (len(sentence), WIDTH)
            assert isinstance(array, np.ndarray) and array.dtype == np.float32 and array.shape == shape
            assert np.abs(layers).max() > 0.5  # not trivially small
            assert np.abs(array - want).max() <= TOLERANCE


def test_default_output_layer_is_the_mean(embedder):
    default, mean = embedder.sents2elmo(SENTENCES[:2]), embedder.sents2elmo(SENTENCES[:2], output_layer=-1)
    assert all(np.array_equal(a, b) for a, b in zip(default, mean, strict=True))


def test_outputs_follow_the_input_order_whatever_the_batches(embedder, expected):
    """Sentences of different lengths are batched sorted by length; the arrays come back in input order, the same for
    any batch size (every sentence from zero states)."""
    order = [3, 0, 4, 2, 1]
    for batch_size in (1, 2, 64):
        embedder.batch_size = batch_size
        found = embedder.sents2elmo([SENTENCES[i] for i in order], output_layer=-2)
        for array, i in zip(found, order, strict=True):
            assert np.abs(array - expected[i]).max() <= TOLERANCE
    embedder.batch_size = 64


def test_words_are_cut_to_max_characters_minus_two(embedder):
    """max_characters_per_token is 9: a word is cut to 7 characters before its characters and word id are read."""
    cut, longer, shorter = embedder.sents2elmo(
        [["мир", "приветм"], ["мир", "приветмирпривет"], ["мир", "привет"]], output_layer=-2
    )
    assert np.array_equal(cut, longer)
    assert np.abs(cut - shorter).max() > 1e-3
    known, known_longer = embedder.sents2elmo([["العربية"], ["العربيةxyz"]], output_layer=-2)
    assert np.array_equal(known, known_longer)  # the cut form's word id: a lexicon word of 7 characters


def test_every_call_starts_from_zero_states(embedder, expected):
    first = embedder.sents2elmo(SENTENCES, output_layer=-2)
    second = embedder.sents2elmo(SENTENCES, output_layer=-2)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    alone = embedder.sents2elmo([SENTENCES[2]], output_layer=-2)[0]  # the same vectors alone as among others
    assert np.abs(alone - expected[2]).max() <= TOLERANCE


def test_an_empty_sentence_gives_an_empty_array_and_changes_nothing_else(embedder):
    with_empty = embedder.sents2elmo([SENTENCES[0], [], SENTENCES[1]], output_layer=-2)
    without = embedder.sents2elmo([SENTENCES[0], SENTENCES[1]], output_layer=-2)
    assert with_empty[1].shape == (3, 0, WIDTH) and with_empty[1].dtype == np.float32
    assert np.array_equal(with_empty[0], without[0]) and np.array_equal(with_empty[2], without[1])
    for output_layer in (-1, 0, 2):
        empty = embedder.sents2elmo([[]], output_layer=output_layer)[0]
        assert empty.shape == (0, WIDTH) and empty.dtype == np.float32
    assert embedder.sents2elmo([]) == []


def test_efml_batches_sort_by_length_keep_ties_in_input_order_and_do_not_shuffle():
    assert efml_batches([2, 5, 3, 5, 1], 2) == [[1, 3], [2, 0], [4]]
    assert efml_batches([], 3) == []


def _layers_with_states(embedder: Embedder, sentences: list[list[str]], states: ElmoLstmStates) -> np.ndarray:
    """The biLM's layers of one batch, rows in the given order, from and into `states` (ElmoModel's own path)."""
    batch = embedder.tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        output = embedder.model.elmo(**batch, output_hidden_states=True, states=states)
    return torch.stack(output.hidden_states).numpy()


def test_stateful_carries_states_row_by_row_in_sorted_batches(source, expected):
    """stateful=True, batch_size 2: the batches are [1, 2] (length 5, then 4 by input order) and [0, 3]... sorted by
    length; batch k+1's row r starts from the final states of batch k's row r, and the next call continues."""
    sentences = [SENTENCES[4], SENTENCES[1], SENTENCES[3], SENTENCES[0]]  # lengths 1, 3, 5, 4
    embedder = Embedder(str(source), batch_size=2, stateful=True)
    first = embedder.sents2elmo(sentences, output_layer=-2)
    second = embedder.sents2elmo(sentences, output_layer=-2)

    states = ElmoLstmStates(embedder.model.elmo.config)
    reference = Embedder(str(source))
    for call in (first, second):
        for batch in ([2, 3], [1, 0]):  # the sorted batches: lengths 5, 4 then 3, 1
            layers = _layers_with_states(reference, [sentences[i] for i in batch], states)
            for row, i in enumerate(batch):
                assert np.abs(call[i] - layers[:, row, : len(sentences[i])]).max() <= TOLERANCE
    assert np.abs(first[2] - expected[3]).max() <= TOLERANCE  # the first batch of a fresh embedder: zero states
    assert np.abs(first[0] - expected[4]).max() > 1e-3  # the second batch is not
    assert np.abs(second[2] - first[2]).max() > 1e-3  # the second call continues from the first
    embedder.model.encoder.reset_states()
    again = embedder.sents2elmo(sentences, output_layer=-2)
    assert all(np.array_equal(a, b) for a, b in zip(again, first, strict=True))


def test_the_attributes_efml_code_touches(embedder, source):
    assert embedder.batch_size == 64 and embedder.use_cuda == torch.cuda.is_available()
    assert embedder.config["token_embedder"]["max_characters_per_token"] == 9
    assert embedder.config == small_architecture(embedder.config["token_embedder"]["word_dim"])
    model, config = embedder.get_model()
    assert config == embedder.config and isinstance(model, torch.nn.Module) and not model.training
    assert model.token_embedder is model.elmo.char_encoder
    assert embedder.char_lexicon["<pad>"] == len(embedder.char_lexicon) - 3  # EFML's own ids (tests/efml_numpy.py)
    model.encoder.reset_states()  # EFML's way of forgetting the states works (and does nothing here)
    assert Embedder(source, batch_size=3).batch_size == 3  # a Path works as well as a str


def test_a_converted_folder_gives_the_same_vectors(source, embedder, tmp_path):
    arguments = ["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(tmp_path / "out")]
    assert convert_main(arguments) == 0
    converted = Embedder(str(tmp_path / "out"))
    for output_layer in (-2, -1, 1):
        ours = converted.sents2elmo(SENTENCES, output_layer=output_layer)
        theirs = embedder.sents2elmo(SENTENCES, output_layer=output_layer)
        assert all(np.abs(a - b).max() <= 1e-6 for a, b in zip(ours, theirs, strict=True))
    for section in ("token_embedder", "encoder"):
        expected = {key: value for key, value in embedder.config[section].items()}
        assert converted.config[section] == expected
    assert converted.char_lexicon == embedder.char_lexicon and converted.word_lexicon == embedder.word_lexicon
