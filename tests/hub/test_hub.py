"""Publishing: complete repos, loading by repo id from a Hub cache with and without this package, pushing through the
real `huggingface_hub` client to a local Hub (`hub_server.py`) and downloading back, the presets script, bad input."""

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import transformers.utils.hub
from hub_server import GITATTRIBUTES, LocalHub
from huggingface_hub import ModelCard, constants
from original_numpy import original_layers
from shared_paths import PACKAGE_DIR, REPO_ROOT
from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer
from transformers.dynamic_module_utils import get_relative_import_files

from modeling_elmo import ElmoConfig, ElmoForSequenceClassification, ElmoForTokenClassification
from modeling_elmo.conversion.convert import convert_checkpoint
from modeling_elmo.conversion.convert_command import main
from modeling_elmo.conversion.presets import PRESETS
from modeling_elmo.conversion.testing_utils import write_random_original_checkpoint
from modeling_elmo.foundation.folder_record import FOLDER_RECORD
from modeling_elmo.hub import model_card
from modeling_elmo.hub.model_card import (
    ModelCardError,
    learned_scalar_mixes,
    render_classifier_model_card,
    render_ner_model_card,
)
from modeling_elmo.hub.push import HubError, IncompleteRepoError, model_repo_problems, push_folder
from modeling_elmo.hub.remote_code import CONFIG_AUTO_MAP, code_folder_problems

# huggingface_hub's LFS upload streams a file object, which httpx2 reports as deprecated
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

REPO_ID = "org/elmo-fixture"
REPOSITORY = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
INSTALL_LINE = f'pip install "elmo-transformers @ git+{REPOSITORY}"'  # the cards' install, until it is on PyPI
ORIGINAL_TOLERANCE = 2e-6
ENTRY_MODULES = ("configuration_elmo.py", "modeling_elmo.py", "tokenization_elmo.py")
# what save_pretrained copies: the modules of the registered classes and, recursively, what they import relatively
CODE_FILES = set(ENTRY_MODULES) | {
    Path(path).name for module in ENTRY_MODULES for path in get_relative_import_files(PACKAGE_DIR / module)
}


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def fixture_sentences(fixture_dir) -> list[list[str]]:
    """The first sentence of each list: batch 0 of the original run, which starts from zero LSTM states."""
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    return [group[0].split() for group in groups]


