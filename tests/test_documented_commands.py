"""Every command and code block of README.md and docs/*.md does what its text says.

A ```bash or ```python block is preceded by `<!-- doc-test: ID -->` (it runs) or `<!-- doc-test: skip (reason) -->`
(it cannot run offline: URLs, the Hub). Each runnable ID has one entry in DOC_COMMANDS: `prepare` writes the tiny
inputs the block's text names into a sandbox laid out like a reader's checkout (the work folder, `../shared` beside
it), the block's text runs there exactly as written (bash; a Python block as a script of its own, in a fresh
interpreter), and `check` verifies the effect the text promises (a folder that loads, a perplexity below chance, a
file or a value with the stated shape), not only the exit status; a Python block's check reads the values the block
left in its global names (`block_values`). Blocks that repeat one command in several pages share its ID and run once.
To document a new command: mark its block, then add its ID here with a `prepare` and a `check`.
"""

import ast
import importlib.util
import itertools
import json
import os
import re
import shutil
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from doc_commands import RUNNABLE_LANGUAGES, Block, all_blocks, make_sandbox, python_namespace_path, run_block
from shared_paths import REPO_ROOT, require_shared
from transformers import (
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    pipeline,
)

import modeling_elmo
from modeling_elmo import ElmoForPreTraining, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoModel
from modeling_elmo.conversion.convert import convert_checkpoint
from modeling_elmo.pretraining.options import PretrainingOptions
from modeling_elmo.transformers_compat import IS_TRANSFORMERS_5

ORIGINAL_TOLERANCE = 2e-6  # float32 outputs against the original TensorFlow code's (the project's standard)
QUANTIZED_FIXTURE_TOLERANCE = 0.1  # max abs error of a quantized fixture model against float32 (docs/speed.md)


@dataclass(frozen=True)
class Sandbox:
    """Where a block runs and what its `prepare` may copy from."""

    work: Path  # the folder the block runs in (the repository's examples/, conversion/, benchmarks/ linked in)
    shared: Path  # `../shared` seen from `work`: fixtures/ linked to the real ones; data/ for tiny data sets
    fixture_dir: Path  # the real reference fixtures (read only)
    converted_fixture: Path  # the fixture biLM converted once per session (copy it; never write into it)


@dataclass(frozen=True)
class DocCommand:
    """A runnable block's inputs and its promised effect."""

    prepare: Callable[[Sandbox], None]
    check: Callable[[Sandbox, str], None]  # (sandbox, the command's stdout + stderr); asserts the effect
    follows: str | None = None  # run in the sandbox left by this ID's block, right after it (its outputs as inputs)
    runnable_part: Callable[[str], str] = lambda text: text  # the part of the text that can run offline
    # "transformers-4", "flair", "ray", "pyspark", "seqvec", "clients" (the extra): runs only where that is installed
    # (CI jobs that have it)
    needs: str | None = None


# --- inputs -------------------------------------------------------------------------------------------------------


def nothing(sandbox: Sandbox) -> None:
    """The block needs only what every sandbox has."""


def copy_converted_fixture(sandbox: Sandbox, name: str = "elmo-fixture") -> None:
    shutil.copytree(sandbox.converted_fixture, sandbox.work / name)


def fixture_sentences(fixture_dir: Path) -> list[list[str]]:
    """The first sentence of each of the fixture's three lists: the original's batch 0, which starts from zero
    states, so a stateless model reproduces its outputs."""
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    return [group[0].split() for group in groups]


def write_sentences(sandbox: Sandbox) -> None:
    copy_converted_fixture(sandbox)
    text = "\n".join(" ".join(words) for words in fixture_sentences(sandbox.fixture_dir))
    (sandbox.work / "sentences.txt").write_text(text + "\n", encoding="utf-8")


