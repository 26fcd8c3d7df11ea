"""SeqVec through `elmo run-legacy` (issue 38, items 1 and 2): a program that imports and calls what seqvec 0.4.1
and bio_embeddings' SeqVec embedder do (`from allennlp.commands.elmo import ElmoEmbedder`; `embed_batch`,
`embed_sentence`, `embed_sentences` on lists of residues) reproduces the original TensorFlow outputs of the fixture,
and, where seqvec is installed (`pip install --no-deps seqvec==0.4.1`), seqvec's own console script gives the
vectors of the same calls."""

import importlib.util
import json
import os

import h5py
import numpy as np
import pytest

from modeling_elmo.allennlp import ElmoEmbedder
from modeling_elmo.commands import run_legacy

pytestmark = pytest.mark.integration

ORIGINAL_TOLERANCE = 2e-6  # float32 outputs against the original TensorFlow code's (the project's standard)
PROTEINS = {  # seqvec reads FASTA; the fixture's characters include every amino-acid letter
    "P1": "MKTAYIAKQRQISFVKSHFSRQ",
    "P2": "MGSSHHHHHHSSGLVPRGSHMASVQKFPG",
    "P3": "ACDEFGHIKLMNPQRSTVWY",
    "P4": "MSTNPKPQRKTKRNTNRRPQDVKFPGG",
    "P5": "MAL",
}

# What seqvec (seqvec/seqvec.py) and bio_embeddings (embed/seqvec_embedder.py) import and call, on the model folder
# seqvec expects (weights.hdf5, options.json): the fixture's batches in the original's order, then residue lists.
SEQVEC_LIKE_PROGRAM = """
import json
import sys
from pathlib import Path

import numpy as np
import torch
from allennlp.commands.elmo import ElmoEmbedder

model_dir, inputs, output = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()), sys.argv[3]
embedder = ElmoEmbedder(
    weight_file=str(model_dir / "weights.hdf5"), options_file=str(model_dir / "options.json"), cuda_device=-1
)
arrays = {}
with torch.no_grad():
    for i, batch in enumerate(inputs["sentence_batches"]):
        for k, embedding in enumerate(embedder.embed_batch(batch)):
            arrays[f"sentences-{i}-{k}"] = embedding
    for k, embedding in enumerate(embedder.embed_batch([list(sequence) for sequence in inputs["proteins"]])):
        arrays[f"batch-{k}"] = embedding
    arrays["sentence"] = embedder.embed_sentence(list(inputs["proteins"][0]))
    for k, embedding in enumerate(embedder.embed_sentences([list(s) for s in inputs["proteins"]], batch_size=2)):
        arrays[f"sentences-of-2-{k}"] = embedding
np.savez(output, **arrays)
"""


@pytest.fixture(scope="module")
def seqvec_model(fixture_dir, tmp_path_factory):
    """The fixture biLM in the folder layout seqvec expects: weights.hdf5 and options.json."""
    folder = tmp_path_factory.mktemp("seqvec-model")
    (folder / "weights.hdf5").symlink_to(fixture_dir / "lm_weights.hdf5")
    (folder / "options.json").symlink_to(fixture_dir / "options.json")
    return folder


def fixture_batches(fixture_dir) -> tuple[list[list[list[str]]], list[list[np.ndarray]]]:
    """The fixture's 10 batches of 3 sentences in the order the original ran them, and the original's top layers."""
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    batches = [[groups[k][i].split() for k in range(3)] for i in range(10)]
    expected = []
    for i in range(10):
        expected.append([])
        for k in range(3):
            with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
                expected[i].append(np.concatenate(list(reference[str(i)][...]), axis=-1))
    return batches, expected


