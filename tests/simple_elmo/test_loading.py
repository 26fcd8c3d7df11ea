"""`ElmoModel.load` on the layouts simple_elmo reads (folder, ZIP, `vocab.txt[.gz]`, another `*.hdf5` name), a
converted folder, the vocabulary's `limit` rule, the pre-0.6 `top=`, and every refusal: one line naming the file or
argument."""

import gzip
import json
import warnings
import zipfile

import h5py
import numpy as np
import pytest
from original_numpy import BOS, EOS, _token_embeddings

from modeling_elmo.simple_elmo import ElmoModel, SimpleElmoError

TEXTS = [["The", "bank", "closed", "."], ["River", "bank"], ["Ünïcödé", "x" * 70], [], ["<UNK>"]]


def vectors_of(location, texts=TEXTS, **load_arguments) -> np.ndarray:
    model = ElmoModel()
    model.load(location, **load_arguments)
    return model.get_elmo_vectors(texts, layers="all")


@pytest.fixture(scope="module")
def folder_vectors(nlpl_folder):
    return vectors_of(nlpl_folder, max_batch_size=2)


def test_attributes_after_load(nlpl_folder):
    model = ElmoModel()
    assert model.bilm is None
    model.load(nlpl_folder, max_batch_size=7)
    assert (model.batch_size, model.max_chars, model.vector_size, model.n_layers) == (7, 50, 32, 3)
    assert not model.bilm.training


def test_a_zip_archive_gives_the_folder_numbers(nlpl_folder, folder_vectors, tmp_path):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("options.json", "model.hdf5", "vocab.txt"):
            zipped.write(nlpl_folder / name, name)
    np.testing.assert_array_equal(vectors_of(archive, max_batch_size=2), folder_vectors)


def test_another_weights_name_without_a_vocabulary(make_nlpl_folder, folder_vectors, tmp_path):
    folder = make_nlpl_folder(tmp_path / "no-vocab", weights_name="elmo_weights.hdf5")
    np.testing.assert_array_equal(vectors_of(folder, max_batch_size=2), folder_vectors)


def test_a_converted_folder_gives_the_same_numbers(converted_fixture, folder_vectors):
    np.testing.assert_array_equal(vectors_of(converted_fixture, max_batch_size=2), folder_vectors)


def layer_0(location, word, **load_arguments) -> np.ndarray:
    return vectors_of(location, [[word]], **load_arguments)[0, 0, 0, :16]


def original_word(fixture_dir, word) -> np.ndarray:
    """The original CNN of one word (a str read as bytes, or one sentence-boundary character)."""
    options = json.loads((fixture_dir / "options.json").read_text())
    with h5py.File(fixture_dir / "lm_weights.hdf5", "r") as weights:
        return _token_embeddings(weights, options, [word])[0]


@pytest.fixture(scope="module")
def late_boundaries(make_nlpl_folder, tmp_path_factory):
    """A model whose gzipped vocabulary has <S> second and </S> fourth (after a skipped !!!MAXTERMID line)."""
    folder = make_nlpl_folder(tmp_path_factory.mktemp("late") / "model")
    with gzip.open(folder / "vocab.txt.gz", "wt", encoding="utf-8") as vocabulary:
        vocabulary.write("the\n<S>\nbank\n!!!MAXTERMID\n</S>\n<UNK>\n")
    (folder / "vocab.txt").write_text("unused\n", encoding="utf-8")  # vocab.txt.gz comes first
    return folder


@pytest.mark.parametrize(
    "limit, word, reads_as",
    [
        (None, "<S>", BOS),  # every word cached: the boundaries are where they belong
        (0, "</S>", EOS),  # a limit below 1 caches every word too
        (None, "bank", "bank"),
        (3, "bank", EOS),  # </S> not among the first 3 words: the last cached word reads as </S>
        (3, "</S>", "</S>"),  # ... and the token </S> as its four bytes
        (2, "<S>", EOS),  # <S> is the last cached word and </S> is not cached
        (4, "bank", "bank"),
        (1, "<S>", "<S>"),
    ],
)
def test_limit_decides_which_words_read_as_sentence_boundaries(late_boundaries, fixture_dir, limit, word, reads_as):
    np.testing.assert_allclose(
        layer_0(late_boundaries, word, limit=limit), original_word(fixture_dir, reads_as), atol=1e-5
    )


def test_the_pre_06_top_argument(nlpl_folder, folder_vectors):
    model = ElmoModel()
    with pytest.warns(FutureWarning, match=r"top=True.*layers='top'"):
        model.load(nlpl_folder, max_batch_size=2, top=True)
    np.testing.assert_array_equal(model.get_elmo_vectors(TEXTS), folder_vectors[:, 2])
    np.testing.assert_allclose(model.get_elmo_vectors(TEXTS, layers="average"), folder_vectors.mean(axis=1), atol=1e-6)
    with pytest.warns(FutureWarning, match=r"top=False"):
        model.load(nlpl_folder, max_batch_size=2, top=False)
    np.testing.assert_array_equal(model.get_elmo_vectors(TEXTS, layers="top"), folder_vectors[:, 2])
    np.testing.assert_allclose(model.get_elmo_vectors(TEXTS), folder_vectors.mean(axis=1), atol=1e-6)


