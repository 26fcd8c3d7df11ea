"""Model cards (the `README.md` of a published folder) rendered from the templates in `modeling_elmo/model_cards/`,
for the commands that write a model folder: `elmo-convert` (and `elmo-publish`), `elmo-train-ner`,
`elmo-train-classifier` and `elmo-pretrain`.

Templates are Jinja2 rendered with `StrictUndefined`: a field the template uses but the renderer does not supply is an
error that names the template and the field, never a silently empty spot on a published card.
"""

import json
from collections.abc import Mapping
from importlib import resources

import jinja2
import torch
from huggingface_hub import EvalResult, ModelCardData
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ..configuration_elmo import ElmoConfig
from ..foundation.errors import ToolError
from ..modeling_elmo import ElmoPreTrainedModel, ElmoScalarMix
from .source_facts import ALLENNLP_SOURCE, ORIGINAL_LICENSE, SourceFacts

BASE_TEMPLATE = "elmo_base.md"
NER_TEMPLATE = "elmo_ner.md"
CLASSIFIER_TEMPLATE = "elmo_classifier.md"
CLASSIFIER_METRICS = ("accuracy", "f1", "macro_f1", "mse", "mae")
PRETRAINED_TEMPLATE = "elmo_pretrained.md"
LOCAL_FOLDER = "path/to/this/folder"


class ModelCardError(ToolError, ValueError):
    """A card that cannot be rendered: missing template, missing field or bad argument."""


def load_template(name: str) -> str:
    """Text of the template `model_cards/<name>` shipped with the package."""
    try:
        return resources.files("modeling_elmo.model_cards").joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelCardError(f"No model card template {name!r} in modeling_elmo.model_cards.") from None


def render_card(template_name: str, card_data: ModelCardData, **fields: object) -> str:
    """Render `model_cards/<template_name>` with the YAML metadata `card_data` and the template's `fields`."""
    environment = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        loader=jinja2.FunctionLoader(load_template),  # `{% include "quantization.md" %}`: the shared parts
    )
    if fields.get("quantization"):
        card_data.tags = [*(card_data.tags or []), "quantized"]
    try:
        return environment.from_string(load_template(template_name)).render(card_data=card_data.to_yaml(), **fields)
    except jinja2.UndefinedError as error:
        raise ModelCardError(
            f"Model card template {template_name!r} uses a field that was not given: {error}."
        ) from None
    except jinja2.TemplateSyntaxError as error:
        raise ModelCardError(f"Model card template {template_name!r}, line {error.lineno}: {error.message}") from None


def architecture_fields(config: ElmoConfig) -> dict[str, object]:
    """The architecture numbers every ELMo card shows."""
    fields = {
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
            "hidden_size",
            "num_char_filters",
            "char_input",
            "word_embedding_dim",
            "word_vocab_size",
        )
    }
    fields["max_word_bytes"] = config.max_characters_per_token - 2
    fields["quantization"] = quantization_method(config)
    return fields


def quantization_method(config: ElmoConfig) -> str | None:
    """The method of a quantized model's config (`ElmoQuantizationConfig`, or its dict once saved), else None."""
    quantization = getattr(config, "quantization_config", None)
    if isinstance(quantization, dict):
        return quantization.get("method")
    return getattr(quantization, "method", None)


def render_base_model_card(
    config: ElmoConfig,
    *,
    sources: Mapping[str, Mapping[str, str]],
    max_abs_difference: float | None,
    source: SourceFacts = ALLENNLP_SOURCE,
    repo_id: str | None = None,
) -> str:
    """Card of a converted biLM: architecture, provenance (`sources`: file name -> location, sha256; `source`: what
    the original's source states), verification result (`max_abs_difference`, None when it did not run), usage for
    both loading paths, caveats."""
    card_data = ModelCardData(
        language=source.language,
        license=source.license or "unknown",
        library_name="transformers",
        pipeline_tag="feature-extraction",
        tags=["elmo", "bilm", "contextual-embeddings", "feature-extraction"],
        datasets=list(source.datasets) or None,
    )
    verification = (
        f"all {config.num_hidden_layers + 1} layers of the reloaded folder match the model built directly from the "
        f"original weights to a max abs difference of {max_abs_difference:.3g} on sample sentences."
        if max_abs_difference is not None
        else "not run (convert with `--verify` to measure it)."
    )
    return render_card(
        BASE_TEMPLATE,
        card_data,
        model_title=source.title,
        origin=source.origin,
        corpus=source.corpus,
        license_text=source.license_text,
        citations=source.citations,
        source_notes=source.source_notes,
        sources=sources,
        verification=verification,
        repo_id=repo_id or LOCAL_FOLDER,
        **architecture_fields(config),
    )