@pytest.fixture(scope="module")
def original_outputs(fixture_dir, fixture_sentences) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sentence: (top layer from the original TensorFlow run, all layers from the HDF5 weights in float64)."""
    outputs = []
    for k, words in enumerate(fixture_sentences):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as handle:
            top = np.concatenate(list(handle["0"][...]), axis=-1)
        outputs.append((top, original_layers(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5", words)))
    return outputs


def assert_matches_original(hidden_states, attention_mask, original_outputs) -> None:
    for row, (top, layers) in enumerate(original_outputs):
        length = int(attention_mask[row].sum())
        found = np.stack([layer[row, :length].numpy() for layer in hidden_states])
        assert found.shape == layers.shape
        assert np.abs(found[-1] - top).max() <= ORIGINAL_TOLERANCE
        assert np.abs(found - layers).max() <= ORIGINAL_TOLERANCE


@pytest.fixture(scope="module")
def published_folder(fixture_dir, tmp_path_factory) -> Path:
    """The fixture biLM converted (and verified) for the repo `REPO_ID`."""
    output = tmp_path_factory.mktemp("published") / "elmo-fixture"
    fixture = str(fixture_dir)
    convert_checkpoint(f"{fixture}/options.json", f"{fixture}/lm_weights.hdf5", output, verify=True, repo_id=REPO_ID)
    return output


def place_in_hub_cache(folder: Path, hub_cache: Path, repo_id: str) -> str:
    """Lay `folder` out as a downloaded snapshot of `repo_id` (blobs, snapshot symlinks, refs/main)."""
    repo_dir = hub_cache / f"models--{repo_id.replace('/', '--')}"
    revision = hashlib.sha1(repo_id.encode()).hexdigest()
    for name, content in folder_bytes(folder).items():
        blob = repo_dir / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = repo_dir / "snapshots" / revision / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(revision)
    return revision


def run_without_package(tmp_path: Path, env: dict[str, str], repo_id: str, sentences) -> dict:
    """Load `repo_id` with trust_remote_code in an interpreter where `modeling_elmo` is not importable."""
    request = {"repo_id": repo_id, "sentences": sentences, "output": str(tmp_path / "outputs.pt")}
    (tmp_path / "request.json").write_text(json.dumps(request))
    site_packages = sysconfig.get_paths()["purelib"]
    script = str(REPO_ROOT / "tests" / "load_without_package.py")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "HF_HUB_DISABLE_PROGRESS_BARS": "1", **env}
    completed = subprocess.run(
        [sys.executable, "-I", "-S", script, site_packages, str(tmp_path / "request.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return torch.load(tmp_path / "outputs.pt")


# -- the folder elmo-convert writes ---------------------------------------------------------------------------------


def test_converted_folder_is_a_complete_repo(published_folder, fixture_dir):
    names = {path.name for path in published_folder.iterdir()}
    assert (
        names == {"config.json", "model.safetensors", "tokenizer_config.json", "README.md", FOLDER_RECORD} | CODE_FILES
    )
    assert model_repo_problems(published_folder) == []
    config = json.loads((published_folder / "config.json").read_text())
    assert config["auto_map"] == CONFIG_AUTO_MAP
    tokenizer_config = json.loads((published_folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["auto_map"] == {"AutoTokenizer": ["tokenization_elmo.ElmoTokenizer", None]}
    for name in CODE_FILES:  # byte-identical copies of the package's modules
        assert (published_folder / name).read_bytes() == (PACKAGE_DIR / name).read_bytes()

    card = ModelCard.load(published_folder / "README.md")
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "feature-extraction"
    assert (card.data.license, card.data.language) == ("apache-2.0", "en")
    for name in ("options.json", "lm_weights.hdf5"):
        assert hashlib.sha256((fixture_dir / name).read_bytes()).hexdigest() in card.text
    assert "max abs difference of" in card.text and "not run" not in card.text
    assert f'AutoModel.from_pretrained("{REPO_ID}", trust_remote_code=True)' in card.text
    assert f'AutoModel.from_pretrained("{REPO_ID}")' in card.text and INSTALL_LINE in card.text
    assert "LSTM cell / projection | 64 / 16" in card.text and "cut at 48 UTF-8 bytes" in card.text


def test_preset_card_names_corpus_and_datasets(random_checkpoint, tmp_path):
    options, weights = random_checkpoint()
    convert_checkpoint(str(options), str(weights), tmp_path / "out", preset="original-5.5b", repo_id="org/elmo-5.5b")
    card = ModelCard.load(tmp_path / "out" / "README.md")
    assert card.data.datasets == list(PRESETS["original-5.5b"].datasets)
    assert PRESETS["original-5.5b"].corpus in card.text and "# ELMo (original-5.5b)" in card.text


# -- loading by repo id from the Hub cache, offline -----------------------------------------------------------------


def test_load_by_repo_id_from_cache_with_package(
    published_folder, tmp_path, monkeypatch, fixture_sentences, original_outputs
):
    hub_cache = tmp_path / "hf_home" / "hub"
    place_in_hub_cache(published_folder, hub_cache, REPO_ID)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    tokenizer = AutoTokenizer.from_pretrained(REPO_ID)
    model = AutoModel.from_pretrained(REPO_ID)
    tagger = AutoModelForTokenClassification.from_pretrained(REPO_ID, num_labels=3)
    assert type(model).__module__ == "modeling_elmo.modeling_elmo"  # the package's classes, no remote code
    assert isinstance(tagger, ElmoForTokenClassification)
    batch = tokenizer(fixture_sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden_states = model(**batch, output_hidden_states=True).hidden_states
        assert tagger(**batch).logits.shape == (3, batch["attention_mask"].shape[1], 3)
    assert_matches_original(hidden_states, batch["attention_mask"], original_outputs)


@pytest.mark.integration
def test_load_by_repo_id_from_cache_without_package(published_folder, tmp_path, fixture_sentences, original_outputs):
    place_in_hub_cache(published_folder, tmp_path / "hf_home" / "hub", REPO_ID)
    result = run_without_package(
        tmp_path, {"HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1"}, REPO_ID, fixture_sentences
    )
    assert [name.rsplit(".", 1)[1] for name in result["classes"]] == [
        "ElmoTokenizer",
        "ElmoModel",
        "ElmoForTokenClassification",
    ]
    assert all(name.startswith("transformers_modules.") for name in result["classes"])
    assert not result["modeling_elmo_in_sys_modules"]
    assert result["logits_shape"] == [3, result["attention_mask"].shape[1], 3]
    assert_matches_original(result["hidden_states"], result["attention_mask"], original_outputs)


# -- pushing to and downloading from a local Hub --------------------------------------------------------------------


@pytest.fixture
def local_hub(tmp_path, monkeypatch):
    """A running local Hub that this process's huggingface_hub and transformers talk to."""
    with LocalHub() as hub:
        monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)  # both are read from HF_ENDPOINT at import
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # the local Hub speaks LFS, not Xet
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf_cache"))
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
        monkeypatch.setattr(transformers.utils.hub, "_hf_api", None)  # rebuilt for this endpoint
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield hub