def write_fixture_in_batch_order(sandbox: Sandbox) -> None:
    """The fixture's 30 sentences in the order its batches of 3 ran (batch i = sentence i of each list)."""
    groups = json.loads((sandbox.fixture_dir / "sentences.json").read_text())
    lines = [groups[k][i] for i in range(len(groups[0])) for k in range(len(groups))]
    (sandbox.work / "sentences.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_tiny_conll_splits(sandbox: Sandbox, sentences_per_split: int = 12) -> None:
    """The first sentences of each CoNLL-2003 split under `../shared/data/conll2003`."""
    conll = require_shared("data/conll2003")
    target = sandbox.shared / "data" / "conll2003"
    target.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        sentences = conll.joinpath(f"{split}.txt").read_text(encoding="utf-8").strip().split("\n\n")
        target.joinpath(f"{split}.txt").write_text("\n\n".join(sentences[:sentences_per_split]) + "\n")


def write_tiny_conll(sandbox: Sandbox) -> None:
    """`elmo-original` (the fixture biLM stands in for the 'original' model) and the first sentences of each
    CoNLL-2003 split under `../shared/data/conll2003`."""
    copy_converted_fixture(sandbox, "elmo-original")
    write_tiny_conll_splits(sandbox)


def write_tiny_corpus(sandbox: Sandbox) -> None:
    """Two training shards and a held-out shard of a toy grammar: few words, some far more frequent than others, so
    that a few hundred steps of a tiny biLM get clearly below chance."""
    subjects, verbs, objects = (
        ["the cat", "the dog", "a bird"],
        ["sat on", "looked at"],
        ["the mat", "the dog", "a tree"],
    )
    sentences = [f"{s} {v} {o} ." for s, v, o in itertools.product(subjects, verbs, objects)]
    for folder, shards in (("corpus", [sentences * 4, sentences * 4]), ("heldout", [sentences[::3]])):
        (sandbox.work / folder).mkdir()
        for index, shard in enumerate(shards):
            (sandbox.work / folder / f"part-{index}.txt").write_text("\n".join(shard) + "\n", encoding="utf-8")


def copy_fixture_as_original(sandbox: Sandbox) -> None:
    """The fixture biLM stands in for `elmo-original` (the converted 'original' model)."""
    copy_converted_fixture(sandbox, "elmo-original")


PROTEINS = {"P00001": "MKTAYIAKQRQISFVKSHFSRQ", "P00002": "MALWMRLLPLLALLALWGPDPAAA"}


def write_proteins(sandbox: Sandbox) -> None:
    """Two proteins in FASTA, UniProt-style headers (seqvec keys them by the header's second field)."""
    fasta = "".join(
        f">sp|{name}|PROTEIN_{index}\n{sequence[:20]}\n{sequence[20:]}\n"
        for index, (name, sequence) in enumerate(PROTEINS.items())
    )
    (sandbox.work / "proteins.fasta").write_text(fasta, encoding="utf-8")


# --- effects ------------------------------------------------------------------------------------------------------


def assert_reproduces_original(model_dir: Path, fixture_dir: Path) -> None:
    """The folder loads with the Auto classes and its top layer equals the original TensorFlow outputs."""
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    assert isinstance(model, ElmoModel)
    sentences = fixture_sentences(fixture_dir)
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.inference_mode():
        top = model(**batch).last_hidden_state.numpy()
    for k, words in enumerate(sentences):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected = np.concatenate(list(handle["0"][...]), axis=-1)
        assert np.abs(top[k, : len(words)] - expected).max() <= ORIGINAL_TOLERANCE  # NaN fails


def after_install(text: str) -> str:
    """The quick start from its first command after `pip install` on: the virtual environment and the install need
    the network and are this test's own environment; CI's .ci/run performs that install from the project's files."""
    commands = text.strip().split(" && ")
    installs = [index for index, command in enumerate(commands) if command.startswith("pip install")]
    assert installs, "the quick start no longer installs the project"
    return " && ".join(commands[installs[-1] + 1 :]) + "\n"


def check_quickstart(sandbox: Sandbox, output: str) -> None:
    assert_reproduces_original(sandbox.work / "elmo-fixture", sandbox.fixture_dir)
    assert "words: ['The', 'bank', 'closed', 'its', 'doors', '.']" in output
    for layer in range(3):
        assert f"layer {layer}: shape (1, 6, 32)" in output


def check_convert_fixture(sandbox: Sandbox, output: str) -> None:
    assert_reproduces_original(sandbox.work / "elmo-fixture", sandbox.fixture_dir)
    assert "Verification: max abs difference" in output


def same_datasets(first: Path, second: Path) -> bool:
    """Whether two HDF5 files hold the same dataset names, dtypes and values, bit for bit."""
    with h5py.File(first, "r") as a, h5py.File(second, "r") as b:
        names_a, names_b = [], []
        a.visititems(lambda name, item: names_a.append(name) if isinstance(item, h5py.Dataset) else None)
        b.visititems(lambda name, item: names_b.append(name) if isinstance(item, h5py.Dataset) else None)
        return sorted(names_a) == sorted(names_b) and all(
            a[name].dtype == b[name].dtype and np.array_equal(a[name][...], b[name][...]) for name in names_a
        )


def check_export_fixture(sandbox: Sandbox, output: str) -> None:
    exported = sandbox.work / "elmo-fixture-original"
    assert same_datasets(exported / "lm_weights.hdf5", sandbox.fixture_dir / "lm_weights.hdf5")
    options = json.loads((exported / "options.json").read_text())
    original = json.loads((sandbox.fixture_dir / "options.json").read_text())
    assert options["lstm"] == original["lstm"] and options["char_cnn"]["filters"] == original["char_cnn"]["filters"]


def check_embed_fixture(sandbox: Sandbox, output: str) -> None:
    sentences = fixture_sentences(sandbox.fixture_dir)
    with h5py.File(sandbox.work / "sentences.hdf5", "r") as handle:
        index = json.loads(handle["sentence_to_index"][0])
        assert index == {" ".join(words): str(line) for line, words in enumerate(sentences)}
        for k, words in enumerate(sentences):
            layers = handle[str(k)][...]
            assert layers.shape == (3, len(words), 32) and layers.dtype == np.float32
            with h5py.File(sandbox.fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
                expected = np.concatenate(list(reference["0"][...]), axis=-1)
            assert np.abs(layers[2] - expected).max() <= ORIGINAL_TOLERANCE


def check_embed_quantized(sandbox: Sandbox, output: str) -> None:
    """Every line's layers, recorded as int8, near the exact model's (the fixture's outputs reach about 7)."""
    model_dir = sandbox.work / "elmo-fixture"
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    with h5py.File(sandbox.work / "sentences-int8.hdf5", "r") as handle:
        assert json.loads(handle.attrs["elmo_embed_run"])["quantization"] == "int8"
        errors = []
        for k, words in enumerate(fixture_sentences(sandbox.fixture_dir)):
            with torch.inference_mode():
                encoded = tokenizer([words], is_split_into_words=True, return_tensors="pt")
                exact = torch.stack(model(**encoded, output_hidden_states=True).hidden_states)[:, 0].numpy()
            assert handle[str(k)].shape == exact.shape == (3, len(words), 32)
            errors.append(np.abs(handle[str(k)][...] - exact).max())
    assert 0 < max(errors) <= QUANTIZED_FIXTURE_TOLERANCE, max(errors)


def check_allennlp_drop_in(sandbox: Sandbox, output: str) -> None:
    """The printed shapes, and every line's top layer equal to the original's: the stateful batches of 3 of the
    fixture, carried from batch to batch."""
    assert "[(2, 4, 32), (2, 4, 32)]" in output
    groups = json.loads((sandbox.fixture_dir / "sentences.json").read_text())
    with h5py.File(sandbox.work / "sentences.hdf5", "r") as handle:
        assert len(json.loads(handle["sentence_to_index"][0])) == 30
        for line in range(30):
            i, k = divmod(line, 3)
            with h5py.File(sandbox.fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
                expected = np.concatenate(list(reference[str(i)][...]), axis=-1)
            layers = handle[str(line)][...]
            assert layers.shape == (3, len(groups[k][i].split()), 32) and layers.dtype == np.float32
            assert np.abs(layers[2] - expected).max() <= ORIGINAL_TOLERANCE


def check_onnx_fixture(sandbox: Sandbox, output: str) -> None:
    import onnxruntime

    model_dir = sandbox.work / "elmo-fixture"
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    sentences = [["The", "bank", "closed", "its", "doors", "."], ["River", "bank"]]
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    session = onnxruntime.InferenceSession(str(sandbox.work / "elmo-fixture.onnx"))
    feeds = {name: batch[name].numpy().astype(np.int64) for name in ("input_ids", "attention_mask")}
    (hidden_states,) = session.run(["hidden_states"], feeds)
    with torch.inference_mode():
        expected = torch.stack(model(**batch, output_hidden_states=True).hidden_states, dim=1).numpy()
    assert hidden_states.shape == expected.shape == (2, 3, 6, 32)
    assert np.abs(hidden_states - expected).max() <= 1e-5


def check_ecosystem_transformers4(sandbox: Sandbox, output: str) -> None:
    (line,) = [line for line in output.splitlines() if line.endswith(" torch.Size([1, 4, 32])")]
    assert line.startswith("4.")


def check_ecosystem_flair(sandbox: Sandbox, output: str) -> None:
    lines = output.splitlines()
    assert "ELMoEmbeddings [(96,), (96,)]" in lines and "TransformerWordEmbeddings [(96,), (96,)]" in lines


def check_ecosystem_sentence_transformers(sandbox: Sandbox, output: str) -> None:
    assert "(1, 32)" in output.splitlines()


def check_ecosystem_onnxruntime(sandbox: Sandbox, output: str) -> None:
    prefix = "max abs difference from SentenceTransformer: "
    (line,) = [line for line in output.splitlines() if line.startswith(prefix)]
    assert float(line.removeprefix(prefix)) <= 1e-5


def environment_lacks(needs: str | None) -> str | None:
    """Why this environment cannot run a block that `needs` something (None: it can)."""
    if needs == "transformers-4" and IS_TRANSFORMERS_5:
        return "runs under Transformers 4.x (CI's 4.x job)"
    if needs == "seqvec" and importlib.util.find_spec("seqvec") is None and not os.environ.get("ELMO_REQUIRE_SEQVEC"):
        return "runs where seqvec is installed (`pip install --no-deps seqvec==0.4.1`; CI sets ELMO_REQUIRE_SEQVEC=1)"
    if needs == "flair" and importlib.util.find_spec("flair") is None and not os.environ.get("ELMO_REQUIRE_FLAIR"):
        return "runs where flair is installed (CI's flair job)"
    if needs in ("ray", "pyspark") and importlib.util.find_spec(needs) is None:
        if not os.environ.get("ELMO_REQUIRE_SCALE_OUT"):
            return f"runs where {needs} is installed (CI's scale-out job, .[ray,spark])"
    if needs == "clients" and not all(importlib.util.find_spec(name) for name in ("langchain_openai", "chromadb")):
        return "runs where langchain-openai and chromadb are installed (the clients extra; CI's wheel job)"
    if needs == "pyspark" and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if not os.environ.get("ELMO_REQUIRE_SCALE_OUT"):
            return "Spark needs Java: java is not on PATH and JAVA_HOME is unset"
    return None


def assert_top_layer_table(table, sandbox: Sandbox, per_word: bool = True) -> None:
    """Each line of `sentences.txt` once; per word, its top layer equal to the original's (the fixture's batch 0,
    which starts from zero states); pooled, the mean of those vectors."""
    sentences = fixture_sentences(sandbox.fixture_dir)
    rows = dict(zip(table.column("id").to_pylist(), table.column("embedding").to_pylist(), strict=True))
    assert sorted(rows) == list(range(len(sentences))), sorted(rows)
    for k in range(len(sentences)):
        with h5py.File(sandbox.fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
            expected = np.concatenate(list(reference["0"][...]), axis=-1)
        found = np.array(rows[k], np.float32)
        if not per_word:
            found, expected = found[None], expected.mean(axis=0, keepdims=True)
        assert found.shape == expected.shape and np.abs(found - expected).max() <= ORIGINAL_TOLERANCE


def check_scale_out_ray(sandbox: Sandbox, output: str) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(sandbox.work / "vectors-ray")
    assert table.schema.field("embedding").type.value_type.list_size == 32  # fixed-size lists kept
    assert_top_layer_table(table, sandbox)


def check_scale_out_ray_cluster(sandbox: Sandbox, output: str) -> None:
    import pyarrow.parquet as pq

    assert_top_layer_table(pq.read_table(sandbox.work / "vectors-cluster"), sandbox)


def check_scale_out_spark(sandbox: Sandbox, output: str) -> None:
    import pyarrow.parquet as pq

    assert_top_layer_table(pq.read_table(sandbox.work / "vectors-spark"), sandbox)
    assert_top_layer_table(pq.read_table(sandbox.work / "vectors-spark-mean"), sandbox, per_word=False)


def check_scale_out_datasets(sandbox: Sandbox, output: str) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(sandbox.work / "vectors-datasets.parquet")
    assert table.schema.field("embedding").type.value_type.list_size == 32
    assert_top_layer_table(table, sandbox)


def check_ner(sandbox: Sandbox, output: str) -> None:
    out = sandbox.work / "ner-out"
    model = AutoModelForTokenClassification.from_pretrained(out)
    assert isinstance(model, ElmoForTokenClassification)
    assert model.config.classifier_head == "bilstm" and model.config.use_crf
    for split in ("dev", "test"):
        results = json.loads((out / f"{split}_results.json").read_text())
        assert 0.0 <= results[f"{split}_f1"] <= 1.0, results
    assert "micro avg" in (out / "test_report.txt").read_text()
    state = json.loads((out / "trainer_state.json").read_text())
    evaluations = [entry for entry in state["log_history"] if "eval_loss" in entry]
    assert len(evaluations) == 10 and evaluations[-1]["eval_loss"] < evaluations[0]["eval_loss"]  # it trained
    assert state["best_model_checkpoint"] is not None
    assert "f1" in (out / "README.md").read_text().lower()
    tagger = pipeline("token-classification", model=str(out), aggregation_strategy="simple", trust_remote_code=True)
    text = "EU rejects German call to boycott British lamb ."
    entities = tagger(text)
    assert all(text[entity["start"] : entity["end"]] == entity["word"] for entity in entities)  # exact offsets


def check_pretrain_corpus(sandbox: Sandbox, output: str) -> None:
    """Each split's sentences, one a line, words only (each token line's first column), in the data set's order."""
    for folder, split in (("corpus", "train"), ("heldout", "dev")):
        assert sorted(path.name for path in (sandbox.work / folder).iterdir()) == [f"conll2003-{split}.txt"]
        blocks = (sandbox.shared / "data" / "conll2003" / f"{split}.txt").read_text().strip().split("\n\n")
        expected = [" ".join(line.split()[0] for line in block.splitlines()) for block in blocks]
        assert len(expected) == 12 and len(expected[0].split()) > 1
        assert (sandbox.work / folder / f"conll2003-{split}.txt").read_text() == "\n".join(expected) + "\n"


def check_release_version(sandbox: Sandbox, output: str) -> None:
    """The package's version, alone on its line (the tag and the loop of docs/releasing.md use it)."""
    assert output.strip() == modeling_elmo.__version__


def check_pretrain_vocab(sandbox: Sandbox, output: str) -> None:
    counts = Counter(word for path in (sandbox.work / "corpus").glob("*.txt") for word in path.read_text().split())
    vocab = (sandbox.work / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:3] == ["<S>", "</S>", "<UNK>"] and sorted(vocab[3:]) == sorted(counts)
    assert [counts[word] for word in vocab[3:]] == sorted(counts.values(), reverse=True)
    assert f"n_tokens_vocab to {len(vocab)}" in output


# The keys of the options that bilm-tf's bin/train_elmo.py trains with (its sections' keys as values).
BILM_TF_OPTIONS = {
    "bidirectional": (),
    "char_cnn": ("activation", "embedding", "filters", "max_characters_per_token", "n_characters", "n_highway"),
    "dropout": (),
    "lstm": ("cell_clip", "dim", "n_layers", "proj_clip", "projection_dim", "use_skip_connections"),
    "all_clip_norm_val": (),
    "n_epochs": (),
    "n_train_tokens": (),
    "batch_size": (),
    "n_tokens_vocab": (),
    "unroll_steps": (),
    "n_negative_samples_batch": (),
}


def check_pretrain_options(sandbox: Sandbox, output: str) -> None:
    """A complete bilm-tf training options file: every key of bilm-tf's bin/train_elmo.py but the optional
    `n_train_tokens`, sized to the vocabulary the previous block built, which elmo-pretrain's reader accepts."""
    options = json.loads((sandbox.work / "options.json").read_text())
    assert set(options) == set(BILM_TF_OPTIONS) - {"n_train_tokens"}
    for section in ("char_cnn", "lstm"):
        assert set(options[section]) == set(BILM_TF_OPTIONS[section])
    vocab_size = len((sandbox.work / "vocab.txt").read_text(encoding="utf-8").splitlines())
    assert PretrainingOptions.from_dict(options, "options.json").n_tokens_vocab == vocab_size


def check_pretrain(sandbox: Sandbox, output: str) -> None:
    out = sandbox.work / "my-elmo"
    vocab_size = len((sandbox.work / "vocab.txt").read_text().splitlines())
    assert isinstance(AutoModel.from_pretrained(out), ElmoModel)
    assert isinstance(AutoModelForPreTraining.from_pretrained(out), ElmoForPreTraining)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] > 0
    results = json.loads((out / "eval_results.json").read_text())
    # An untrained biLM is at chance (about the vocabulary size); a few hundred steps get clearly below it.
    assert results["eval_perplexity"] < 0.7 * vocab_size, results
    assert (out / "vocab.txt").read_text() == (sandbox.work / "vocab.txt").read_text()


def check_pretrain_export(sandbox: Sandbox, output: str) -> None:
    exported = sandbox.work / "my-elmo-original"
    trained = AutoModelForPreTraining.from_pretrained(sandbox.work / "my-elmo")
    with h5py.File(exported / "softmax.hdf5", "r") as handle:
        assert np.array_equal(handle["W"][...], trained.softmax.weight.detach().numpy())
        assert np.array_equal(handle["b"][...], trained.softmax.bias.detach().numpy())
    assert (exported / "vocab.txt").read_text() == (sandbox.work / "vocab.txt").read_text()
    options = json.loads((exported / "options.json").read_text())
    trained_options = json.loads((sandbox.work / "options.json").read_text())
    assert trained_options["lstm"].items() <= options["lstm"].items()  # the same LSTM, as bilm-tf reads it
    assert options["n_tokens_vocab"] == trained.config.lm_vocab_size
    # bilm-tf's files hold the same biLM: converting them back gives every trained weight bit for bit
    convert_checkpoint(str(exported / "options.json"), str(exported / "lm_weights.hdf5"), sandbox.work / "back")
    state = AutoModel.from_pretrained(sandbox.work / "back").state_dict()
    assert all(torch.equal(value, state[name]) for name, value in trained.elmo.state_dict().items())


def check_embed_sentences(sandbox: Sandbox, output: str) -> None:
    """One top-layer vector per line, the mean of the words' vectors."""
    model_dir = sandbox.work / "elmo-fixture"
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    with h5py.File(sandbox.work / "sentence-vectors.hdf5", "r") as handle:
        for k, words in enumerate(fixture_sentences(sandbox.fixture_dir)):
            with torch.inference_mode():
                top = model(**tokenizer([words], is_split_into_words=True, return_tensors="pt")).last_hidden_state
            assert handle[str(k)].shape == (32,)
            assert np.abs(handle[str(k)][...] - top[0].mean(dim=0).numpy()).max() <= 1e-6


def _fixture_top_layers(sandbox: Sandbox) -> list[np.ndarray]:
    """The original code's top layer of each line of `sentences.txt` (the fixture's references), (words, 32)."""
    expected = []
    for k in range(len(fixture_sentences(sandbox.fixture_dir))):
        with h5py.File(sandbox.fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
            expected.append(np.concatenate(list(reference["0"][...]), axis=-1))
    return expected


def _parquet_rows(folder: Path):
    import pyarrow.dataset as ds

    return ds.dataset(folder, format="parquet").to_table().sort_by("id")


def check_embed_parquet(sandbox: Sandbox, output: str) -> None:
    """One row per line, ids in line order, the top layer equal to the original code's."""
    table = _parquet_rows(sandbox.work / "sentence-vectors")
    assert table["id"].to_pylist() == [0, 1, 2] and table.column_names[:2] == ["id", "num_words"]
    for row, expected in enumerate(_fixture_top_layers(sandbox)):
        assert table["num_words"][row].as_py() == len(expected)
        assert np.abs(np.array(table["layer_2"][row].as_py(), np.float32) - expected).max() <= ORIGINAL_TOLERANCE


def check_embed_parquet_read(sandbox: Sandbox, output: str) -> None:
    top = block_values(sandbox)["top"]
    for values, expected in zip(top, _fixture_top_layers(sandbox), strict=True):
        assert np.abs(np.array(values, np.float32) - expected).max() <= ORIGINAL_TOLERANCE


def check_embed_to_parquet(sandbox: Sandbox, output: str) -> None:
    """The converted folder holds the HDF5 file's values bit for bit, in line order."""
    table = _parquet_rows(sandbox.work / "sentences-from-hdf5")
    with h5py.File(sandbox.work / "sentences.hdf5", "r") as handle:
        assert table["id"].to_pylist() == list(range(len(handle) - 1))
        for row in range(len(handle) - 1):
            layers = np.stack([np.array(table[f"layer_{k}"][row].as_py(), np.float32) for k in range(3)])
            assert layers.tobytes() == handle[str(row)][...].tobytes()


def write_two_machines(sandbox: Sandbox) -> None:
    """Two "machines": the folders machine-0 and machine-1, each with its own sentences.txt and model copy."""
    write_sentences(sandbox)
    for machine in ("machine-0", "machine-1"):
        (sandbox.work / machine).mkdir()
        shutil.copytree(sandbox.work / "elmo-fixture", sandbox.work / machine / "elmo-fixture")
        shutil.copy(sandbox.work / "sentences.txt", sandbox.work / machine / "sentences.txt")


def check_embed_two_machines(sandbox: Sandbox, output: str) -> None:
    """Each machine embedded its own window; the merged file holds every line, equal to the original code's."""
    for machine, lines in (("machine-0", ["0", "1"]), ("machine-1", ["2"])):
        with h5py.File(next((sandbox.work / machine).glob("out.shard-*.hdf5")), "r") as shard:
            assert sorted(name for name in shard if name != "sentence_to_index") == lines
    with h5py.File(sandbox.work / "out.hdf5", "r") as handle:
        assert json.loads(handle.attrs["elmo_embed_run"])["world"] == 1
        for line, expected in enumerate(_fixture_top_layers(sandbox)):
            assert np.abs(handle[str(line)][2] - expected).max() <= ORIGINAL_TOLERANCE


def check_embed_two_machines_parquet(sandbox: Sandbox, output: str) -> None:
    """The merged folder: the two machines' parts, every line once; the same values as the merged HDF5 file."""
    assert sorted(path.name for path in (sandbox.work / "vectors").glob("*.parquet")) == [
        "part-00000000.parquet",
        "part-00000001.parquet",
    ]
    table = _parquet_rows(sandbox.work / "vectors")
    assert table["id"].to_pylist() == [0, 1, 2]
    with h5py.File(sandbox.work / "out.hdf5", "r") as handle:
        for row in range(3):
            assert np.array(table["layer_2"][row].as_py(), np.float32).tobytes() == handle[str(row)][2].tobytes()


def write_efml_folder(sandbox: Sandbox) -> None:
    """A random-weight model in ELMoForManyLangs' exact format, named as its simplified-Chinese release."""
    from efml_numpy import write_efml_model

    write_efml_model(sandbox.work / "zhs.model")


def check_efml_convert(sandbox: Sandbox, output: str) -> None:
    from efml_numpy import NON_LATIN_WORDS, efml_numpy_layers

    folder = sandbox.work / "elmo-zhs"
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder)
    sentence = NON_LATIN_WORDS[:4]
    with torch.inference_mode():
        hidden = model(
            **tokenizer([sentence], is_split_into_words=True, return_tensors="pt"), output_hidden_states=True
        )
    layers = torch.stack(hidden.hidden_states, dim=1)[0].numpy()
    assert np.abs(layers - efml_numpy_layers(sandbox.work / "zhs.model", sentence)).max() <= 1e-5
    (figure,) = re.findall(r"Verification: max abs difference .* = (\S+)", output)
    assert float(figure) <= 1e-5
    assert "language: zh" in (folder / "README.md").read_text()


def check_nlpl_tiny_zip(sandbox: Sandbox, output: str) -> None:
    with zipfile.ZipFile(sandbox.work / "tiny-nlpl.zip") as archive:
        assert sorted(archive.namelist()) == ["lm_weights.hdf5", "meta.json", "options.json", "vocab.txt"]


def check_nlpl_convert(sandbox: Sandbox, output: str) -> None:
    folder, original = sandbox.work / "tiny-nlpl-converted", sandbox.work / "tiny-original"
    convert_checkpoint(str(original / "options.json"), str(original / "lm_weights.hdf5"), sandbox.work / "direct")
    converted, direct = (
        AutoModel.from_pretrained(folder).state_dict(),
        AutoModel.from_pretrained(sandbox.work / "direct"),
    )
    assert all(torch.equal(value, converted[name]) for name, value in direct.state_dict().items())
    assert (folder / "vocab.txt").read_text() == (original / "vocab.txt").read_text()
    assert "language: nb" in (folder / "README.md").read_text()
    (figure,) = re.findall(r"Verification: max abs difference .* = (\S+)", output)
    assert float(figure) <= 1e-5


def check_nlpl_vocabulary_cache(sandbox: Sandbox, output: str) -> None:
    assert "5 words cached" in output


def check_publish_batch(sandbox: Sandbox, output: str) -> None:
    assert "Converted 2 of 2" in output
    for name, language in (("210", "nb"), ("ru", "ru")):
        folder = sandbox.work / "published" / name
        assert isinstance(AutoModel.from_pretrained(folder), ElmoModel)
        assert f"language: {language}" in (folder / "README.md").read_text()


def check_seqcls_tiny_pair_model(sandbox: Sandbox, output: str) -> None:
    folder = sandbox.work / "elmo-nli-tiny"
    config = json.loads((folder / "config.json").read_text())
    assert config["classifier_sentence_pairs"] is True
    assert config["auto_map"]["AutoModelForSequenceClassification"].endswith("ElmoForSequenceClassification")
    assert isinstance(AutoModelForSequenceClassification.from_pretrained(folder), ElmoForSequenceClassification)


def printed_values(output: str) -> list:
    """The Python values a block printed, in order (lines that start a dict or a list of them: the logs of the
    Trainer too; progress bars and load reports are left out)."""
    return [ast.literal_eval(line) for line in output.splitlines() if line.startswith(("{", "[{", "[["))]


def check_seqcls_pipeline_pairs(sandbox: Sandbox, output: str) -> None:
    """The printed label is the model's own argmax for that pair; top_k=None gives every label, summing to 1."""
    folder = sandbox.work / "elmo-nli-tiny"
    first, second = printed_values(output)[-2:]
    tokenizer, model = (
        AutoTokenizer.from_pretrained(folder),
        AutoModelForSequenceClassification.from_pretrained(folder),
    )
    with torch.inference_mode():
        logits = model(**tokenizer("A man plays a guitar.", "Someone makes music.", return_tensors="pt")).logits[0]
    assert first["label"] == model.config.id2label[int(logits.argmax())]
    assert abs(first["score"] - float(logits.softmax(-1).max())) <= 1e-5
    assert sorted(entry["label"] for entry in second[0]) == ["contradiction", "entailment", "neutral"]
    assert abs(sum(entry["score"] for entry in second[0]) - 1) <= 1e-5


def check_train_classifier_tiny_model(sandbox: Sandbox, output: str) -> None:
    assert_reproduces_original(sandbox.work / "elmo-doc" / "tiny", sandbox.fixture_dir)


def check_train_classifier_single(sandbox: Sandbox, output: str) -> None:
    """Scores, a card, and predictions with the label names that the saved (best) model makes."""
    out = sandbox.work / "elmo-doc" / "single"
    assert 0.0 <= json.loads((out / "eval_results.json").read_text())["eval_accuracy"] <= 1.0
    assert (out / "README.md").is_file()
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "neg", 1: "pos"}
    rows = (out / "predict_results.txt").read_text().strip().splitlines()
    predicted = [row.split("\t")[1] for row in rows[1:]]
    texts = [json.loads(line)["sentence"] for line in (sandbox.work / "elmo-doc" / "train.jsonl").open()]
    classify = pipeline("text-classification", model=str(out))
    assert predicted == [result["label"] for result in classify(texts)]


def check_train_classifier_pair(sandbox: Sandbox, output: str) -> None:
    out = sandbox.work / "elmo-doc" / "pair"
    assert AutoModelForSequenceClassification.from_pretrained(out).config.classifier_sentence_pairs
    printed = printed_values(output)[-1]
    assert printed["label"] in ("entailment", "contradiction")


def check_train_classifier_bad_input(sandbox: Sandbox, output: str) -> None:
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "'text'" in errors[0] and "sentence" in errors[0], output
    assert "exit status 2" in output
    assert not (sandbox.work / "elmo-doc" / "bad").exists()


def link_sst(sandbox: Sandbox) -> None:
    (sandbox.shared / "data").mkdir(exist_ok=True)
    (sandbox.shared / "data" / "sst").symlink_to(require_shared("data/sst"))


def check_train_classifier_prepare_sst(sandbox: Sandbox, output: str) -> None:
    folder = sandbox.work / "elmo-doc" / "sst2"
    counts = {
        split: len((folder / f"{split}.jsonl").read_text().splitlines()) for split in ("train", "validation", "test")
    }
    assert counts == {"train": 6920, "validation": 872, "test": 1821}  # the SST README's SST-2 sentence counts


def write_tiny_sst(sandbox: Sandbox) -> None:
    """`elmo-fixture` and a few PTB-style SST trees per split under `../shared/data/sst` (labels 0-4, 2 neutral)."""
    copy_converted_fixture(sandbox)
    trees = [
        "(4 (3 (2 A) (4 lovely)) (3 film))",
        "(0 (2 A) (0 (0 dreadful) (2 mess)))",
        "(3 (2 Quite) (3 good))",
        "(1 (2 Rather) (1 dull))",
        "(2 (2 It) (2 exists))",
    ]
    target = sandbox.shared / "data" / "sst"
    target.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (target / f"{split}.txt").write_text("\n".join(trees) + "\n", encoding="utf-8")


def check_train_classifier_sst2(sandbox: Sandbox, output: str) -> None:
    assert len((sandbox.work / "sst2" / "train.jsonl").read_text().splitlines()) == 4  # the neutral tree dropped
    out = sandbox.work / "sst2-model"
    assert 0.0 <= json.loads((out / "eval_results.json").read_text())["eval_accuracy"] <= 1.0
    assert AutoModelForSequenceClassification.from_pretrained(out).config.num_labels == 2


def block_values(sandbox: Sandbox) -> dict:
    """The tensors and plain values that the Python block just run left in its global names."""
    return torch.load(python_namespace_path(sandbox.work), weights_only=False)


def check_states_python(sandbox: Sandbox, output: str) -> None:
    """The second batch's top layer continues the first batch's states: equal to a stateful model's output on the
    same two batches, different from a stateless call."""
    values = block_values(sandbox)
    model_dir = sandbox.work / "elmo-fixture"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    stateless, stateful = AutoModel.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir, stateful=True)
    batches = [[["The", "bank", "closed"], ["River", "bank"]], [["It", "opened", "again"]]]
    with torch.inference_mode():
        for words in batches:
            batch = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
            carried = stateful(**batch).last_hidden_state
        fresh = stateless(**batch).last_hidden_state
    torch.testing.assert_close(values["top"], carried, rtol=0, atol=ORIGINAL_TOLERANCE)
    assert not torch.allclose(values["top"], fresh)


def check_model_python(sandbox: Sandbox, output: str) -> None:
    """Hidden states as described: the char-CNN layer then each biLM layer, (batch, words, 2 * projection_dim),
    padding positions zero, and each sentence's rows those it gets alone."""
    values = block_values(sandbox)
    hidden_states, words = values["out"]["hidden_states"], [["The", "bank", "closed"], ["River", "bank"]]
    assert len(hidden_states) == 3 and all(layer.shape == (2, 3, 32) for layer in hidden_states)
    assert torch.equal(values["out"]["last_hidden_state"], hidden_states[-1])
    assert torch.count_nonzero(hidden_states[-1][1, 2]) == 0
    model_dir = sandbox.work / "elmo-fixture"
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    for row, sentence in enumerate(words):
        with torch.inference_mode():
            alone = model(**tokenizer([sentence], is_split_into_words=True, return_tensors="pt"))
        found = hidden_states[-1][row, : len(sentence)]
        torch.testing.assert_close(found, alone.last_hidden_state[0], rtol=0, atol=1e-6)


def check_quantized_loading(sandbox: Sandbox, output: str) -> None:
    """The int8 model's top layer within docs/speed.md's tolerance of the float32 one, and the saved folder loads
    back quantized to the same bits."""
    from modeling_elmo.quantization.quantized_layer import ElmoQuantizedLstmLayer

    values = block_values(sandbox)
    model_dir = sandbox.work / "elmo-fixture"
    batch = AutoTokenizer.from_pretrained(model_dir)(
        [["The", "bank", "closed"]], is_split_into_words=True, return_tensors="pt"
    )
    saved = AutoModel.from_pretrained(sandbox.work / "elmo-fixture-int8")
    assert (
        isinstance(saved.bilm.layers[0], ElmoQuantizedLstmLayer) and saved.config.quantization_config.method == "int8"
    )
    with torch.inference_mode():
        exact, again = AutoModel.from_pretrained(model_dir)(**batch), saved(**batch)
    assert torch.equal(values["top"], again.last_hidden_state)
    assert 0 < (values["top"] - exact.last_hidden_state).abs().max() <= 0.1


def check_efml_python(sandbox: Sandbox, output: str) -> None:
    """The three layers of ELMoForManyLangs' own computation (its Embedder's `output_layer=-2`)."""
    from efml_numpy import efml_numpy_layers

    layers = block_values(sandbox)["layers"]
    assert layers.shape[:3] == (1, 3, 3)
    expected = efml_numpy_layers(sandbox.work / "zhs.model", ["今天", "天气", "真好"])
    assert np.abs(layers[0].numpy() - expected).max() <= 1e-5


def check_efml_model(sandbox: Sandbox, output: str) -> None:
    """A model folder in ELMoForManyLangs' released format, which `elmo-convert` reads and verifies."""
    from modeling_elmo.formats.efml import read_efml_model

    folder = sandbox.work / "zhs.model"
    assert {"config.json", "char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl"} <= set(os.listdir(folder))
    assert read_efml_model(folder).config.projection_dim * 2 == 12


def check_efml_drop_in(sandbox: Sandbox, output: str) -> None:
    """ELMoForManyLangs' `sents2elmo` outputs: float32 arrays in input order, each output layer as its computation."""
    from efml_numpy import efml_numpy_layers

    values = block_values(sandbox)
    for row, sentence in enumerate([["北京", "大学", "日本語"], ["привет", "мир"]]):
        expected = efml_numpy_layers(sandbox.work / "zhs.model", sentence)  # (3, words, 12)
        for name, want in (("layers", expected), ("mean", expected.mean(axis=0)), ("top", expected[2])):
            found = values[name][row]
            assert found.dtype == np.float32 and found.shape == want.shape
            assert np.abs(found - want).max() <= 1e-5


def check_efml_stateful(sandbox: Sandbox, output: str) -> None:
    """The first batch from zero states, the second continuing it; a reset starts over."""
    from efml_numpy import efml_numpy_layers

    values = block_values(sandbox)
    first, second, again = values["first"], values["second"], values["again"]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    for row, sentence in enumerate([["北京", "大学", "日本語"], ["привет", "мир"]]):  # batch [0, 1]: zero states
        assert np.abs(first[row] - efml_numpy_layers(sandbox.work / "zhs.model", sentence)).max() <= 1e-5
    assert np.abs(first[2] - efml_numpy_layers(sandbox.work / "zhs.model", ["мир"])).max() > 1e-3
    assert np.abs(second[0] - first[0]).max() > 1e-3


def check_embedding_sentence_transformers(sandbox: Sandbox, output: str) -> None:
    """One vector per text: the mean of its words' top-layer vectors."""
    vectors = block_values(sandbox)["vectors"]
    assert vectors.shape == (2, 32)
    model_dir = sandbox.work / "elmo-fixture"
    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir)
    for row, text in enumerate(["The bank closed its doors .", "River banks flood"]):
        with torch.inference_mode():
            top = model(**tokenizer([text], return_tensors="pt")).last_hidden_state[0]
        assert np.abs(vectors[row] - top.mean(dim=0).numpy()).max() <= 1e-6