def learned_scalar_mixes(model: ElmoPreTrainedModel) -> list[dict[str, object]]:
    """Every scalar mix in `model`: its module name, softmax-normalised layer weights and `gamma`."""
    mixes = []
    for name, module in model.named_modules():
        if isinstance(module, ElmoScalarMix):
            weights = torch.softmax(module.scalar_parameters.detach().float(), dim=0).tolist()
            mixes.append({"name": name, "weights": weights, "gamma": float(module.gamma.detach().float())})
    return mixes


def _eval_results(
    scores: Mapping[str, float], split: str, dataset: str, dataset_name: str, task_type: str = "token-classification"
) -> list[EvalResult]:
    return [
        EvalResult(
            task_type=task_type,
            dataset_type=dataset,
            dataset_name=dataset_name,
            dataset_split=split,
            metric_type=metric,
            metric_value=float(value),
        )
        for metric, value in scores.items()
    ]


def render_ner_model_card(
    model: ElmoPreTrainedModel,
    *,
    base_model: str,
    dev_scores: Mapping[str, float],
    test_scores: Mapping[str, float],
    repo_id: str | None = None,
    dataset: str = "conll2003",
    dataset_name: str = "CoNLL-2003",
    training: Mapping[str, object] | None = None,
) -> str:
    """Card of a fine-tuned ELMo tagger (`ElmoForTokenClassification`).

    `dev_scores` / `test_scores`: metric name -> value, e.g. `{"precision": .., "recall": .., "f1": ..}` (seqeval,
    entity level); `base_model`: the Hub id (or local folder, then left out of the metadata) of the biLM it was
    fine-tuned from; `training`: optional hyperparameters
    shown as a table. The learned scalar-mix weights are read from `model`.
    """
    if not dev_scores or not test_scores:
        raise ModelCardError("A fine-tuned card needs both dev_scores and test_scores (metric name -> value).")
    mixes = learned_scalar_mixes(model)
    if not mixes:
        raise ModelCardError(f"{type(model).__name__} has no scalar mix; is it an ElmoForTokenClassification?")
    config = model.config
    base_model_on_hub = _is_repo_id(base_model)
    card_data = ModelCardData(
        language="en",
        license=ORIGINAL_LICENSE,
        library_name="transformers",
        pipeline_tag="token-classification",
        tags=["elmo", "token-classification", "ner"],
        datasets=[dataset],
        base_model=base_model if base_model_on_hub else None,
        model_name=repo_id or "elmo-ner",
        eval_results=_eval_results(dev_scores, "validation", dataset, dataset_name)
        + _eval_results(test_scores, "test", dataset, dataset_name),
    )
    return render_card(
        NER_TEMPLATE,
        card_data,
        repo_id=repo_id or LOCAL_FOLDER,
        base_model=base_model,
        base_model_on_hub=base_model_on_hub,
        dataset_name=dataset_name,
        labels=[config.id2label[index] for index in range(config.num_labels)],
        head="BiLSTM tagger" if config.classifier_head == "bilstm" else "linear layer",
        use_crf=config.use_crf,
        freeze_elmo=config.freeze_elmo,
        dev_scores=dict(dev_scores),
        test_scores=dict(test_scores),
        metrics=list(dict.fromkeys([*dev_scores, *test_scores])),
        scalar_mixes=mixes,
        layer_names=["char-CNN token embedding"]
        + [f"biLSTM layer {k}" for k in range(1, config.num_hidden_layers + 1)],
        training=dict(training or {}),
        **architecture_fields(config),
    )