def subprocess_env(hub: LocalHub, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_ENDPOINT": hub.endpoint,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


@pytest.mark.integration
def test_elmo_convert_push_then_load_by_repo_id_without_package(
    fixture_dir, tmp_path, fixture_sentences, original_outputs
):
    output = tmp_path / "elmo-fixture"
    with LocalHub() as hub:
        env = subprocess_env(hub, tmp_path)
        command = [
            sys.executable,
            "-m",
            "modeling_elmo.conversion.convert_command",
            "--options",
            str(fixture_dir / "options.json"),
        ]
        command += ["--weights", str(fixture_dir / "lm_weights.hdf5"), "--output", str(output), "--verify"]
        command += ["--push-to-hub", REPO_ID, "--token", hub.token, "--commit-message", "Fixture biLM"]
        completed = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert completed.returncode == 0, completed.stderr[-4000:]
        assert f"Pushed to {REPO_ID}: {hub.endpoint}/{REPO_ID}/commit/" in completed.stdout

        uploaded = hub.tree(REPO_ID)
        assert uploaded.pop(".gitattributes")
        assert uploaded == folder_bytes(output)  # byte-identical, nothing more, nothing less
        assert ("PUT", f"/lfs-objects/{hashlib.sha256(uploaded['model.safetensors']).hexdigest()}") in hub.requests

        download_dir = tmp_path / "download"
        download_dir.mkdir()
        result = run_without_package(download_dir, subprocess_env(hub, download_dir), REPO_ID, fixture_sentences)
        assert hub.unhandled == []
    assert folder_bytes(Path(result["snapshot"])) == {**folder_bytes(output), ".gitattributes": GITATTRIBUTES}
    assert all(name.startswith("transformers_modules.") for name in result["classes"])
    assert_matches_original(result["hidden_states"], result["attention_mask"], original_outputs)


def test_push_folder_to_a_branch_mirrors_the_folder(published_folder, local_hub, tmp_path):
    sharded = tmp_path / "sharded"
    model = AutoModel.from_pretrained(published_folder)
    model.save_pretrained(sharded, max_shard_size="100KB")
    AutoTokenizer.from_pretrained(published_folder).save_pretrained(sharded)
    (sharded / "README.md").write_bytes((published_folder / "README.md").read_bytes())
    assert len(list(sharded.glob("model-*.safetensors"))) > 1 and model_repo_problems(sharded) == []

    push_folder(sharded, "org/mirror", token=local_hub.token, private=True, revision="dev", commit_message="shards")
    assert local_hub.repos["org/mirror"].private
    assert local_hub.tree("org/mirror", "main") == {".gitattributes": GITATTRIBUTES}
    assert local_hub.tree("org/mirror", "dev") == {**folder_bytes(sharded), ".gitattributes": GITATTRIBUTES}

    url = push_folder(published_folder, "org/mirror", token=local_hub.token, revision="dev")
    assert url.startswith(f"{local_hub.endpoint}/org/mirror/commit/")
    # the shards and their index are gone: the branch is exactly the folder again
    assert local_hub.tree("org/mirror", "dev") == {**folder_bytes(published_folder), ".gitattributes": GITATTRIBUTES}
    assert local_hub.unhandled == []


def test_server_error_mid_push_is_clear_and_leaves_the_folder_untouched(published_folder, local_hub):
    before = folder_bytes(published_folder)
    local_hub.fail_on.add("commit")
    with pytest.raises(HubError, match=r"(?s)org/broken failed: .*500.*local folder is unchanged"):
        push_folder(published_folder, "org/broken", token=local_hub.token)
    assert any(method == "PUT" for method, _ in local_hub.requests)  # the weights were already uploaded
    assert local_hub.tree("org/broken") == {".gitattributes": GITATTRIBUTES}  # but nothing was committed
    assert folder_bytes(published_folder) == before


def test_wrong_token_is_a_clear_error(published_folder, local_hub):
    with pytest.raises(HubError, match="401"):
        push_folder(published_folder, "org/elmo", token="hf_wrong")
    assert local_hub.repos == {}


def test_fine_tuned_model_push_to_hub_and_load_back(published_folder, local_hub, tmp_path):
    labels = {0: "O", 1: "B-PER", 2: "I-PER"}
    tagger = ElmoForTokenClassification.from_pretrained(
        published_folder, id2label=labels, label2id={label: index for index, label in labels.items()}
    )
    tokenizer = AutoTokenizer.from_pretrained(published_folder)
    tagger.push_to_hub("org/elmo-ner", token=local_hub.token)
    tokenizer.push_to_hub("org/elmo-ner", token=local_hub.token)

    pushed = tmp_path / "pushed"
    for name, content in local_hub.tree("org/elmo-ner").items():
        (pushed / name).parent.mkdir(parents=True, exist_ok=True)
        (pushed / name).write_bytes(content)
    assert CODE_FILES <= set(folder_bytes(pushed))
    assert json.loads((pushed / "config.json").read_text())["auto_map"] == CONFIG_AUTO_MAP
    assert model_repo_problems(pushed) == []

    reloaded = AutoModelForTokenClassification.from_pretrained("org/elmo-ner")
    batch = AutoTokenizer.from_pretrained("org/elmo-ner")(
        [["John", "lives", "here"]], is_split_into_words=True, return_tensors="pt"
    )
    with torch.no_grad():
        assert torch.equal(reloaded(**batch).logits, tagger.eval()(**batch).logits)
    assert reloaded.config.id2label == labels
    assert local_hub.unhandled == []


def test_presets_script_end_to_end(local_hub, tmp_path):

    sources = {}
    for seed, preset in enumerate(PRESETS.values()):
        options, weights = write_random_original_checkpoint(tmp_path / "originals" / preset.name, seed=seed)
        for url, path in zip(
            preset.source_urls(f"{local_hub.endpoint}/files/mirror"), (options, weights), strict=True
        ):
            local_hub.files[url.split("/files/", 1)[1]] = path.read_bytes()
            sources[url] = hashlib.sha256(path.read_bytes()).hexdigest()
    from modeling_elmo.conversion import publish as script

    arguments = ["--namespace", "org", "--work-dir", str(tmp_path / "work"), "--token", local_hub.token]
    arguments += ["--source-base", f"{local_hub.endpoint}/files/mirror", "--cache-dir", str(tmp_path / "cache")]
    assert script.main(arguments) == 0

    assert sorted(local_hub.repos) == sorted(f"org/elmo-{name}" for name in PRESETS)
    for name, preset in PRESETS.items():
        folder = tmp_path / "work" / f"elmo-{name}"
        assert local_hub.tree(f"org/elmo-{name}") == {**folder_bytes(folder), ".gitattributes": GITATTRIBUTES}
        card = ModelCard.load(folder / "README.md")
        assert f"# ELMo ({name})" in card.text and preset.corpus in card.text and "max abs difference of" in card.text
        for url in preset.source_urls(f"{local_hub.endpoint}/files/mirror"):
            assert f"| {url} | `{sources[url]}` |" in card.text
        assert f'from_pretrained("org/elmo-{name}", trust_remote_code=True)' in card.text
    assert local_hub.unhandled == []


# -- bad input --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("repo_id", ["org/bad name", "a/b/c", "org/-dash", ""])
def test_invalid_repo_id_is_refused(published_folder, local_hub, repo_id):
    with pytest.raises(HubError, match="Invalid repo id"):
        push_folder(published_folder, repo_id, token=local_hub.token)
    assert local_hub.requests == []


def test_missing_token_is_refused(published_folder, local_hub):
    with pytest.raises(HubError, match="No Hugging Face token .* --token"):
        push_folder(published_folder, "org/elmo")
    assert local_hub.requests == []


def test_offline_mode_is_refused(published_folder, local_hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubError, match="HF_HUB_OFFLINE"):
        push_folder(published_folder, "org/elmo", token=local_hub.token)
    assert local_hub.requests == []


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _shard_with_one_missing(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))


