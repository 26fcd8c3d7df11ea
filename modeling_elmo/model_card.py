"""Model cards (the `README.md` of a converted folder) rendered from the templates in `model_cards/`."""

from importlib import resources

from huggingface_hub import ModelCard, ModelCardData

from .configuration_elmo import ElmoConfig

UNKNOWN_CORPUS = "unknown (not one of the official presets)"


def load_template(name: str) -> str:
    """Text of the template `model_cards/<name>` shipped with the package."""
    return resources.files("modeling_elmo.model_cards").joinpath(name).read_text(encoding="utf-8")


def render_base_model_card(
    config: ElmoConfig,
    *,
    sources: dict[str, dict[str, str]],
    max_abs_difference: float | None,
    preset=None,
    repo_id: str = "path/to/this/folder",
) -> str:
    """Card of a converted biLM: architecture numbers, provenance, verification result, usage, caveats."""
    card_data = ModelCardData(
        language="en",
        license="apache-2.0",
        library_name="transformers",
        pipeline_tag="feature-extraction",
        tags=["elmo", "feature-extraction", "bilm", "contextual-embeddings"],
    )
    verification = (
        f"all biLM layers of the reloaded folder match the original weights to max abs difference "
        f"{max_abs_difference:.3g} on sample sentences."
        if max_abs_difference is not None
        else "not run (convert with `--verify` to measure it)."
    )
    card = ModelCard.from_template(
        card_data,
        template_str=load_template("elmo_base.md"),
        model_title=f"ELMo ({preset.name})" if preset else "ELMo",
        corpus=preset.corpus if preset else UNKNOWN_CORPUS,
        sources=sources,
        verification=verification,
        repo_id=repo_id,
        max_word_bytes=config.max_characters_per_token - 2,
        hidden_size=config.hidden_size,
        num_char_filters=config.num_char_filters,
        **{
            key: getattr(config, key)
            for key in (
                "char_filters",
                "char_embedding_dim",
                "char_activation",
                "num_highway_layers",
                "num_hidden_layers",
                "lstm_cell_size",
                "projection_dim",
                "use_skip_connections",
                "cell_clip",
                "proj_clip",
            )
        },
    )
    return str(card)
