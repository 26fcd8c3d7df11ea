"""Where the AllenNLP-style classes get their `ElmoModel`: an original options JSON + HDF5 weight file (local paths
or URLs, downloaded once into the converter's cache), or a converted folder or Hub id (`weight_file=None`)."""

import os

from ..conversion.convert import ConversionError, resolve_source
from ..formats.original_checkpoint import OriginalCheckpointError, load_original_checkpoint
from ..foundation.errors import one_line
from ..inference.pretrained import ModelLoadError, load_pretrained_model
from ..modeling_elmo import ElmoModel


class ConfigurationError(ValueError):
    """An argument, file or input that AllenNLP's ELMo API cannot work with (AllenNLP's name for it); the message
    names the file, argument or shape."""


def _describe(value: object) -> str:
    return repr(value) if isinstance(value, str | os.PathLike) else f"a {type(value).__name__}"


def load_elmo_model(options_file: str | os.PathLike, weight_file: str | os.PathLike | None) -> ElmoModel:
    """
    The biLM (in eval mode, float32, no scalar mixes) of `options_file` + `weight_file` (paths or http(s) URLs of an
    original checkpoint), or, with `weight_file=None`, of the converted folder or Hub id `options_file`.
    """
    if not isinstance(options_file, str | os.PathLike):
        raise ConfigurationError(f"options_file must be a path, URL or model folder, got {_describe(options_file)}.")
    if weight_file is None:
        return _load_converted(os.fspath(options_file))
    if not isinstance(weight_file, str | os.PathLike):
        raise ConfigurationError(f"weight_file must be a path or URL, got {_describe(weight_file)}.")
    try:
        config, state_dict = load_original_checkpoint(
            resolve_source(os.fspath(options_file)), resolve_source(os.fspath(weight_file))
        )
    except (OriginalCheckpointError, ConversionError) as error:
        raise ConfigurationError(one_line(error)) from None  # HTTP errors have several lines
    model = ElmoModel(config, add_scalar_mixes=False)
    model.load_state_dict(state_dict, strict=True)
    return model.eval()


def _load_converted(location: str) -> ElmoModel:
    """A converted folder or Hub id; the original format needs both files."""
    if location.endswith(".json") or os.path.isfile(location):
        raise ConfigurationError(
            f"weight_file is None, so options_file must be a converted model folder or Hub id, but {location!r} is a "
            "file: pass the original weight file (HDF5) as weight_file."
        )
    try:
        model = load_pretrained_model(location, add_scalar_mixes=False)
    except ModelLoadError as error:
        raise ConfigurationError(f"{location}: not a converted ELMo model folder or Hub id ({error.reason})") from None
    if model.config.char_input != "bytes" or model.config.has_word_embeddings:
        raise ConfigurationError(
            f"{location}: this model reads a character lexicon or word ids, not AllenNLP's byte character ids."
        )
    return model.float().eval()
