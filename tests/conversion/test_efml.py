"""`elmo-convert --from elmoformanylangs`: random-weight models in ELMoForManyLangs' exact format (tests/efml_numpy.py)
converted and compared layer by layer with an independent NumPy transcription of its computation; bad input."""

import json
import re
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from efml_numpy import NON_LATIN_WORDS, efml_numpy_layers, small_architecture, write_efml_model
from test_pipeline_remote_code import run_without_package
from transformers import AutoModel, AutoTokenizer, pipeline

from modeling_elmo import ElmoForSequenceClassification, ElmoForTokenClassification
from modeling_elmo.conversion.convert_command import main as convert_main
from modeling_elmo.conversion.export import main as export_main
from modeling_elmo.formats import efml
from modeling_elmo.formats.efml import (
    PACKAGED_ARCHITECTURE,
    PACKAGED_ARCHITECTURE_SHA256,
    find_architecture,
    read_efml_model,
    read_state_dict,
)

TOLERANCE = 1e-5
SENTENCES = [
    ["北京", "大学", "日本語", "中文"],
    ["привет", "мир", "приветмирпривет"],  # the last word is longer than max_characters_per_token - 2 = 7
    ["اللغة", "العربية", "café", "北京大学北京大学北京"],  # a long word whose cut form is not in the word lexicon
    ["xyz", "😀", "北🙂京", "Привет"],  # characters missing from the lexicon (and a case the lexicon lacks)
    ["мир"],
]


