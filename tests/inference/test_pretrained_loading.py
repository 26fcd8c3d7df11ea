"""The one loader of a converted folder or Hub id (`inference/pretrained.py`, issue 41 item 2): it loads what the
model's own `from_pretrained` loads, and a location that can only fail answers in one line without the Hub's retries
(no request at all for a name that is not a Hub id or while offline; one request for a Hub id the Hub does not
answer)."""

import httpx2
import numpy as np
import pytest
import torch
from huggingface_hub import constants
from huggingface_hub.utils import get_session
from original_numpy import original_layers

from modeling_elmo import ElmoModel, ElmoTokenizer
from modeling_elmo.allennlp import ConfigurationError, Elmo
from modeling_elmo.elmoformanylangs import Embedder
from modeling_elmo.formats.efml import EfmlFormatError
from modeling_elmo.foundation.model_location import NO_SUCH_FOLDER
from modeling_elmo.inference.pretrained import ModelLoadError, load_pretrained_model, load_pretrained_tokenizer


@pytest.fixture
def requests(monkeypatch, tmp_path):
    """The Hub online but unreachable, with an empty cache: every HTTP request huggingface_hub sends for a model
    fails to connect and is recorded (huggingface_hub's own requests about itself are left out)."""
    sent = []

    def unreachable(client, request, **kwargs):
        if "/api/" not in str(request.url):
            sent.append(str(request.url))
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)

    monkeypatch.setattr(type(get_session()), "send", unreachable)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    return sent


def refusal(location: str) -> ModelLoadError:
    with pytest.raises(ModelLoadError) as caught:
        load_pretrained_model(location)
    assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{location}: ")
    return caught.value


@pytest.mark.parametrize("location", ["zhs.model", "models/zhs.model/", "/no/such/folder", "./namespace/name"])
def test_a_name_that_is_not_a_hub_id_is_refused_without_a_request(requests, location):
    assert refusal(location).reason == NO_SUCH_FOLDER
    assert requests == []


def test_an_unreachable_hub_is_asked_once_without_retries(requests):
    error = refusal("nobody/no-such-elmo")
    assert error.reason.startswith("not loadable from the Hub (ConnectError: ")
    assert len(requests) == 1 and requests[0].endswith("/nobody/no-such-elmo/resolve/main/config.json")


def test_offline_a_hub_id_not_in_the_cache_is_refused_without_a_request(requests, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert "the Hub is offline" in refusal("nobody/no-such-elmo").reason
    assert requests == []


def test_the_drop_ins_answer_a_missing_model_without_a_request(requests):
    """`Embedder("zhs.model")` (ELMoForManyLangs) and AllenNLP's `Elmo` with a converted model's name."""
    with pytest.raises(EfmlFormatError, match=r"^zhs\.model: neither an ELMoForManyLangs model folder .*no such"):
        Embedder("zhs.model")
    with pytest.raises(ConfigurationError, match="^nobody/no-such-elmo: not a converted ELMo model folder or Hub"):
        Elmo("nobody/no-such-elmo", None, 1)
    assert len(requests) == 1  # the Hub id's one request; none for the name that is not one


def test_a_converted_folder_loads_the_original_model(converted_fixture, fixture_dir):
    """What the loader gives computes the original checkpoint's layers (the numpy reference of bilm-tf's graph, not
    `from_pretrained`, which the loader calls: issue 46), with the folder's own tokenizer."""
    model = load_pretrained_model(converted_fixture, add_scalar_mixes=False)
    tokenizer = load_pretrained_tokenizer(converted_fixture)
    assert isinstance(model, ElmoModel) and isinstance(tokenizer, ElmoTokenizer)
    words = ["The", "bank", "closed", "."]
    encoded = tokenizer([words], is_split_into_words=True, return_tensors="pt")
    with torch.inference_mode():
        layers = torch.stack(model(input_ids=encoded["input_ids"], output_hidden_states=True).hidden_states)[:, 0]
    expected = original_layers(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5", words)
    assert np.abs(layers.double().numpy() - expected).max() <= 2e-6


def test_a_folder_of_another_model_type_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    assert refusal(str(tmp_path)).reason == "a 'bert' model, not an ELMo model"
