"""
The one loader of a converted ELMo model (a Transformers folder or a Hub id): `elmo-embed`, `ElmoBatchEmbedder`,
`elmo serve` (through `loading.load_model`) and the AllenNLP, ELMoForManyLangs, simple_elmo and flair drop-ins all load
through it.

A location that can only fail answers at once, in one line (`ModelLoadError`), before Transformers is asked: a name
that is neither an existing path nor a Hub id `namespace/name` (see `foundation.model_location.NO_SUCH_FOLDER`), a
Hub id that is not in the local cache while the Hub is offline (`HF_HUB_OFFLINE=1`), and a Hub id the Hub does not
answer for: it is asked once, without huggingface_hub's retries (which take about 25 s on an unreachable Hub). A Hub
id in the local cache loads as Transformers loads it.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..configuration_elmo import ElmoConfig
from ..foundation.errors import ToolError, one_line
from ..foundation.model_location import NO_SUCH_FOLDER, NOT_A_MODEL_FOLDER, missing_model_folder, model_folder_problem
from ..modeling_elmo import ElmoModel
from ..tokenization_elmo import ElmoTokenizer

CONFIG_FILE = "config.json"


class ModelLoadError(ToolError, ValueError):
    """A location that holds no loadable ELMo model: `location` and the `reason` (one line), said as `LOCATION:
    REASON`."""

    def __init__(self, location: str, reason: str):
        super().__init__(f"{location}: {reason}")
        self.location, self.reason = location, reason


def check_reachable(location: str) -> None:
    """Refuse `location` at once (`ModelLoadError`) where loading it can only fail (see the module docstring)."""
    if Path(location).expanduser().exists():
        return
    if missing_model_folder(location):
        raise ModelLoadError(location, NO_SUCH_FOLDER)
    from huggingface_hub import get_hf_file_metadata, hf_hub_url, is_offline_mode, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(location, CONFIG_FILE), str):
        return
    if is_offline_mode():
        raise ModelLoadError(location, "not in the local Hub cache, and the Hub is offline (HF_HUB_OFFLINE)")
    try:
        get_hf_file_metadata(hf_hub_url(location, CONFIG_FILE))  # one request: no retries (retry_on_errors=False)
    except Exception as error:  # the Hub's answer (no such repo, no access) or the network's
        reason = f"not loadable from the Hub ({type(error).__name__}: {one_line(error, first=True)})"
        raise ModelLoadError(location, reason) from None


def load_pretrained_model(location: str | os.PathLike, **from_pretrained_kwargs: Any) -> ElmoModel:
    """The `ElmoModel` at `location` (`from_pretrained_kwargs` go to `ElmoModel.from_pretrained`: `dtype`,
    `add_scalar_mixes`, ...). A location without an ELMo model is one line (`ModelLoadError`)."""
    location = os.fspath(location)
    check_reachable(location)
    if Path(location).is_dir() and model_folder_problem(location) is not None:  # an original checkpoint's folder?
        raise ModelLoadError(location, NOT_A_MODEL_FOLDER)
    with _one_line(location):
        model_type = ElmoConfig.get_config_dict(location)[0].get("model_type")
    if model_type != ElmoConfig.model_type:
        raise ModelLoadError(location, f"a {model_type!r} model, not an ELMo model")
    with _one_line(location):
        return ElmoModel.from_pretrained(location, **from_pretrained_kwargs)


def load_pretrained_tokenizer(location: str | os.PathLike) -> ElmoTokenizer:
    """The `ElmoTokenizer` saved with the model at `location`; one line (`ModelLoadError`) where there is none."""
    location = os.fspath(location)
    check_reachable(location)
    with _one_line(location):
        return ElmoTokenizer.from_pretrained(location)


@contextmanager
def _one_line(location: str) -> Iterator[None]:
    """Transformers' refusals of `location`'s files (`OSError`, `ValueError`) as a `ModelLoadError`."""
    try:
        yield
    except (OSError, ValueError) as error:
        raise ModelLoadError(location, one_line(error, first=True)) from None