def test_a_seqvec_like_program_reproduces_the_original(seqvec_model, fixture_dir, tmp_path, capfd):
    batches, expected = fixture_batches(fixture_dir)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"sentence_batches": batches, "proteins": list(PROTEINS.values())}))
    program = tmp_path / "seqvec_like.py"
    program.write_text(SEQVEC_LIKE_PROGRAM, encoding="utf-8")
    output = tmp_path / "out.npz"
    assert run_legacy.main([str(program), str(seqvec_model), str(inputs), str(output)]) == 0, capfd.readouterr().err
    found = np.load(output)

    for i, batch in enumerate(batches):  # stateful like AllenNLP 0.9: batch i continues from batch i - 1
        for k, sentence in enumerate(batch):
            array = found[f"sentences-{i}-{k}"]
            assert array.shape == (3, len(sentence), 32) and array.dtype == np.float32
            assert np.abs(array[2] - expected[i][k]).max() <= ORIGINAL_TOLERANCE, (i, k)

    # the residue calls, continuing from the same states, equal the same calls made here in one ElmoEmbedder
    embedder = ElmoEmbedder(str(seqvec_model / "options.json"), str(seqvec_model / "weights.hdf5"))
    for batch in batches:
        embedder.embed_batch(batch)
    residues = [list(sequence) for sequence in PROTEINS.values()]
    wanted = {f"batch-{k}": array for k, array in enumerate(embedder.embed_batch(residues))}
    wanted["sentence"] = embedder.embed_sentence(residues[0])
    wanted |= {f"sentences-of-2-{k}": a for k, a in enumerate(embedder.embed_sentences(residues, batch_size=2))}
    for key, array in wanted.items():
        assert found[key].shape == array.shape and array.shape[0] == 3
        np.testing.assert_allclose(found[key], array, atol=1e-6, rtol=0, err_msg=key)


def require_seqvec() -> None:
    """Skip where seqvec is not installed; fail where the environment says it must be (ELMO_REQUIRE_SEQVEC=1)."""
    script = run_legacy.environment_scripts_folder() / "seqvec"
    if importlib.util.find_spec("seqvec") is None or not script.is_file():
        message = "seqvec is not installed here: `pip install --no-deps seqvec==0.4.1` (CI sets ELMO_REQUIRE_SEQVEC=1)"
        if os.environ.get("ELMO_REQUIRE_SEQVEC"):
            pytest.fail(message)
        pytest.skip(message)


def seqvec_batches(sequences: dict[str, str], batchsize: int) -> list[list[str]]:
    """seqvec 0.4.1's batches (`get_embeddings`): sequences sorted by length, a batch closed once its residues exceed
    `batchsize`, at a sequence longer than `batchsize / 2`, and at the last sequence."""
    batches, batch, residues = [], [], 0
    ordered = sorted(sequences, key=lambda name: len(sequences[name]))
    for index, name in enumerate(ordered):
        batch.append(name)
        residues += len(sequences[name])
        if residues > batchsize or len(sequences[name]) > batchsize / 2 or index == len(ordered) - 1:
            batches.append(batch)
            batch, residues = [], 0
    return batches


def test_seqvecs_own_command_runs_unchanged(seqvec_model, tmp_path, capfd):
    """`elmo run-legacy seqvec ...` writes seqvec's file: per protein its three layers side by side (`--layer all`),
    the vectors of seqvec's stateful batches through one ElmoEmbedder."""
    require_seqvec()
    fasta = tmp_path / "proteins.fasta"
    fasta.write_text("".join(f">{name}\n{sequence}\n" for name, sequence in PROTEINS.items()))
    output = tmp_path / "proteins.npz"
    arguments = ["-i", str(fasta), "-o", str(output), "--model", str(seqvec_model), "--cpu", "--id", "-1"]
    assert run_legacy.main(["seqvec", *arguments, "--layer", "all", "--batchsize", "40"]) == 0, capfd.readouterr()
    found = np.load(output)
    batches = seqvec_batches(PROTEINS, 40)
    assert len(batches) == 3 and sorted(found) == sorted(PROTEINS)
    embedder = ElmoEmbedder(str(seqvec_model / "options.json"), str(seqvec_model / "weights.hdf5"))
    for batch in batches:
        for name, layers in zip(batch, embedder.embed_batch([list(PROTEINS[name]) for name in batch]), strict=True):
            assert found[name].shape == (len(PROTEINS[name]), 96) and found[name].dtype == np.float32
            np.testing.assert_allclose(found[name], np.concatenate(layers, axis=1), atol=1e-6, rtol=0, err_msg=name)


def test_seqvecs_help_is_seqvecs(capfd):
    require_seqvec()
    assert run_legacy.main(["seqvec", "--help"]) == 0
    shown = capfd.readouterr().out
    assert shown.startswith("usage: seqvec") and "--batchsize" in shown and "elmo-run-legacy" not in shown