def check_ner_pipeline_python(sandbox: Sandbox, output: str) -> None:
    text = "EU rejects German call to boycott British lamb ."
    entities = block_values(sandbox)["entities"]
    labels = AutoModelForTokenClassification.from_pretrained(sandbox.work / "ner-out").config.id2label.values()
    assert all(text[entity["start"] : entity["end"]] == entity["word"] for entity in entities)  # exact offsets
    assert all(f"B-{entity['entity_group']}" in labels for entity in entities)


def fixture_embedder(sandbox: Sandbox, **options):
    from modeling_elmo.allennlp import ElmoEmbedder

    return ElmoEmbedder(
        str(sandbox.fixture_dir / "options.json"), str(sandbox.fixture_dir / "lm_weights.hdf5"), **options
    )


def check_seqvec_run_legacy(sandbox: Sandbox, output: str) -> None:
    """seqvec's `--protein` file: per protein (keyed by its header's identifier) the mean over its residues of the
    three layers' sum, from one stateful batch of the proteins sorted by length, as seqvec 0.4.1 computes it."""
    with np.load(sandbox.work / "proteins.npz") as vectors:
        found = {name: vectors[name] for name in vectors.files}
    ordered = sorted(PROTEINS, key=lambda name: len(PROTEINS[name]))
    layers = fixture_embedder(sandbox).embed_batch([list(PROTEINS[name]) for name in ordered])
    assert sorted(found) == sorted(PROTEINS)
    for name, embedding in zip(ordered, layers, strict=True):
        assert found[name].shape == (32,) and found[name].dtype == np.float32
        np.testing.assert_allclose(found[name], embedding.sum(0).mean(0), atol=1e-6, rtol=0)


