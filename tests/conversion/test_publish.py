"""`elmo-publish batch` over a folder of downloaded ELMoForManyLangs and NLPL models, and the language table."""

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import torch
import transformers
from efml_numpy import write_efml_model
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from transformers import AutoModel

from modeling_elmo.conversion import publish
from modeling_elmo.conversion.convert_command import main as convert_main
from modeling_elmo.conversion.presets import EFML_LANGUAGES, card_language_code, efml_language
from modeling_elmo.conversion.publish import main
from modeling_elmo.hub.push import model_repo_problems

META = {"id": 210, "corpus": [{"description": "Norsk Aviskorpus", "language": "nob", "tokens": 1234567}]}


@pytest.fixture(autouse=True)
def no_progress_bars(monkeypatch):
    monkeypatch.setattr(transformers.utils.logging, "_tqdm_active", False)


def zip_folder(folder: Path, archive: Path, inside: str = "") -> Path:
    """`archive` holding the files of `folder`, under `inside/` when given."""
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(folder.iterdir()):
            handle.write(path, f"{inside}/{path.name}" if inside else path.name)
    return archive


def nlpl_folder(folder: Path, options: Path, weights: Path, meta: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "options.json").write_bytes(options.read_bytes())
    (folder / "model.hdf5").write_bytes(weights.read_bytes())
    if meta is not None:
        (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def same_weights(a: Path, b: Path) -> bool:
    found, expected = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return found.keys() == expected.keys() and all(torch.equal(found[key], expected[key]) for key in expected)


def test_batch_converts_a_mixed_folder_and_reports_the_broken_models_by_name(random_checkpoint, tmp_path, capsys):
    downloads, out, sources = tmp_path / "downloads", tmp_path / "out", tmp_path / "sources"
    options, weights = random_checkpoint(seed=1)
    downloads.mkdir()
    zip_folder(nlpl_folder(sources / "nlpl", options, weights, META), downloads / "210.zip")  # language from meta.json
    nlpl_folder(downloads / "ru", options, weights)  # no meta.json: language from the name
    efml_source = write_efml_model(sources / "ar.model", seed=2)
    zip_folder(efml_source, downloads / "136.zip", inside="ar.model")  # NLPL id 136: ELMoForManyLangs' Arabic
    write_efml_model(downloads / "zhs.model", words=None, seed=3)
    nlpl_folder(downloads / "mystery", options, weights)  # no meta.json, and a name that is no language
    with zipfile.ZipFile(downloads / "broken.zip", "w") as handle:  # options.json only: no weights
        handle.write(options, "options.json")
    (downloads / "notes.txt").write_text("where these came from")

    assert main(["batch", "--input-dir", str(downloads), "--output-dir", str(out), "--verify"]) == 1
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert any(line.startswith("broken.zip: error: ") and "no .hdf5 weights file" in line for line in errors)
    assert any(line.startswith("mystery: error: ") and "cannot tell the model's language" in line for line in errors)
    assert errors[-1] == "elmo-publish batch: failed: broken, mystery"
    assert "notes.txt: skipped" in captured.out and "Converted 4 of 6 models" in captured.out

    assert sorted(path.name for path in out.iterdir()) == ["136", "210", "ru", "zhs.model"]  # nothing half-written
    languages = {}
    for folder in out.iterdir():
        assert model_repo_problems(folder) == []
        card = ModelCard.load(folder / "README.md")
        languages[folder.name] = card.data.language
        assert "max abs difference of" in card.text
        AutoModel.from_pretrained(folder)
    assert languages == {"210": "nb", "ru": "ru", "136": "ar", "zhs.model": "zh"}

    arabic = ModelCard.load(out / "136" / "README.md")
    assert arabic.data.license == "mit" and "# ELMo for Arabic (ELMoForManyLangs)" in arabic.text
    archive_sha256 = hashlib.sha256((downloads / "136.zip").read_bytes()).hexdigest()
    assert f"| 136.zip | {downloads / '136.zip'} | `{archive_sha256}` |" in arabic.text
    encoder_sha256 = hashlib.sha256((efml_source / "encoder.pkl").read_bytes()).hexdigest()
    assert f"`{encoder_sha256}`" in arabic.text and "Chinese Gigaword" in (out / "zhs.model" / "README.md").read_text()

    # the batch's conversions equal elmo-convert's on the same sources
    assert (
        convert_main(["--from", "elmoformanylangs", "--model-dir", str(efml_source), "--output", str(tmp_path / "a")])
        == 0
    )
    assert convert_main(["--options", str(options), "--weights", str(weights), "--output", str(tmp_path / "n")]) == 0
    assert same_weights(out / "136", tmp_path / "a") and same_weights(out / "210", tmp_path / "n")
    assert ModelCard.load(tmp_path / "a" / "README.md").data.language == "ar"  # from the folder name ar.model


def test_batch_without_verify_claims_no_verification(random_checkpoint, tmp_path, capsys):
    options, weights = random_checkpoint(seed=4)
    nlpl_folder(tmp_path / "downloads" / "nb", options, weights)
    assert main(["batch", "--input-dir", str(tmp_path / "downloads"), "--output-dir", str(tmp_path / "out")]) == 0
    card = (tmp_path / "out" / "nb" / "README.md").read_text()
    assert "max abs difference" not in card and "Conversion check: not run" in card


def test_batch_names_a_model_that_fails_unexpectedly_and_converts_the_others(
    random_checkpoint, tmp_path, capsys, monkeypatch
):
    options, weights = random_checkpoint(seed=5)
    for name in ("nb", "ru", "sv"):
        nlpl_folder(tmp_path / "downloads" / name, options, weights)
    convert_download = publish.convert_download

    def fails_on_ru(path, output, **options):
        if path.name == "ru":
            raise RuntimeError("HDF5 read failed\nerror stack follows")
        return convert_download(path, output, **options)

    monkeypatch.setattr(publish, "convert_download", fails_on_ru)
    assert main(["batch", "--input-dir", str(tmp_path / "downloads"), "--output-dir", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "ru: error: unexpected RuntimeError: HDF5 read failed",
        "elmo-publish batch: failed: ru",
    ]
    assert "Converted 2 of 3 models" in captured.out
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["nb", "sv"]


@pytest.mark.parametrize(
    "layout, message",
    [("output-inside-input", "is inside --input-dir"), ("empty", "No models (folders or .zip files)")],
)
def test_batch_refuses_a_bad_layout_in_one_line(tmp_path, capsys, layout, message):
    (tmp_path / "downloads").mkdir()
    out = tmp_path / "downloads" / "out" if layout == "output-inside-input" else tmp_path / "out"
    assert main(["batch", "--input-dir", str(tmp_path / "downloads"), "--output-dir", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("elmo-publish batch: error: ") and message in error
    assert not out.exists()


def test_language_table_covers_the_released_models():
    """ELMoForManyLangs' README links 44 models as repository/11/136.zip .. 179.zip, plus simplified Chinese."""
    assert len(EFML_LANGUAGES) == 45
    assert sorted(language.efml_nlpl_id for language in EFML_LANGUAGES[:-1]) == list(range(136, 180))
    assert all(card_language_code(language.code) == language.code for language in EFML_LANGUAGES)
    expected = {"136.zip": "ar", "ar.model": "ar", "153": "grc", "Norwegian Bokmål": "nb", "nno": "nn", "zht": "zh"}
    assert {name: efml_language(name).code for name in expected} == expected
    assert efml_language("zhs.model").efml_nlpl_id is None and efml_language("179").name == "Chinese (traditional)"
    assert efml_language("mystery") is None and efml_language("180.zip") is None
    assert [card_language_code(code) for code in ("nob", "ENG", "grc", "nor")] == ["nb", "en", "grc", "nor"]
    with pytest.raises(ValueError, match="not an ISO 639 language code"):
        card_language_code("no-bok")