BREAKAGES = {
    "no weights": (lambda f: (f / "model.safetensors").unlink(), "no weights"),
    "missing shard": (_shard_with_one_missing, "lists model-00002-of-00002.safetensors, which is missing"),
    "no tokenizer": (lambda f: (f / "tokenizer_config.json").unlink(), "tokenizer_config.json is missing"),
    "no card": (lambda f: (f / "README.md").unlink(), "README.md"),
    "bad card metadata": (lambda f: (f / "README.md").write_text("---\nlicense: [\n---\n"), "unreadable YAML"),
    "not elmo": (lambda f: _edit_json(f / "config.json", lambda c: c.update(model_type="bert")), "must be 'elmo'"),
    "incomplete auto_map": (
        lambda f: _edit_json(f / "config.json", lambda c: c["auto_map"].pop("AutoModelForTokenClassification")),
        "auto_map has no 'AutoModelForTokenClassification' entry",
    ),
    "missing code file": (
        lambda f: (f / "crf.py").unlink(),
        r"modeling_elmo.py:\d+: imports .crf, but crf.py is missing",
    ),
    "h5py import": (
        lambda f: (f / "modeling_elmo.py").write_text((f / "modeling_elmo.py").read_text() + "\nimport h5py\n"),
        "imports 'h5py'; remote code may import only torch, transformers",
    ),
    "package-absolute import": (
        lambda f: (f / "crf.py").write_text("from modeling_elmo.character_ids import BOS_TOKEN\n"),
        "crf.py:1: imports 'modeling_elmo.character_ids'",
    ),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_incomplete_folder_is_refused_before_any_upload(published_folder, local_hub, tmp_path, breakage):
    folder = tmp_path / "folder"
    folder.mkdir()
    for name, content in folder_bytes(published_folder).items():
        (folder / name).write_bytes(content)
    breaker, message = BREAKAGES[breakage]
    breaker(folder)
    with pytest.raises(IncompleteRepoError, match=message):
        push_folder(folder, "org/elmo", token=local_hub.token)
    assert local_hub.requests == []


def test_cli_checks_the_push_target_before_converting(fixture_dir, local_hub, tmp_path, capsys):
    source = ["--options", str(fixture_dir / "options.json"), "--weights", str(fixture_dir / "lm_weights.hdf5")]
    assert main([*source, "--output", str(tmp_path / "a"), "--push-to-hub", "org/bad name", "--token", "t"]) == 1
    assert "Invalid repo id 'org/bad name'" in capsys.readouterr().err
    assert main([*source, "--output", str(tmp_path / "b"), "--push-to-hub", "org/elmo"]) == 1
    assert "No Hugging Face token" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*source, "--output", str(tmp_path / "c"), "--private", "--revision", "dev"])
    assert "--private, --revision: only used with --push-to-hub" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in "abc") and local_hub.requests == []