def check_bio_embeddings_seqvec(sandbox: Sandbox, output: str) -> None:
    """The arrays of SeqVecEmbedder's calls: four warm-ups (a batch of one), then one batch of two. The warm-up's
    states carry into row 0 only: the first protein's vectors change, the second's start from zero states."""
    values = block_values(sandbox)
    residues = [list(sequence) for sequence in values["sequences"]]
    warmed = fixture_embedder(sandbox)
    for _ in range(4):
        warmed.embed_sentence(list(values["WARMUP"]))
    expected, cold = warmed.embed_batch(residues), fixture_embedder(sandbox).embed_batch(residues)
    for index, sequence in enumerate(residues):
        found = values["per_residue"][index]
        assert found.shape == (3, len(sequence), 32) and found.dtype == np.float32
        np.testing.assert_allclose(found, expected[index], atol=1e-6, rtol=0)
        np.testing.assert_allclose(values["per_protein"][index], expected[index].sum(0).mean(0), atol=1e-6, rtol=0)
        warmup_effect = np.abs(found - cold[index]).max()
        assert warmup_effect > 1e-3 if index == 0 else warmup_effect <= 1e-6


def check_seqcls_python(sandbox: Sandbox, output: str) -> None:
    assert block_values(sandbox)["logits"].shape == (2, 5)


