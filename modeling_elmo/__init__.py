"""ELMo for Hugging Face Transformers, for users of the installed package: importing it registers the config, the
models and the tokenizer with the Auto classes and for `save_pretrained`'s remote code (and no pipeline: see
pipeline_elmo.py). The top-level modules are the remote code; the commands live in the subpackages (a console
command may register after parsing its arguments: see `modeling_elmo.commands`)."""

__version__ = "0.1.0"  # the distribution's version too (pyproject.toml reads it)

import importlib

from .commands import light_start

# public name: the module that defines it
_EXPORTS = {
    "ElmoConfig": "configuration_elmo",
    "ElmoForPreTraining": "modeling_elmo",
    "ElmoForPreTrainingOutput": "modeling_elmo",
    "ElmoForSequenceClassification": "modeling_elmo",
    "ElmoForTokenClassification": "modeling_elmo",
    "ElmoHeadModel": "modeling_elmo",
    "ElmoLstmStates": "lstm_states",
    "ElmoModel": "modeling_elmo",
    "ElmoModelOutput": "modeling_elmo",
    "ElmoPreTrainedModel": "modeling_elmo",
    "ElmoBatchEncoding": "tokenization_elmo",
    "ElmoTokenizer": "tokenization_elmo",
    "ElmoQuantizationConfig": "quantization",
}
_registered = False


def register_auto_classes() -> None:
    """Register the config, the models and the tokenizer with the Auto classes and for `save_pretrained`'s remote
    code, once; the public classes become attributes of the package."""
    global _registered
    if _registered:
        return
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForPreTraining,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    from .transformers_compat import register_tokenizer  # first: it names a Transformers below the floor in one line

    importlib.import_module(".engine", __name__)  # registers the CPU and GPU engines' implementations
    importlib.import_module(".quantization", __name__).register_quantization()  # `ElmoQuantizationConfig`

    for name, module in _EXPORTS.items():
        globals()[name] = getattr(importlib.import_module(f".{module}", __name__), name)
    config, tokenizer = globals()["ElmoConfig"], globals()["ElmoTokenizer"]
    models = {
        AutoModel: globals()["ElmoModel"],
        AutoModelForTokenClassification: globals()["ElmoForTokenClassification"],
        AutoModelForSequenceClassification: globals()["ElmoForSequenceClassification"],
        AutoModelForPreTraining: globals()["ElmoForPreTraining"],
    }
    AutoConfig.register(config.model_type, config)
    for auto_class, model in models.items():
        auto_class.register(config, model)
    register_tokenizer(config, tokenizer)
    # save_pretrained / push_to_hub then copy the code files and write `auto_map`, so that saved folders also load
    # with `trust_remote_code=True` where this package is not installed (see `modeling_elmo.hub.remote_code`).
    config.register_for_auto_class()
    for auto_class, model in models.items():
        model.register_for_auto_class(auto_class.__name__)
    tokenizer.register_for_auto_class("AutoTokenizer")
    _registered = True


def __getattr__(name: str) -> type:
    """The public classes (registering the Auto classes first, where a console command deferred it),
    `ElmoTokenClassificationPipeline` and `ElmoFeatureExtractionPipeline`, imported on first use (Transformers'
    pipelines are slow to import)."""
    if name in _EXPORTS:
        register_auto_classes()
        return globals()[name]
    if name in ("ElmoFeatureExtractionPipeline", "ElmoTokenClassificationPipeline"):
        register_auto_classes()
        from .configuration_elmo import pipeline_class

        return pipeline_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# A console command of `commands.LIGHT_START_COMMANDS` answers --help and argument errors first and registers
# afterwards (`commands.start_work`): importing torch and Transformers takes seconds.
if not light_start():
    register_auto_classes()


__all__ = [
    "ElmoBatchEncoding",
    "ElmoConfig",
    "ElmoFeatureExtractionPipeline",
    "ElmoForPreTraining",
    "ElmoForPreTrainingOutput",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
    "ElmoHeadModel",
    "ElmoLstmStates",
    "ElmoModel",
    "ElmoModelOutput",
    "ElmoPreTrainedModel",
    "ElmoQuantizationConfig",
    "ElmoTokenClassificationPipeline",
    "ElmoTokenizer",
]