def test_the_substitutes_need_a_tensorflow_checkpoint(nlpl_folder):
    model = ElmoModel()
    with pytest.raises(NotImplementedError, match="softmax"):
        model.load(nlpl_folder, full=True)
    model.load(nlpl_folder)
    with pytest.raises(NotImplementedError, match="get_elmo_substitutes needs a TensorFlow"):
        model.get_elmo_substitutes(TEXTS)


def refusal(location, **load_arguments) -> str:
    with pytest.raises(SimpleElmoError) as caught:
        ElmoModel().load(location, **load_arguments)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_bad_model_locations(nlpl_folder, make_nlpl_folder, tmp_path):
    assert "no such folder or ZIP archive" in refusal(tmp_path / "missing")
    assert "no such folder or ZIP archive, nor a Hub model" in refusal("no-such-org/no-such-model")  # offline
    no_options = tmp_path / "no-options"
    no_options.mkdir()
    (no_options / "model.hdf5").write_bytes((nlpl_folder / "model.hdf5").read_bytes())
    assert "options.json" in refusal(no_options)
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "options.json").write_bytes((nlpl_folder / "options.json").read_bytes())
    assert "model.hdf5" in refusal(no_weights)
    archive = tmp_path / "no-weights.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(nlpl_folder / "options.json", "options.json")
        zipped.write(nlpl_folder / "vocab.txt", "vocab.txt")
    message = refusal(archive)
    assert str(archive) in message and "model.hdf5" in message
    not_a_zip = tmp_path / "model.tar"
    not_a_zip.write_bytes(b"x")
    assert "not a .zip archive" in refusal(not_a_zip)
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"not a zip")
    assert "not a readable ZIP archive" in refusal(broken)


def test_bad_vocabularies(make_nlpl_folder, tmp_path):
    latin1 = make_nlpl_folder(tmp_path / "latin1")
    (latin1 / "vocab.txt").write_bytes("<S>\n</S>\ncaf\xe9\n".encode("latin-1"))
    message = refusal(latin1)
    assert message.startswith(f"{latin1}: vocab.txt:") and "UTF-8" in message
    empty = make_nlpl_folder(tmp_path / "empty")
    (empty / "vocab.txt").write_text("", encoding="utf-8")
    assert "holds no word" in refusal(empty)


@pytest.mark.parametrize(
    "arguments, named",
    [
        ({"max_batch_size": 0}, "max_batch_size must be an int >= 1"),
        ({"max_batch_size": True}, "top as the second argument"),
        ({"max_batch_size": 2.0}, "max_batch_size"),
        ({"limit": "100"}, "limit must be an int"),
        ({"stateful": 1}, "stateful must be True or False"),
        ({"top": "yes"}, "top must be True or False"),
    ],
)
def test_bad_load_arguments(nlpl_folder, arguments, named):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert named in refusal(nlpl_folder, **arguments)


@pytest.fixture(scope="module")
def model(nlpl_folder):
    model = ElmoModel()
    model.load(nlpl_folder, max_batch_size=2)
    return model


@pytest.mark.parametrize(
    "texts, named",
    [
        (
            "The bank closed .",
            "texts must be a list of texts, each a list of tokens (e.g. [sentence.split()]), got a str",
        ),
        (["The", "bank"], "texts[0] is a str, not a list of tokens (simple_elmo would read each character as a word)"),
        ([["The"], "bank"], "texts[1] is a str"),
        ([["The", 3]], "texts[0][1] must be a str token, got int"),
        ([], "texts is empty"),
        (None, "got NoneType"),
        ([np.array(["a"])], "texts[0] must be a list of str tokens, got ndarray"),
    ],
)
@pytest.mark.parametrize("method", ["get_elmo_vectors", "get_elmo_vector_average"])
def test_bad_texts(model, method, texts, named):
    with pytest.raises(SimpleElmoError) as caught:
        getattr(model, method)(texts)
    assert named in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "arguments, named",
    [
        ({"layers": "bottom"}, "layers must be one of 'average', 'top', 'all', got 'bottom'"),
        ({"layers": 2}, "layers must be one of"),
        ({"warmup": "no"}, "warmup must be True or False"),
        ({"session": object()}, "session= takes a TensorFlow session"),
    ],
)
@pytest.mark.parametrize("method", ["get_elmo_vectors", "get_elmo_vector_average"])
def test_bad_call_arguments(model, method, arguments, named):
    with pytest.raises(SimpleElmoError, match=named.replace("(", r"\(")):
        getattr(model, method)(TEXTS, **arguments)


def test_calls_before_load():
    with pytest.raises(SimpleElmoError, match=r"call load\(directory\) first"):
        ElmoModel().get_elmo_vectors(TEXTS)