def check_seqcls_python_pairs(sandbox: Sandbox, output: str) -> None:
    values = block_values(sandbox)
    assert values["batch"]["input_ids"].shape == (1, 6 + 4, 50)  # the pair's words, one row
    assert values["batch"]["token_type_ids"].tolist() == [[0] * 6 + [1] * 4]
    assert values["logits"].shape == (1, 3)


def check_simple_elmo_nlpl_folder(sandbox: Sandbox, output: str) -> None:
    with zipfile.ZipFile(sandbox.work / "nlpl-fixture.zip") as archive:
        assert sorted(archive.namelist()) == ["model.hdf5", "options.json", "vocab.txt"]


def check_simple_elmo_python(sandbox: Sandbox, output: str) -> None:
    """simple_elmo's shapes and dtypes; the top layer of the fixture's batches equal to the original's (states
    carried from chunk to chunk); sentence vectors of norm 1."""
    values = block_values(sandbox)
    top, vectors, sentence_vectors = values["top"], values["vectors"], values["sentence_vectors"]
    assert top.shape == vectors.shape == (30, 53, 32) and top.dtype == vectors.dtype == np.float64
    for index, text in enumerate(values["texts"]):
        i, k = divmod(index, 3)
        with h5py.File(sandbox.fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as reference:
            expected = np.concatenate(list(reference[str(i)][...]), axis=-1)
        assert np.abs(top[index, : len(text)] - expected).max() <= ORIGINAL_TOLERANCE
    assert np.abs(vectors - top).max() > 0.1  # the mean of the layers, not the top one
    assert sentence_vectors.shape == (30, 32) and np.allclose(np.linalg.norm(sentence_vectors, axis=1), 1.0)


def served_sentence_vectors(sandbox: Sandbox, texts: list[str]) -> np.ndarray:
    """`SentenceTransformer(elmo-fixture).encode` of each text alone, L2-normalised: what `elmo serve` answers."""
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(sandbox.work / "elmo-fixture"), device="cpu")
    return np.stack([encoder.encode([text], normalize_embeddings=True)[0] for text in texts])


