"""`elmo-convert --from elmoformanylangs`: an ELMoForManyLangs model folder -> a complete Transformers model folder
(as `convert.py` writes for the original format), verified against `efml_reference` with `--verify`."""

import os
from pathlib import Path

import torch

from ..formats.efml import EfmlModel, read_efml_model
from ..hub.source_facts import SourceFacts
from ..modeling_elmo import ElmoModel
from ..tokenization_elmo import ElmoTokenizer
from .convert import (
    VERIFICATION_SENTENCES,
    ConversionResult,
    converted_output_claimed,
    write_model_folder,
)
from .efml_reference import efml_sentence_layers
from .nlpl import archive_sources
from .presets import efml_language, efml_source_facts

UNKNOWN_CHARACTER = "\U000f0000"  # a private-use code point: no lexicon holds it


def verification_sentences(efml: EfmlModel, count: int = 6, length: int = 7) -> list[list[str]]:
    """Sentences for `--verify`: the generic ones, sentences of the lexicon's own words (or, without a word lexicon,
    of its characters in fives), one word longer than the limit and one with a character missing from the lexicon."""
    if efml.word_lexicon is not None:
        words = [word for word in efml.word_lexicon if not (word.startswith("<") and word.endswith(">"))]
    else:
        chars = [char for char in efml.char_lexicon if len(char) == 1]
        words = ["".join(chars[start : start + 5]) for start in range(0, len(chars), 5)]
    own = [words[start : start + length] for start in range(0, min(len(words), count * length), length)]
    spelled = "".join(char for char in efml.char_lexicon if len(char) == 1)
    long_word = (spelled * (efml.config.max_characters_per_token // max(len(spelled), 1) + 2))[:80]
    unknown = (words[0] if words else "a") + UNKNOWN_CHARACTER
    return [*VERIFICATION_SENTENCES, *[sentence for sentence in own if sentence], [long_word, unknown, "<bos>"]]


def max_difference_to_efml(folder: Path, efml: EfmlModel) -> float:
    """Reload `folder` with the Auto classes and compare every layer of every verification sentence with EFML's
    computation rebuilt from the pickles (`efml_reference`), both from fresh LSTM states and both in float64: the
    figure checks the conversion (weights, lexicons, architecture), not float32 rounding, which on random weights of
    a large scale reaches 1e-5 in EFML itself (compared with its own computation in float64)."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(folder, dtype=torch.float64).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sentences = verification_sentences(efml)
    batch = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        found = torch.stack(model(**batch, output_hidden_states=True).hidden_states, dim=1)  # (batch, layers, w, 2P)
    differences = []
    for row, sentence in enumerate(sentences):
        expected = efml_sentence_layers(
            efml.efml_state, efml.architecture, efml.char_lexicon, efml.word_lexicon, sentence, torch.float64
        )
        differences.append((found[row, :, : len(sentence)] - expected).abs().max())
    return float(torch.stack(differences).max())  # a NaN anywhere stays


def convert_efml(
    model_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    repo_id: str | None = None,
    facts: SourceFacts | None = None,
    archive: tuple[str, Path] | None = None,
) -> ConversionResult:
    """Convert the ELMoForManyLangs folder `model_dir` into a model folder `output_dir` (all or nothing; see
    `convert.py`). `verify` compares every layer of the written folder with `efml_reference` (tolerance 1e-5).
    `facts`: what the card states (default: `efml_source_facts` of the language the folder's name stands for);
    `archive`: (location, local path) of the ZIP that `model_dir` was extracted from, listed on the card."""
    output_dir = Path(output_dir)
    with converted_output_claimed(output_dir, overwrite, (str(model_dir),)):
        efml = read_efml_model(model_dir)
        model = ElmoModel(efml.config)
        model.load_state_dict(efml.state_dict, strict=True)
        model.eval()
        tokenizer = ElmoTokenizer(
            max_characters_per_token=efml.config.max_characters_per_token,
            char_lexicon=efml.char_lexicon,
            word_lexicon=efml.word_lexicon,
        )
        sources = archive_sources(efml.sources, Path(model_dir), *archive) if archive else efml.sources
        result = ConversionResult(output_dir=output_dir, config=efml.config, sources=sources)
        verify_against = (lambda folder: max_difference_to_efml(folder, efml)) if verify else None
        facts = facts or efml_source_facts(efml_language(Path(model_dir).resolve().name))
        write_model_folder(model, tokenizer, result, verify_against, facts=facts, repo_id=repo_id)
    return result


__all__ = ["convert_efml", "max_difference_to_efml"]
