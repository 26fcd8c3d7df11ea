"""The fixture biLM as the NLPL repository ships models (what simple_elmo reads): `options.json`, `model.hdf5` and a
`vocab.txt` of `<S>`, `</S>`, `<UNK>` and the fixture's words; its sentences in the order of the reference batches."""

import json
import shutil

import h5py
import numpy as np
import pytest


@pytest.fixture(scope="session")
def fixture_texts(fixture_dir) -> list[list[str]]:
    """The 30 sentences in the order bilm-tf ran them: batch i = sentence i of each of the 3 lists."""
    rows = json.loads((fixture_dir / "sentences.json").read_text(encoding="utf-8"))
    return [rows[k][i].split() for i in range(10) for k in range(3)]


@pytest.fixture(scope="session")
def reference_top(fixture_dir, fixture_texts) -> list[np.ndarray]:
    """bilm-tf's top layer (words, 32) for each of `fixture_texts`, its states carried from batch to batch by row."""
    references = []
    for index in range(len(fixture_texts)):
        batch, row = divmod(index, 3)
        with h5py.File(fixture_dir / f"lm_embeddings_{row}.hdf5", "r") as handle:
            references.append(np.concatenate([handle[str(batch)][0], handle[str(batch)][1]], axis=-1))
    return references


@pytest.fixture(scope="session")
def make_nlpl_folder(fixture_dir):
    """Factory: `folder` holding the fixture's options.json, its weights as `weights_name` and, unless None, a
    vocab.txt of the lines `vocabulary`."""

    def make(folder, weights_name="model.hdf5", vocabulary=None):
        folder.mkdir(parents=True)
        shutil.copy(fixture_dir / "options.json", folder / "options.json")
        shutil.copy(fixture_dir / "lm_weights.hdf5", folder / weights_name)
        if vocabulary is not None:
            (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
        return folder

    return make


@pytest.fixture(scope="session")
def nlpl_folder(make_nlpl_folder, fixture_texts, tmp_path_factory):
    words = list(dict.fromkeys(word for text in fixture_texts for word in text))
    folder = tmp_path_factory.mktemp("simple-elmo") / "fixture"
    return make_nlpl_folder(folder, vocabulary=["<S>", "</S>", "<UNK>", *words])