def test_card_template_with_a_missing_field_is_an_error(monkeypatch, published_folder):
    shipped = model_card.load_template  # the included parts (install.md) as shipped; the base card with a new field
    monkeypatch.setattr(
        model_card,
        "load_template",
        lambda name: shipped(name) + ("\nSee {{ paper_url }}.\n" if name == model_card.BASE_TEMPLATE else ""),
    )
    config = AutoModel.from_pretrained(published_folder).config
    with pytest.raises(ModelCardError, match="'elmo_base.md' uses a field that was not given: 'paper_url'"):
        model_card.render_base_model_card(config, sources={}, max_abs_difference=None)


def test_base_card_states_only_what_the_source_states():
    """Facts of a source without a license, with two languages, a README that holds Markdown, a file-less source."""
    facts = model_card.SourceFacts(
        title="ELMo (test)",
        origin="a test source",
        corpus="a corpus (10 tokens)",
        language=["nb", "nn"],
        license=None,
        license_text="not stated",
        source_notes="# Heading\n```\nfenced\n```",
    )
    sources = {"model.hdf5": {"location": "here", "sha256": "ab" * 32}, "architecture": {"location": "packaged"}}
    card = ModelCard(
        model_card.render_base_model_card(ElmoConfig(), sources=sources, max_abs_difference=None, source=facts)
    )
    assert (card.data.language, card.data.license) == (["nb", "nn"], "unknown")
    assert "Original license: not stated." in card.text and "Conversion check: not run" in card.text
    assert (
        f"| model.hdf5 | here | `{'ab' * 32}` |" in card.text
        and "| architecture | packaged | (not a file) |" in card.text
    )
    assert "\n    # Heading\n    ```\n    fenced\n    ```\n" in card.text  # quoted as an indented block
    assert "\n# Heading" not in card.text