def check_serve_fixture(sandbox: Sandbox, output: str) -> None:
    body = json.loads((sandbox.work / "embedding.json").read_text())
    assert body["model"] == "elmo-fixture" and body["usage"]["prompt_tokens"] == 6
    (expected,) = served_sentence_vectors(sandbox, ["The bank closed its doors ."])
    np.testing.assert_allclose(body["data"][0]["embedding"], expected, atol=1e-6, rtol=0)


def check_serving_session(sandbox: Sandbox, output: str) -> None:
    texts = ["The bank closed its doors .", "River bank"]
    body = json.loads((sandbox.work / "embeddings.json").read_text())
    assert [item["index"] for item in body["data"]] == [0, 1] and body["usage"]["prompt_tokens"] == 8
    np.testing.assert_allclose(
        [item["embedding"] for item in body["data"]], served_sentence_vectors(sandbox, texts), atol=1e-6, rtol=0
    )
    (words,) = json.loads((sandbox.work / "words.json").read_text())["data"]
    assert words["words"] == ["River", "bank"] and words["offsets"] == [[0, 5], [6, 10]]
    assert words["shape"] == [2, 32] and np.asarray(words["embedding"]).shape == (2, 32)
    assert "[32, 32] 8" in output


def check_serving_clients(sandbox: Sandbox, output: str) -> None:
    """LangChain's two vectors and its query's, of the fixture's width; chromadb's two ids, nearest to the query first
    as the model's own vectors order them."""
    lines = output.splitlines()
    assert "2 32" in lines
    names = ["doors", "river"]
    query, *documents = served_sentence_vectors(
        sandbox, ["Where is the bank ?", "The bank closed its doors .", "River bank"]
    )
    nearest_first = sorted(names, key=lambda name: -float(documents[names.index(name)] @ query))
    assert str([nearest_first]) in lines