@pytest.fixture(scope="module", params=["word-embedding", "characters-only"])
def converted(request, tmp_path_factory) -> tuple[Path, Path]:
    """(EFML source folder, converted folder) with and without the word embedding."""
    root = tmp_path_factory.mktemp(request.param)
    words = NON_LATIN_WORDS if request.param == "word-embedding" else None
    source = write_efml_model(root / "efml", words=words)
    assert convert_main(["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(root / "out")]) == 0
    return source, root / "out"


def _all_layers(folder: Path, sentences: list[list[str]], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    model, tokenizer = AutoModel.from_pretrained(folder, dtype=dtype).eval(), AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        return torch.stack(
            model(**batch, output_hidden_states=True).hidden_states, dim=1
        )  # (batch, layers, words, 2P)


def test_every_layer_matches_the_numpy_transcription(converted):
    source, folder = converted
    layers = _all_layers(folder, SENTENCES)
    for row, sentence in enumerate(SENTENCES):
        expected = efml_numpy_layers(source, sentence)
        assert np.abs(expected).max() > 0.5  # the layers are not trivially small
        assert np.abs(layers[row, :, : len(sentence)].numpy() - expected).max() <= TOLERANCE


def test_in_float64_the_layers_agree_to_rounding(converted):
    """The same function, not only close values: in float64 the converted model and the transcription agree to 1e-10
    (float32 rounding, which can reach 1e-5 on large random weights in EFML itself, is out of the picture)."""
    source, folder = converted
    layers = _all_layers(folder, SENTENCES, torch.float64)
    for row, sentence in enumerate(SENTENCES):
        assert np.abs(layers[row, :, : len(sentence)].numpy() - efml_numpy_layers(source, sentence)).max() <= 1e-10


def test_raw_text_gives_the_same_layers_as_pre_split_words(converted):
    _, folder = converted
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer("北京 大学, привет!", return_offsets_mapping=True)
    assert encoded.word_ids() == [0, 1, 2, 3, 4]
    assert [tuple(span) for span in encoded["offset_mapping"]] == [(0, 2), (3, 5), (5, 6), (7, 13), (13, 14)]
    split = tokenizer(["北京", "大学", ",", "привет", "!"], is_split_into_words=True)
    assert encoded["input_ids"] == split["input_ids"]


def test_verify_passes_with_its_figure_and_fails_on_a_wrong_mapping(tmp_path, capsys, monkeypatch):
    source = write_efml_model(tmp_path / "efml", seed=3)
    assert (
        convert_main(
            ["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(tmp_path / "a"), "--verify"]
        )
        == 0
    )
    figure = float(re.search(r"max abs difference to the original weights = (\S+)", capsys.readouterr().out)[1])
    assert 0 <= figure <= TOLERANCE

    def gate_not_negated(*args):  # EFML's highway gate carries x: ours must get the negated gate
        state = to_elmo_state_dict(*args)
        for key in [key for key in state if key.endswith(("transform_gate.weight", "transform_gate.bias"))]:
            state[key] = -state[key]
        return state

    to_elmo_state_dict = efml.to_elmo_state_dict
    monkeypatch.setattr(efml, "to_elmo_state_dict", gate_not_negated)
    assert (
        convert_main(
            ["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(tmp_path / "b"), "--verify"]
        )
        == 1
    )
    assert "Verification failed" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_released_legacy_pickles_are_read_with_weights_only(tmp_path):
    source = write_efml_model(tmp_path / "efml", words=None)
    assert not zipfile.is_zipfile(source / "encoder.pkl")  # 2018 PyTorch's legacy serialization, as released
    assert set(read_state_dict(source / "encoder.pkl")) >= {"forward_layer_0.input_linearity.weight"}


def test_architecture_lookup_follows_efml(tmp_path, monkeypatch):
    source = write_efml_model(tmp_path / "efml", config_path="/nowhere/at/all/arch.json", words=None)
    assert find_architecture(source)[1]["location"] == str(source / "arch.json")  # the file name, beside the model
    (source / "sub").mkdir()
    (source / "sub" / "arch.json").write_text(json.dumps(small_architecture(0, max_chars=11)))
    (source / "config.json").write_text(json.dumps({"config_path": "sub/arch.json"}))
    monkeypatch.chdir(tmp_path)  # relative to the model folder, not the working directory
    architecture, where = find_architecture(source)
    assert (
        where["location"] == str(source / "sub/arch.json")
        and architecture["token_embedder"]["max_characters_per_token"] == 11
    )
    (source / "config.json").write_text(json.dumps({"config_path": "/released/cnn_50_100_512_4096_sample.json"}))
    architecture, where = find_architecture(source)  # elmoformanylangs' own configs/ file
    assert architecture == PACKAGED_ARCHITECTURE and where["sha256"] == PACKAGED_ARCHITECTURE_SHA256


def test_works_as_an_english_model(converted, tmp_path):
    """AutoModel, ElmoForTokenClassification, elmo-embed and pipeline("feature-extraction") on a converted model."""
    source, folder = converted
    sentence = SENTENCES[0]
    expected = efml_numpy_layers(source, sentence)
    classifier = ElmoForTokenClassification.from_pretrained(folder, num_labels=3)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer([sentence], is_split_into_words=True, return_tensors="pt")
    output = classifier(**batch, labels=torch.tensor([[0, 1, 2, 1]]))
    assert output.logits.shape == (1, 4, 3) and torch.isfinite(output.loss)

    features = pipeline("feature-extraction", model=str(folder), trust_remote_code=True)(" ".join(sentence))
    assert np.abs(np.asarray(features)[0] - expected[-1]).max() <= TOLERANCE  # the top layer

    from modeling_elmo.embed.cli import main as embed_main

    (tmp_path / "in.txt").write_text(" ".join(sentence) + "\n" + " ".join(SENTENCES[1]) + "\n", encoding="utf-8")
    assert (
        embed_main([str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--model", str(folder), "--no-progress"])
        == 0
    )
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert np.abs(handle["0"][()] - expected).max() <= TOLERANCE
        assert np.abs(handle["1"][()] - efml_numpy_layers(source, SENTENCES[1])).max() <= TOLERANCE


def test_sentence_pair_classification_as_on_an_english_model(converted):
    """ElmoForSequenceClassification reads the lexicon model's ids (word id column included) for text pairs: a pair's
    logits do not depend on the batch it is in, and the loss trains."""
    _, folder = converted
    model = ElmoForSequenceClassification.from_pretrained(folder, num_labels=2, classifier_sentence_pairs=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    firsts, seconds = [SENTENCES[0], SENTENCES[4], SENTENCES[1]], [SENTENCES[2], SENTENCES[3], SENTENCES[4]]
    batch = tokenizer(firsts, seconds, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
        for row, (first, second) in enumerate(zip(firsts, seconds, strict=True)):
            alone = tokenizer([first], [second], is_split_into_words=True, return_tensors="pt")
            assert (model(**alone).logits[0] - logits[row]).abs().max() <= TOLERANCE
    model.train()
    loss = model(**batch, labels=torch.tensor([0, 1, 1])).loss
    loss.backward()
    assert torch.isfinite(loss) and model.classifier.weight.grad.abs().sum() > 0


def test_elmo_export_refuses_a_lexicon_model(converted, tmp_path, capsys):
    _, folder = converted
    assert export_main([str(folder), "--output", str(tmp_path / "exported")]) == 1
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "no character lexicon" in error and not (tmp_path / "exported").exists()


def test_read_efml_model_returns_config_state_and_lexicons(tmp_path):
    source = write_efml_model(tmp_path / "efml")
    model = read_efml_model(source)
    assert model.config.char_input == "lexicon" and model.config.word_vocab_size == len(model.word_lexicon) + 1
    assert model.char_lexicon[:3] == ["北", "京", "大"] and "\u3000" in model.char_lexicon
    assert model.config.lstm_forget_bias == 0.0 and model.config.use_skip_connections
    assert set(model.sources) >= {"config.json", "char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl"}


# ---- bad input: one line naming the problem, exit 1, nothing written --------------------------------------------


def _rewrite_lexicon(path: Path, edit) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(edit(lines)), encoding="utf-8")


def _edit_pickle(path: Path, edit) -> None:
    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)


class NotATensor:
    pass


BAD_INPUTS = {
    "no config.json": (lambda d: (d / "config.json").unlink(), "config.json is missing"),
    "config.json not JSON": (lambda d: (d / "config.json").write_text("{"), "config.json is not valid JSON"),
    "unreadable config_path": (
        lambda d: (d / "config.json").write_text(json.dumps({"config_path": "missing.json"})),
        "config_path 'missing.json' is found neither",
    ),
    "missing char.dic": (lambda d: (d / "char.dic").unlink(), "char.dic is missing"),
    "missing word.dic": (lambda d: (d / "word.dic").unlink(), "word.dic is missing"),
    "missing encoder.pkl": (lambda d: (d / "encoder.pkl").unlink(), "encoder.pkl is missing"),
    "pickle of an object": (
        lambda d: torch.save({"weight": NotATensor()}, d / "encoder.pkl"),
        "encoder.pkl is not a plain state dict of tensors (refused by weights_only",
    ),
    "pickle of a non-tensor value": (
        lambda d: torch.save({"forward_layer_0.input_linearity.weight": 1.0}, d / "encoder.pkl"),
        "encoder.pkl is not a plain state dict",
    ),
    "missing key": (
        lambda d: _edit_pickle(d / "encoder.pkl", lambda s: s.pop("backward_layer_1.state_linearity.bias")),
        "encoder.pkl lacks 'backward_layer_1.state_linearity.bias'",
    ),
    "extra key": (
        lambda d: _edit_pickle(
            d / "token_embedder.pkl", lambda s: s.update({"highways._layers.2.bias": torch.zeros(3)})
        ),
        "token_embedder.pkl has 'highways._layers.2.bias'",
    ),
    "wrong shape": (
        lambda d: _edit_pickle(d / "token_embedder.pkl", lambda s: s.update({"projection.bias": torch.zeros(7)})),
        "token_embedder.pkl: projection.bias has shape (7,), but the architecture JSON and lexicons give (6,)",
    ),
    "lexicon and embedding disagree": (
        lambda d: _rewrite_lexicon(d / "char.dic", lambda lines: [*lines, f"Ж\t{len(lines)}\n"]),
        "char_emb_layer.embedding.weight has shape",
    ),
    "duplicate ids": (
        lambda d: _rewrite_lexicon(d / "word.dic", lambda lines: [*lines[:-1], "zz\t0\n"]),
        "word.dic: id 0 is given to two tokens",
    ),
    "id out of range": (
        lambda d: _rewrite_lexicon(d / "char.dic", lambda lines: [*lines[:-1], "Ж\t999\n"]),
        "char.dic: id 999 ('Ж') is out of range",
    ),
    "line without an id": (
        lambda d: _rewrite_lexicon(d / "char.dic", lambda lines: ["Ж\tx\n", *lines]),
        "char.dic: line 1 is not 'token<TAB>id'",
    ),
    "lstm encoder": (
        lambda d: (d / "arch.json").write_text(
            json.dumps({**small_architecture(7), "encoder": {**small_architecture(7)["encoder"], "name": "lstm"}})
        ),
        "encoder.name 'lstm' is not supported",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_1_and_nothing_written(case, tmp_path, capsys):
    source = write_efml_model(tmp_path / "efml")
    damage, message = BAD_INPUTS[case]
    damage(source)
    output = tmp_path / "out"
    assert convert_main(["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(output)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("elmo-convert: error: ") and message in error, error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["efml"]  # no output, no work folder


def test_sentence_transformer_mean_pools_the_top_layer(converted):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    source, folder = converted
    encoder = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    embedding = encoder.encode([" ".join(SENTENCES[0])], convert_to_numpy=True)[0]
    assert np.abs(embedding - efml_numpy_layers(source, SENTENCES[0])[-1].mean(axis=0)).max() <= TOLERANCE


@pytest.mark.parametrize("extra", [[], ["--model-dir", "efml", "--preset", "original"]])
def test_from_elmoformanylangs_takes_model_dir_only(extra, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        convert_main(["--from", "elmoformanylangs", "--output", str(tmp_path / "out"), *extra])
    assert exit_info.value.code == 2 and "--from elmoformanylangs takes --model-dir" in capsys.readouterr().err


@pytest.mark.integration
def test_remote_code_without_the_package_extracts_the_same_features(tmp_path):
    """`pipeline("feature-extraction", trust_remote_code=True)` where `modeling_elmo` is not importable: the saved
    code files carry the lexicon tokenizer and the word embedding."""
    source, folder = write_efml_model(tmp_path / "efml"), tmp_path / "out"
    assert convert_main(["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(folder)]) == 0
    runs = [{"task": "feature-extraction", "kwargs": {}, "inputs": " ".join(SENTENCES[1])}]
    (result,) = run_without_package(tmp_path, folder, runs)
    assert "error" not in result, result.get("error")
    expected = efml_numpy_layers(source, SENTENCES[1])[-1]
    assert np.abs(np.asarray(result["outputs"])[0] - expected).max() <= TOLERANCE


def test_a_model_without_its_architecture_file_converts_with_the_packaged_facts(tmp_path, monkeypatch):
    """As the released models that name a packaged file: the card lists the packaged file with its sha256."""
    source = write_efml_model(tmp_path / "efml", config_path="/home/someone/configs/tiny_packaged.json")
    (source / "tiny_packaged.json").unlink()
    monkeypatch.setitem(efml.PACKAGED_ARCHITECTURES, "tiny_packaged.json", small_architecture(7))
    assert (
        convert_main(["--from", "elmoformanylangs", "--model-dir", str(source), "--output", str(tmp_path / "out")])
        == 0
    )
    card = (tmp_path / "out" / "README.md").read_text()
    assert "elmoformanylangs/configs/tiny_packaged.json" in card and PACKAGED_ARCHITECTURE_SHA256 in card