# -- the fine-tuned (NER) card --------------------------------------------------------------------------------------


def test_ner_card(published_folder):
    labels = {0: "O", 1: "B-LOC", 2: "I-LOC"}
    tagger = ElmoForTokenClassification.from_pretrained(
        published_folder, id2label=labels, label2id={label: index for index, label in labels.items()}
    )
    with torch.no_grad():
        tagger.scalar_mix.scalar_parameters.copy_(torch.tensor([0.0, float(np.log(2.0)), 0.0]))
        tagger.scalar_mix.gamma.fill_(1.5)
    assert learned_scalar_mixes(tagger) == [
        {"name": "scalar_mix", "weights": pytest.approx([0.25, 0.5, 0.25]), "gamma": 1.5}
    ]
    dev, test = {"precision": 0.91, "recall": 0.89, "f1": 0.9}, {"precision": 0.87, "recall": 0.85, "f1": 0.86}
    text = render_ner_model_card(
        tagger, base_model=REPO_ID, dev_scores=dev, test_scores=test, repo_id="org/elmo-ner", training={"epochs": 3}
    )
    card = ModelCard(text)
    assert card.data.pipeline_tag == "token-classification" and card.data.base_model == REPO_ID
    assert card.data.datasets == ["conll2003"] and card.data.library_name == "transformers"
    assert {(r.dataset_split, r.metric_type, r.metric_value) for r in card.data.eval_results} == {
        (split, metric, value)
        for split, scores in (("validation", dev), ("test", test))
        for metric, value in scores.items()
    }
    assert "| dev | 0.9100 | 0.8900 | 0.9000 |" in text and "| test | 0.8700 | 0.8500 | 0.8600 |" in text
    assert "| `scalar_mix` | 0.2500 | 0.5000 | 0.2500 | 1.5000 |" in text
    assert "Labels: O, B-LOC, I-LOC." in text and "| epochs | 3 |" in text and INSTALL_LINE in text
    with pytest.raises(ModelCardError, match="dev_scores and test_scores"):
        render_ner_model_card(tagger, base_model=REPO_ID, dev_scores=dev, test_scores={})