def check_serving_ray(sandbox: Sandbox, output: str) -> None:
    (expected,) = served_sentence_vectors(sandbox, ["The bank closed its doors ."])
    np.testing.assert_allclose(block_values(sandbox)["vector"], expected, atol=1e-6, rtol=0)


DOC_COMMANDS: dict[str, DocCommand] = {
    "quickstart": DocCommand(nothing, check_quickstart, runnable_part=after_install),
    "convert-fixture": DocCommand(nothing, check_convert_fixture),
    "export-fixture": DocCommand(copy_converted_fixture, check_export_fixture),
    "embed-fixture": DocCommand(write_sentences, check_embed_fixture),
    "embed-quantized": DocCommand(write_sentences, check_embed_quantized),
    "allennlp-drop-in": DocCommand(write_fixture_in_batch_order, check_allennlp_drop_in),
    "onnx-fixture": DocCommand(copy_converted_fixture, check_onnx_fixture),
    "serve-fixture": DocCommand(copy_converted_fixture, check_serve_fixture),
    "serving-session": DocCommand(copy_converted_fixture, check_serving_session),
    "serving-clients": DocCommand(copy_converted_fixture, check_serving_clients, needs="clients"),
    "serving-ray": DocCommand(copy_converted_fixture, check_serving_ray, needs="ray"),
    "ner": DocCommand(write_tiny_conll, check_ner),
    "pretrain-corpus": DocCommand(write_tiny_conll_splits, check_pretrain_corpus),
    "release-version": DocCommand(nothing, check_release_version),
    "pretrain-vocab": DocCommand(write_tiny_corpus, check_pretrain_vocab),
    "pretrain-options": DocCommand(nothing, check_pretrain_options, follows="pretrain-vocab"),
    "pretrain": DocCommand(nothing, check_pretrain, follows="pretrain-options"),
    "pretrain-export": DocCommand(nothing, check_pretrain_export, follows="pretrain"),
    "embed-sentences": DocCommand(write_sentences, check_embed_sentences),
    "embed-parquet": DocCommand(write_sentences, check_embed_parquet),
    "embed-parquet-read": DocCommand(nothing, check_embed_parquet_read, follows="embed-parquet"),
    "embed-to-parquet": DocCommand(write_sentences, check_embed_to_parquet),
    "embed-two-machines": DocCommand(write_two_machines, check_embed_two_machines),
    "embed-two-machines-parquet": DocCommand(nothing, check_embed_two_machines_parquet, follows="embed-two-machines"),
    "efml-convert": DocCommand(write_efml_folder, check_efml_convert),
    "nlpl-make-tiny-zip": DocCommand(nothing, check_nlpl_tiny_zip),
    "nlpl-convert-zip": DocCommand(nothing, check_nlpl_convert, follows="nlpl-make-tiny-zip"),
    "nlpl-vocabulary-cache": DocCommand(nothing, check_nlpl_vocabulary_cache, follows="nlpl-convert-zip"),
    "publish-batch": DocCommand(nothing, check_publish_batch, follows="nlpl-vocabulary-cache"),
    "seqcls-tiny-pair-model": DocCommand(nothing, check_seqcls_tiny_pair_model),
    "seqcls-pipeline-pairs": DocCommand(nothing, check_seqcls_pipeline_pairs, follows="seqcls-tiny-pair-model"),
    "train-classifier-tiny-model": DocCommand(nothing, check_train_classifier_tiny_model),
    "train-classifier-single": DocCommand(
        nothing, check_train_classifier_single, follows="train-classifier-tiny-model"
    ),
    "train-classifier-pair": DocCommand(nothing, check_train_classifier_pair, follows="train-classifier-single"),
    "train-classifier-bad-input": DocCommand(
        nothing, check_train_classifier_bad_input, follows="train-classifier-pair"
    ),
    "train-classifier-prepare-sst": DocCommand(link_sst, check_train_classifier_prepare_sst),
    "train-classifier-sst2": DocCommand(write_tiny_sst, check_train_classifier_sst2),
    "readme-python": DocCommand(copy_converted_fixture, check_model_python),
    "model-python": DocCommand(copy_converted_fixture, check_model_python),
    "states-python": DocCommand(copy_converted_fixture, check_states_python),
    "quantized-loading": DocCommand(copy_converted_fixture, check_quantized_loading),
    "efml-python": DocCommand(nothing, check_efml_python, follows="efml-convert"),
    "efml-model": DocCommand(nothing, check_efml_model),
    "efml-drop-in": DocCommand(nothing, check_efml_drop_in, follows="efml-model"),
    "efml-stateful": DocCommand(nothing, check_efml_stateful, follows="efml-drop-in"),
    "embedding-sentence-transformers": DocCommand(copy_converted_fixture, check_embedding_sentence_transformers),
    "ner-pipeline-python": DocCommand(nothing, check_ner_pipeline_python, follows="ner"),
    "seqcls-python": DocCommand(copy_fixture_as_original, check_seqcls_python),
    "seqcls-python-pairs": DocCommand(copy_fixture_as_original, check_seqcls_python_pairs),
    "ecosystem-transformers4": DocCommand(
        copy_converted_fixture, check_ecosystem_transformers4, needs="transformers-4"
    ),
    "ecosystem-flair": DocCommand(copy_converted_fixture, check_ecosystem_flair, needs="flair"),
    "ecosystem-sentence-transformers": DocCommand(copy_converted_fixture, check_ecosystem_sentence_transformers),
    "ecosystem-onnxruntime": DocCommand(copy_converted_fixture, check_ecosystem_onnxruntime),
    "simple-elmo-nlpl-folder": DocCommand(nothing, check_simple_elmo_nlpl_folder),
    "simple-elmo-python": DocCommand(nothing, check_simple_elmo_python, follows="simple-elmo-nlpl-folder"),
    "scale-out-ray": DocCommand(write_sentences, check_scale_out_ray, needs="ray"),
    "scale-out-ray-cluster": DocCommand(write_sentences, check_scale_out_ray_cluster, needs="ray"),
    "scale-out-spark": DocCommand(write_sentences, check_scale_out_spark, needs="pyspark"),
    "scale-out-datasets": DocCommand(write_sentences, check_scale_out_datasets),
    "seqvec-run-legacy": DocCommand(write_proteins, check_seqvec_run_legacy, needs="seqvec"),
    "bio-embeddings-seqvec": DocCommand(nothing, check_bio_embeddings_seqvec),
}


