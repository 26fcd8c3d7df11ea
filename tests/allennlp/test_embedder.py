"""AllenNLP 0.9's `ElmoEmbedder` (allennlp/commands/elmo.py): numbers on the fixture, the arrays of its methods, and
`embed_file`'s HDF5 layout in every format."""

import json
import os

import h5py
import numpy as np
import pytest

from modeling_elmo.allennlp import ConfigurationError, ElmoEmbedder


@pytest.fixture(scope="module")
def files(fixture_dir):
    return str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def sentences(fixture_dir):
    return [sentence.split() for row in json.loads((fixture_dir / "sentences.json").read_text()) for sentence in row]


def test_embed_sentences_in_the_fixture_order_reproduce_the_original(files, fixture_dir):
    rows = json.loads((fixture_dir / "sentences.json").read_text())
    ordered = [rows[k][i].split() for i in range(10) for k in range(3)]  # batch i = sentence i of each list
    found = list(ElmoEmbedder(*files).embed_sentences(ordered, batch_size=3))
    for index, array in enumerate(found):
        i, k = divmod(index, 3)
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected = np.concatenate([handle[str(i)][0], handle[str(i)][1]], axis=-1)
        assert array.shape == (3, len(ordered[index]), 32) and array.dtype == np.float32
        np.testing.assert_allclose(array[2], expected, atol=1e-6, rtol=0)


def test_empty_sentences(files, sentences):
    embedder = ElmoEmbedder(*files, stateful=False)
    empty = embedder.embed_batch([[]])[0]
    assert empty.shape == (3, 0, 1024) and empty.dtype == np.float64  # AllenNLP 0.9's, whatever the model
    arrays = embedder.embed_batch([sentences[0], [], sentences[1]])
    assert arrays[1].shape == (3, 0, 1024)
    np.testing.assert_allclose(arrays[2], embedder.embed_sentence(sentences[1]), atol=1e-5, rtol=0)


def test_an_empty_batch_leaves_the_states_alone(files, sentences):
    plain, with_empty = ElmoEmbedder(*files), ElmoEmbedder(*files)
    with_empty.embed_batch([[]])
    np.testing.assert_array_equal(with_empty.embed_sentence(sentences[0]), plain.embed_sentence(sentences[0]))


def test_batch_to_embeddings(files, sentences):
    embedder = ElmoEmbedder(*files, stateful=False)
    activations, mask = embedder.batch_to_embeddings(sentences[:2])
    width = max(len(s) for s in sentences[:2])
    assert tuple(activations.shape) == (2, 3, width, 32) and tuple(mask.shape) == (2, width)
    assert mask.sum(dim=1).tolist() == [len(s) for s in sentences[:2]]
    np.testing.assert_array_equal(
        activations[1, :, : len(sentences[1])].numpy(), embedder.embed_batch(sentences[:2])[1]
    )
    assert embedder.cuda_device == -1 and embedder.elmo_bilm.num_layers == 3


def write_corpus(path, sentences):
    path.write_text("".join(" ".join(sentence) + "\n" for sentence in sentences), encoding="utf-8")
    return path


@pytest.mark.parametrize("output_format", ["all", "top", "average"])
def test_embed_file_layout(files, sentences, tmp_path, output_format):
    corpus = write_corpus(tmp_path / "in.txt", [*sentences[:5], sentences[1]])
    output = tmp_path / "out.hdf5"
    with open(corpus, encoding="utf-8") as handle:
        ElmoEmbedder(*files).embed_file(handle, output, output_format=output_format, batch_size=2)
        assert handle.closed
    expected = list(ElmoEmbedder(*files).embed_sentences([*sentences[:5], sentences[1]], batch_size=2))
    with h5py.File(output, "r") as result:
        assert sorted(result) == ["0", "1", "2", "3", "4", "5", "sentence_to_index"]
        index = result["sentence_to_index"]
        assert index.shape == (1,) and h5py.check_string_dtype(index.dtype) is not None
        sentence_to_index = json.loads(index[0])
        assert sentence_to_index == {" ".join(s): str(i) for i, s in enumerate(sentences[:5])} | {
            " ".join(sentences[1]): "5"
        }
        for key, array in enumerate(expected):
            dataset = result[str(key)]
            assert dataset.dtype == np.float32
            wanted = {"all": array, "top": array[-1], "average": np.average(array, axis=0)}[output_format]
            np.testing.assert_array_equal(dataset[...], wanted)


def test_embed_file_keys_and_forgetting(files, sentences, tmp_path):
    corpus = write_corpus(tmp_path / "in.txt", sentences[:3])
    ElmoEmbedder(*files).embed_file(str(corpus), tmp_path / "keys.hdf5", use_sentence_keys=True)
    with h5py.File(tmp_path / "keys.hdf5", "r") as result:
        assert sorted(result) == sorted(" ".join(s) for s in sentences[:3])
    ElmoEmbedder(*files).embed_file(str(corpus), tmp_path / "forget.hdf5", forget_sentences=True)
    with h5py.File(tmp_path / "forget.hdf5", "r") as result:
        assert sorted(result) == ["0", "1", "2"]


def test_embed_file_refuses_blank_lines_and_repeated_keys_without_writing(files, sentences, tmp_path):
    corpus = tmp_path / "in.txt"
    corpus.write_text("a b\n\nc\n   \n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"empty lines at indexes \[1, 3\]"):
        ElmoEmbedder(*files).embed_file(str(corpus), tmp_path / "out.hdf5")
    write_corpus(corpus, [sentences[0], sentences[0]])
    with pytest.raises(ConfigurationError, match="repeats a sentence"):
        ElmoEmbedder(*files).embed_file(str(corpus), tmp_path / "out.hdf5", use_sentence_keys=True)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_embed_file_gets_the_permissions_of_the_umask_and_leaves_no_temporary_file(files, sentences, tmp_path, umask):
    corpus = write_corpus(tmp_path / "in.txt", sentences[:3])
    previous = os.umask(umask)
    try:
        ElmoEmbedder(*files).embed_file(str(corpus), tmp_path / "out.hdf5")
    finally:
        os.umask(previous)
    assert (tmp_path / "out.hdf5").stat().st_mode & 0o777 == 0o666 & ~umask  # 0644 under umask 022, not 0600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt", "out.hdf5"]


def test_embed_file_into_a_missing_folder_raises_oserror_and_writes_nothing(files, sentences, tmp_path):
    corpus = write_corpus(tmp_path / "in.txt", sentences[:2])
    with pytest.raises(OSError, match="Cannot write .*out.hdf5: No such file or directory"):
        ElmoEmbedder(*files).embed_file(str(corpus), tmp_path / "missing" / "out.hdf5")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]
