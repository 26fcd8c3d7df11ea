"""Where `Embedder` gets its biLM and tokenizer: an ELMoForManyLangs model folder (`config.json` + `char.dic` [+
`word.dic`] + `token_embedder.pkl` / `encoder.pkl`, read as `elmo-convert --from elmoformanylangs` reads it), or a
converted model folder or Hub id (`from_pretrained`)."""

import os
from pathlib import Path
from typing import Any, NamedTuple

from ..configuration_elmo import ElmoConfig
from ..formats.efml import TOKEN_EMBEDDER_FILE, EfmlFormatError, find_architecture, read_efml_model
from ..inference.pretrained import ModelLoadError, load_pretrained_model, load_pretrained_tokenizer
from ..modeling_elmo import ElmoModel
from ..tokenization_elmo import ElmoTokenizer

EFML_FILES = ("char.dic", TOKEN_EMBEDDER_FILE)  # either marks a folder as ELMoForManyLangs' own


class LoadedModel(NamedTuple):
    """The biLM (float32, eval mode, stateless config), its tokenizer, EFML's `config` (the architecture JSON as a
    dict) and the lexicons as EFML holds them (token -> EFML id; `None` without one)."""

    model: ElmoModel
    tokenizer: ElmoTokenizer
    config: dict[str, Any]
    char_lexicon: dict[str, int] | None
    word_lexicon: dict[str, int] | None


def architecture_of(config: ElmoConfig) -> dict[str, Any]:
    """EFML's architecture JSON (its `token_embedder` and `encoder` sections) for a converted model's config."""
    return {
        "token_embedder": {
            "name": "cnn",
            "activation": config.char_activation,
            "filters": [list(pair) for pair in config.char_filters],
            "n_highway": config.num_highway_layers,
            "word_dim": config.word_embedding_dim if config.has_word_embeddings else 0,
            "char_dim": config.char_embedding_dim,
            "max_characters_per_token": config.max_characters_per_token,
        },
        "encoder": {
            "name": "elmo",
            "projection_dim": config.projection_dim,
            "cell_clip": config.cell_clip or 0,
            "proj_clip": config.proj_clip or 0,
            "dim": config.lstm_cell_size,
            "n_layers": config.num_hidden_layers,
        },
    }


def _efml_ids(tokens: dict[str, int] | None) -> dict[str, int] | None:
    """A tokenizer lexicon (ids shifted by one, 0 is padding) as EFML's dict (ids from 0)."""
    return None if tokens is None else {token: index - 1 for token, index in tokens.items()}


def _load_efml_folder(model_dir: Path) -> LoadedModel:
    efml = read_efml_model(model_dir)
    model = ElmoModel(efml.config, add_scalar_mixes=False)
    model.load_state_dict(efml.state_dict, strict=True)
    tokenizer = ElmoTokenizer(
        max_characters_per_token=efml.config.max_characters_per_token,
        char_lexicon=efml.char_lexicon,
        word_lexicon=efml.word_lexicon,
    )
    config = find_architecture(model_dir)[0]
    return _loaded(model, tokenizer, config)


def _load_converted(location: str) -> LoadedModel:
    try:
        model = load_pretrained_model(location, add_scalar_mixes=False)
        tokenizer = load_pretrained_tokenizer(location)
    except ModelLoadError as error:
        raise EfmlFormatError(
            f"{location}: neither an ELMoForManyLangs model folder (no {' or '.join(EFML_FILES)}) nor a converted "
            f"model folder or Hub id ({error.reason})"
        ) from None
    return _loaded(model, tokenizer, architecture_of(model.config))


def _loaded(model: ElmoModel, tokenizer: ElmoTokenizer, config: dict[str, Any]) -> LoadedModel:
    model.config.stateful = False  # `Embedder` passes the states itself when asked to carry them
    lexicon = tokenizer.lexicon
    return LoadedModel(
        model.float().eval(),
        tokenizer,
        config,
        _efml_ids(lexicon.char_ids if lexicon else None),
        _efml_ids(lexicon.word_ids if lexicon else None),
    )


def load_embedder_model(model_dir: str | os.PathLike) -> LoadedModel:
    """`model_dir`: an ELMoForManyLangs folder (recognised by its `char.dic` or `token_embedder.pkl`), else a
    converted folder or Hub id. Every problem is one line (`EfmlFormatError`, a `ValueError`) naming the file."""
    if not isinstance(model_dir, str | os.PathLike):
        raise TypeError(f"model_dir must be a path or Hub id, got a {type(model_dir).__name__}.")
    location = os.fspath(model_dir)
    if any((Path(location) / name).is_file() for name in EFML_FILES):
        return _load_efml_folder(Path(location))
    if os.path.isfile(location):
        raise EfmlFormatError(f"{location} is a file: model_dir must be a model folder or Hub id.")
    return _load_converted(location)


__all__ = ["LoadedModel", "architecture_of", "load_embedder_model"]