# --- the tests ----------------------------------------------------------------------------------------------------

BLOCKS = all_blocks(REPO_ROOT)


def blocks_by_id() -> dict[str, list[Block]]:
    found: dict[str, list[Block]] = {}
    for block in BLOCKS:
        if block.doc_id is not None:
            found.setdefault(block.doc_id, []).append(block)
    return found


def chains() -> list[list[str]]:
    """The runnable IDs grouped by sandbox: each ID without `follows`, then the IDs that follow it, in order."""

    def followers(name: str) -> list[str]:
        direct = [other for other, command in DOC_COMMANDS.items() if command.follows == name]
        return [name, *itertools.chain.from_iterable(followers(other) for other in direct)]

    return [followers(name) for name, command in DOC_COMMANDS.items() if command.follows is None]


def test_every_command_block_is_marked():
    problems = []
    for block in BLOCKS:
        if not block.language:
            problems.append(f"{block.where}: a fenced block without an info string (use ```text for synopses)")
        elif block.language in RUNNABLE_LANGUAGES and block.marker is None:
            problems.append(
                f"{block.where}: a ```{block.language} block without `<!-- doc-test: ID -->` or "
                "`<!-- doc-test: skip (reason) -->` before it"
            )
        elif block.marker is not None and block.language not in RUNNABLE_LANGUAGES:
            problems.append(
                f"{block.where}: a doc-test marker before a ```{block.language} block (only bash and python run)"
            )
        elif block.marker is not None and block.marker.startswith("skip") and block.skip_reason is None:
            problems.append(f"{block.where}: `{block.marker}`: a skip needs its reason, `skip (reason)`")
    assert not problems, "\n".join(problems)


def test_every_runnable_id_is_registered_and_every_registered_id_documented():
    found = blocks_by_id()
    problems = [
        f"{blocks[0].where}: doc-test ID {name!r} has no entry in DOC_COMMANDS (tests/test_documented_commands.py)"
        for name, blocks in found.items()
        if name not in DOC_COMMANDS
    ]
    problems += [
        f"DOC_COMMANDS[{name!r}]: no block of README.md or docs/ has this ID"
        for name in DOC_COMMANDS
        if name not in found
    ]
    problems += [
        f"{blocks[0].where} and {other.where}: blocks with ID {name!r} differ (one ID, one command)"
        for name, blocks in found.items()
        for other in blocks[1:]
        if other.text != blocks[0].text
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.integration
@pytest.mark.parametrize("chain", chains(), ids=lambda chain: "+".join(chain))
def test_documented_command_does_what_it_says(chain, tmp_path, fixture_dir, converted_fixture):
    found = blocks_by_id()
    missing = [name for name in chain if name not in found]
    assert not missing, f"no block has the ID(s) {missing}"
    lacking = [reason for name in chain if (reason := environment_lacks(DOC_COMMANDS[name].needs))]
    if lacking:
        pytest.skip(lacking[0])
    work = make_sandbox(tmp_path, REPO_ROOT, fixture_dir.parent.parent)
    sandbox = Sandbox(work, tmp_path / "shared", fixture_dir, converted_fixture)
    for name in chain:
        command, block = DOC_COMMANDS[name], found[name][0]
        command.prepare(sandbox)
        result = run_block(block, command.runnable_part(block.text), work)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{block.where} ({name}) exited {result.returncode}:\n{output[-3000:]}"
        command.check(sandbox, output)