@pytest.mark.parametrize("concat_layers", [False, True])
def test_classifier_card_shows_the_mix_or_the_concatenated_layers(published_folder, concat_layers):
    classifier = ElmoForSequenceClassification.from_pretrained(
        published_folder, num_labels=2, classifier_pooling="mean", classifier_concat_layers=concat_layers
    )
    text = render_classifier_model_card(
        classifier,
        base_model=REPO_ID,
        scores={"eval": {"eval_accuracy": 0.75}},
        data_files={"train": "train.jsonl"},
        text_columns=("sentence",),
        training={"epochs": 3},
    )
    assert "| validation | 0.7500 |" in text and INSTALL_LINE in text
    assert ("| `scalar_mix` | 0.3333 | 0.3333 | 0.3333 | 1.0000 |" in text) is not concat_layers
    assert ("## Learned scalar mix" in text) is not concat_layers
    assert ("each of its 3 layers mean pooled on its own" in text) is concat_layers


def test_every_card_says_how_to_install_the_package_today():
    """The package is not yet on PyPI: each card whose usage imports it includes `install.md`, which installs from the
    repository that pyproject.toml names and says that the install by name works once it is published."""
    install = " ".join(model_card.load_template("install.md").split())
    assert INSTALL_LINE in install
    assert "not yet published on PyPI; `pip install elmo-transformers` works once it is published" in install
    for name in (
        model_card.BASE_TEMPLATE,
        model_card.NER_TEMPLATE,
        model_card.CLASSIFIER_TEMPLATE,
        model_card.PRETRAINED_TEMPLATE,
    ):
        template = model_card.load_template(name)
        assert "import modeling_elmo" in template and '{% include "install.md" %}' in template, name
        assert "pip install" not in template, name  # the install line is install.md's alone


def test_the_package_root_is_exactly_the_remote_code():
    """
    The remote-code boundary is the package's top folder: every module there (but `__init__.py`) is one that
    save_pretrained copies, and none imports anything remote code cannot (tooling lives in the subpackages).
    """
    root_modules = {path.name for path in PACKAGE_DIR.glob("*.py")} - {"__init__.py"}
    assert root_modules == CODE_FILES
    assert code_folder_problems(PACKAGE_DIR, skip=frozenset({"__init__.py"})) == []


def test_the_boundary_check_finds_tooling_imports(tmp_path):
    (tmp_path / "modeling_x.py").write_text("import h5py\nfrom .conversion.convert import main\nfrom .crf import X\n")
    problems = code_folder_problems(tmp_path)
    assert any("imports 'h5py'" in problem for problem in problems)
    assert any("keep it flat" in problem for problem in problems)
    assert any("crf.py is missing" in problem for problem in problems)


def test_the_boundary_check_finds_a_cycle_of_relative_imports(tmp_path):
    """Transformers 4.x's `get_relative_import_files` loops forever on a cycle, even one only for type checkers."""
    (tmp_path / "modeling_x.py").write_text("from .registry_x import REGISTRY\n")
    (tmp_path / "registry_x.py").write_text("from .reference_x import EAGER\n")
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .registry_x import REGISTRY\nEAGER = 1\n"
    (tmp_path / "reference_x.py").write_text(guarded)
    assert code_folder_problems(tmp_path) == [
        "registry_x.py -> reference_x.py -> registry_x.py: a cycle of relative imports, which Transformers 4.x's "
        "copier never leaves"
    ]


def _relative_imports(module: str) -> set[str]:
    """What Transformers' copier reads as `module`'s relative imports: every `from .x import` line, wherever it is."""
    text = (PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8")
    return set(re.findall(r"^\s*from\s+\.(\S+)\s+import", text, flags=re.MULTILINE))


def _all_needed(module: str) -> set[str]:
    needed, todo = set(), [module]
    while todo:
        for imported in _relative_imports(todo.pop()) - needed:
            needed.add(imported)
            todo.append(imported)
    return needed - {module}


@pytest.mark.parametrize("module", ["configuration_elmo", "modeling_elmo", "tokenization_elmo", "pipeline_elmo"])
def test_each_file_transformers_loads_imports_every_module_it_needs_itself(module):
    """Transformers 4.x copies from a local folder only the modules that the loaded file itself imports (the config's
    first: every Auto class loads it before the class's own file), so each such file names everything it needs."""
    loaded_first = {"configuration_elmo", *_relative_imports("configuration_elmo")}
    copied = _relative_imports(module) | (loaded_first if module != "configuration_elmo" else set())
    assert _all_needed(module) - copied == set()
