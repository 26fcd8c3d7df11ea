"""`ELMoEmbeddings`: flair's ELMo token embeddings, with flair's arguments, computed by `ElmoModel`.

    from modeling_elmo.flair import ELMoEmbeddings      # instead of: from flair.embeddings import ELMoEmbeddings
    embeddings = ELMoEmbeddings("elmo-fixture")          # a converted folder, a Hub id or a preset name

`model`: a model folder or Hub repo id (converted with `elmo-convert`), or one of the preset names (`small`, `medium`,
`original`, `original-5.5b`: AllenNLP's original weights, downloaded once and converted in memory); `options_file` and
`weight_file`: an original checkpoint (local paths or URLs), which takes precedence over `model`, as in flair.
`embedding_mode`: `"all"` concatenates every layer (token layer, then each biLSTM layer: `(num_hidden_layers + 1) *
2 * projection_dim` values per word), `"top"` is the top layer, `"average"` the mean of the layers, as flair's.

The biLM stays fixed (flair trains what is on top); a saved flair model keeps the biLM's config and weights, so it
loads without the original folder (after `import modeling_elmo.flair`, which registers the class with flair).
"""

import os
from typing import Any

import flair
import torch
from flair.data import Sentence
from flair.embeddings import TokenEmbeddings
from flair.embeddings.base import register_embeddings

from .. import ElmoConfig, ElmoModel, ElmoTokenizer

EMBEDDING_MODES = ("all", "top", "average")


def _load(model: str, options_file: str | None, weight_file: str | None) -> tuple[ElmoModel, ElmoTokenizer]:
    """The biLM and tokenizer that flair's arguments name (see the module docstring); a folder or Hub id loads
    through the package's one loader (`inference.pretrained`), its refusal one line naming `model`."""
    from ..conversion.convert import model_from_original, resolve_source
    from ..conversion.presets import PRESETS
    from ..inference.pretrained import ModelLoadError, load_pretrained_model, load_pretrained_tokenizer

    if (options_file is None) != (weight_file is None):
        raise ValueError(
            "ELMoEmbeddings: give both options_file and weight_file (an original checkpoint), or neither."
        )
    if options_file is None and model in PRESETS:
        options_file, weight_file = PRESETS[model].source_urls()
    if options_file is not None:
        return model_from_original(resolve_source(options_file), resolve_source(weight_file))
    if not isinstance(model, str | os.PathLike):
        raise TypeError(f"ELMoEmbeddings: model must be a folder, a Hub id or a preset name, got {model!r}.")
    try:
        return load_pretrained_model(model), load_pretrained_tokenizer(model)
    except ModelLoadError as error:
        raise ValueError(f"ELMoEmbeddings: {error}") from None


@register_embeddings
class ELMoEmbeddings(TokenEmbeddings):
    """Contextual word embeddings of an ELMo biLM for flair (see the module docstring)."""

    def __init__(
        self,
        model: str = "original",
        options_file: str | None = None,
        weight_file: str | None = None,
        embedding_mode: str = "all",
    ):
        if embedding_mode not in EMBEDDING_MODES:
            raise ValueError(
                f"ELMoEmbeddings: embedding_mode must be one of {EMBEDDING_MODES}, got {embedding_mode!r}."
            )
        elmo, tokenizer = _load(model, options_file, weight_file)
        self._set_up(elmo, tokenizer, str(model) if options_file is None else str(options_file), embedding_mode)

    def _set_up(self, elmo: ElmoModel, tokenizer: ElmoTokenizer, model_name: str, embedding_mode: str) -> None:
        self.name = f"elmo-{model_name}-{embedding_mode}"
        self.static_embeddings = True
        super().__init__()
        self.model_name, self.embedding_mode = model_name, embedding_mode
        self.tokenizer = tokenizer
        self.elmo = elmo.eval().requires_grad_(False)
        layers = elmo.config.num_hidden_layers + 1 if embedding_mode == "all" else 1
        self._embedding_length = layers * elmo.config.hidden_size
        self.to(flair.device)

    @property
    def embedding_length(self) -> int:
        return self._embedding_length

    def train(self, mode: bool = True) -> "ELMoEmbeddings":
        """The biLM stays in eval mode (fixed, no dropout) while flair trains the rest."""
        super().train(mode)
        self.elmo.eval()
        return self

    def word_vectors(self, words: list[list[str]]) -> torch.Tensor:
        """`(batch, words, embedding_length)` vectors of pre-split sentences (zeros at padding)."""
        batch = self.tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
        batch = {key: value.to(flair.device) for key, value in batch.items()}
        with torch.no_grad():
            layers = torch.stack(self.elmo(**batch, output_hidden_states=True).hidden_states)  # (L + 1, B, W, D)
        if self.embedding_mode == "top":
            return layers[-1]
        if self.embedding_mode == "average":
            return layers.mean(dim=0)
        return torch.cat(layers.unbind(dim=0), dim=-1)

    def _add_embeddings_internal(self, sentences: list[Sentence]) -> list[Sentence]:
        vectors = self.word_vectors([[token.text for token in sentence] for sentence in sentences])
        for sentence, sentence_vectors in zip(sentences, vectors, strict=True):
            for token, vector in zip(sentence, sentence_vectors, strict=False):
                token.set_embedding(self.name, vector)
        return sentences

    def to_params(self) -> dict[str, Any]:
        """What `from_params` rebuilds the module from (the weights travel in flair's state dict)."""
        lexicons = {key: self.tokenizer.init_kwargs.get(key) for key in ("char_lexicon", "word_lexicon")}
        return {
            "model": self.model_name,
            "embedding_mode": self.embedding_mode,
            "config": self.elmo.config.to_dict(),
            "tokenizer": {"max_characters_per_token": self.tokenizer.max_characters_per_token, **lexicons},
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "ELMoEmbeddings":
        embeddings = cls.__new__(cls)
        elmo = ElmoModel(ElmoConfig.from_dict(params["config"]))
        tokenizer = ElmoTokenizer(**params["tokenizer"])
        embeddings._set_up(elmo, tokenizer, params["model"], params["embedding_mode"])
        return embeddings

    def __str__(self) -> str:
        return self.name


__all__ = ["EMBEDDING_MODES", "ELMoEmbeddings"]