def render_classifier_model_card(
    model: ElmoPreTrainedModel,
    *,
    base_model: str,
    scores: Mapping[str, Mapping[str, float]],
    data_files: Mapping[str, str],
    text_columns: tuple[str, ...],
    training: Mapping[str, object],
    repo_id: str | None = None,
) -> str:
    """Card of a trained ELMo sentence(-pair) classifier (`ElmoForSequenceClassification`).

    `scores`: split -> the Trainer's metrics with their split prefix (`{"eval": {"eval_accuracy": ..}}`); only the
    score metrics (accuracy, f1, macro_f1, mse, mae) are shown. `data_files`: split -> the file trained or scored
    on; `text_columns`: one column, or two for a pair; `training`: what the run did (epochs, steps, ...). The learned
    scalar-mix weights are read from `model` (a head that concatenates the pooled layers has none).
    """
    mixes = learned_scalar_mixes(model)
    config = model.config
    if not mixes and not config.classifier_concat_layers:
        raise ModelCardError(f"{type(model).__name__} has no scalar mix; is it an ElmoForSequenceClassification?")
    shown = {
        split: {
            metric: float(values[f"{split}_{metric}"])
            for metric in CLASSIFIER_METRICS
            if f"{split}_{metric}" in values
        }
        for split, values in scores.items()
    }
    base_model_on_hub = _is_repo_id(base_model)
    names = {"eval": "validation", "test": "test"}
    card_data = ModelCardData(
        language="en",
        license=ORIGINAL_LICENSE,
        library_name="transformers",
        pipeline_tag="text-classification",
        tags=["elmo", "text-classification"],
        base_model=base_model if base_model_on_hub else None,
        model_name=repo_id or "elmo-classifier",
        eval_results=[
            result
            for split, values in shown.items()
            for result in _eval_results(values, names.get(split, split), "custom", "custom", "text-classification")
        ]
        or None,
    )
    regression = config.num_labels == 1
    return render_card(
        CLASSIFIER_TEMPLATE,
        card_data,
        repo_id=repo_id or LOCAL_FOLDER,
        base_model=base_model,
        base_model_on_hub=base_model_on_hub,
        regression=regression,
        labels=[] if regression else [config.id2label[index] for index in range(config.num_labels)],
        pair=len(text_columns) == 2,
        text_columns=list(text_columns),
        data_files=dict(data_files),
        classifier_head=config.classifier_head,
        concat_layers=config.classifier_concat_layers,
        pooling={"mean": "mean", "max": "max", "mean_max": "mean and max (concatenated)"}[config.classifier_pooling],
        freeze_elmo=config.freeze_elmo,
        scores={names.get(split, split): values for split, values in shown.items() if values},
        metrics=[metric for metric in CLASSIFIER_METRICS if any(metric in values for values in shown.values())],
        scalar_mixes=mixes,
        layer_names=["char-CNN token embedding"]
        + [f"biLSTM layer {k}" for k in range(1, config.num_hidden_layers + 1)],
        training=dict(training),
        **architecture_fields(config),
    )


def render_pretrained_model_card(
    config: ElmoConfig,
    *,
    options: Mapping[str, object],
    corpus_files: list[str],
    corpus_positions: int | None,
    train_steps: int,
    train_positions: int,
    metrics: Mapping[str, float],
    repo_id: str | None = None,
) -> str:
    """Card of a biLM trained with `elmo-pretrain`: architecture, bilm-tf training options, corpus, perplexities.
    `train_steps` and `train_positions` are what training did (the Trainer's optimizer steps and the input positions
    they saw), not what was planned."""
    card_data = ModelCardData(
        library_name="transformers",
        pipeline_tag="feature-extraction",
        tags=["elmo", "bilm", "contextual-embeddings", "feature-extraction", "elmo-pretrain"],
    )
    shown_files = corpus_files[:10] + ([f"... ({len(corpus_files) - 10} more)"] if len(corpus_files) > 10 else [])
    return render_card(
        PRETRAINED_TEMPLATE,
        card_data,
        repo_id=repo_id or LOCAL_FOLDER,
        options_json=json.dumps(dict(options), indent=2),
        corpus_files=shown_files,
        corpus_positions=corpus_positions,
        train_steps=train_steps,
        train_positions=train_positions,
        vocab_size=config.lm_vocab_size,
        metrics={name: metrics[name] for name in sorted(metrics) if "perplexity" in name or name.endswith("loss")},
        **architecture_fields(config),
    )


def _is_repo_id(name: str) -> bool:
    """Whether `name` can be a Hub repo id (a local path such as /tmp/start-model cannot)."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


__all__ = [
    "ModelCardError",
    "learned_scalar_mixes",
    "render_base_model_card",
    "render_card",
    "render_classifier_model_card",
    "render_ner_model_card",
    "render_pretrained_model_card",
]
