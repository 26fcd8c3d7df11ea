"""`elmo-convert --model-dir`: a model of the NLPL vector repository (http://vectors.nlpl.eu/repository/), read by
`modeling_elmo.formats.nlpl` (a folder, a ZIP, or a ZIP's http(s) URL downloaded once into the cache), converted
like a bilm-tf checkpoint; its `meta.json` and README give the model card's facts, its vocabulary is kept in the
converted folder as `vocab.txt` (from which `cache_vocabulary` precomputes a token-embedding table).
"""

import os
from pathlib import Path
from typing import Any

from ..formats.nlpl import META_FILE, NlplModel, NlplModelError, model_message, open_nlpl_model
from ..formats.original_checkpoint import OriginalCheckpointError
from ..hub.source_facts import ELMO_CITATION, SourceFacts
from .convert import (
    ConversionResult,
    converted_output_claimed,
    max_difference_to_original,
    model_from_original,
    resolve_source,
    sha256_of,
    write_model_folder,
)
from .presets import NLPL_CITATION, card_language_code


def archive_sources(
    sources: dict[str, dict[str, str]], extracted: Path, location: str, archive_path: Path
) -> dict[str, dict[str, str]]:
    """A card's `sources` of a model read from `extracted`, the folder that `archive_path` (given as `location`)
    was extracted to: the archive with its sha256 first, then each file named as a member of it."""
    prefix = f"{extracted}{os.sep}"
    relabelled = {
        f"{archive_path.name}: {name}": {
            **entry,
            "location": entry["location"].replace(prefix, f"member of {location}: "),
        }
        for name, entry in sources.items()
    }
    return {archive_path.name: {"location": location, "sha256": sha256_of(archive_path)}, **relabelled}


def _corpora(meta: dict[str, Any]) -> list[dict[str, Any]]:
    corpora = meta.get("corpus", [])
    corpora = [corpora] if isinstance(corpora, dict) else corpora
    if not isinstance(corpora, list) or not all(isinstance(corpus, dict) for corpus in corpora):
        raise NlplModelError(f"{META_FILE}: 'corpus' must be a list of objects, got {type(corpora).__name__}.")
    return corpora


def _corpus_text(index: int, corpus: dict[str, Any]) -> str:
    description, tokens = corpus.get("description"), corpus.get("tokens")
    if not isinstance(description, str) or not description.strip():
        description = f"corpus {corpus['id']}" if "id" in corpus else "a corpus without a description"
    if tokens is None:
        return description.strip()
    if type(tokens) is not int or tokens < 0:
        raise NlplModelError(f"{META_FILE}: corpus[{index}].tokens must be a count of tokens, got {tokens!r}.")
    return f"{description.strip()} ({tokens:,} tokens)"


def meta_languages(meta: dict[str, Any]) -> list[str]:
    """The card language codes of the corpora of a `meta.json` (ISO 639-1 where one exists, else 639-3)."""
    codes = []
    for index, corpus in enumerate(_corpora(meta)):
        if "language" not in corpus:
            continue
        try:
            codes.append(card_language_code(str(corpus["language"])))
        except ValueError as error:
            raise NlplModelError(f"{META_FILE}: corpus[{index}].language: {error}.") from None
    return list(dict.fromkeys(codes))


def nlpl_source_facts(model: NlplModel, fallback_language: str | None = None) -> SourceFacts:
    """What the card of a converted NLPL model states, from its `meta.json` and README (nothing is assumed: a fact
    the source does not state is written as not stated). `fallback_language`: the card's language code when
    `meta.json` names none."""
    meta = model.meta or {}
    corpora = [_corpus_text(index, corpus) for index, corpus in enumerate(_corpora(meta))]
    languages = meta_languages(meta) or ([fallback_language] if fallback_language else [])
    model_id, license_name = meta.get("id"), meta.get("license")
    entry = (
        f"model {model_id} of the NLPL vector repository"
        if model_id is not None
        else "an NLPL vector repository model"
    )
    handle = meta.get("handle")
    return SourceFacts(
        title=f"ELMo (NLPL {model_id})" if model_id is not None else "ELMo (NLPL)",
        origin=f"{entry} ({handle})" if isinstance(handle, str) else entry,
        corpus="; ".join(corpora) if corpora else f"not stated (no corpus in {model.location}'s {META_FILE})",
        language=languages[0] if len(languages) == 1 else languages or None,
        license="other" if isinstance(license_name, str) and license_name.strip() else None,
        license_text=(
            license_name.strip()
            if isinstance(license_name, str) and license_name.strip()
            else f"not stated in {META_FILE}; see the model's README and its NLPL repository entry"
        ),
        citations=(ELMO_CITATION, NLPL_CITATION),
        source_notes=model.readme,
    )


def convert_nlpl_model(
    model_dir: str,
    output_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    verify: bool = False,
    cache_dir: str | os.PathLike | None = None,
    repo_id: str | None = None,
    fallback_language: str | None = None,
    language_required: bool = False,
) -> ConversionResult:
    """Convert the NLPL model `model_dir` (folder, ZIP or ZIP URL) into a model folder, as `convert_checkpoint`
    does an options + weights pair. The card's language comes from `meta.json`, else `fallback_language`; with
    `language_required`, a model with neither is refused."""
    output_dir = Path(output_dir)
    with converted_output_claimed(output_dir, overwrite, (model_dir,)):
        with open_nlpl_model(resolve_source(model_dir, cache_dir), model_dir) as nlpl:
            facts = nlpl_source_facts(nlpl, fallback_language)
            if language_required and not facts.language:
                raise NlplModelError(
                    f"{model_dir}: cannot tell the model's language: no language in a {META_FILE}, and the name is "
                    "not an NLPL id, ISO 639 code or language name of the table in docs/conversion-sources.md."
                )
            try:
                model, tokenizer = model_from_original(nlpl.options, nlpl.weights)
            except OriginalCheckpointError as error:  # name the archive, not the temporary folder it was extracted to
                raise NlplModelError(model_message(str(error), nlpl.files_folder, nlpl.location)) from None
            sources = {
                name: {"location": location, "sha256": sha256_of(path)}
                for name, (location, path) in nlpl.sources.items()
            }
            result = ConversionResult(output_dir=output_dir, config=model.config, sources=sources)
            verify_against = (lambda folder: max_difference_to_original(folder, model)) if verify else None
            write_model_folder(
                model, tokenizer, result, verify_against, facts=facts, repo_id=repo_id, vocabulary=nlpl.vocabulary
            )
    return result


__all__ = ["archive_sources", "convert_nlpl_model", "meta_languages", "nlpl_source_facts"]
