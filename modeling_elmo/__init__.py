"""ELMo for Hugging Face Transformers, for users of the installed package: importing it registers the config, the
models and the tokenizer with the Auto classes and for `save_pretrained`'s remote code (and no pipeline: see
pipeline_elmo.py), through the inference core (`inference.registration`). The top-level modules are the remote code;
the tools live in the subpackages (a console command may register after parsing its arguments: see
`inference.registration.light_start`). The front door imports nothing of `commands/`."""

__version__ = "0.1.0"  # the distribution's version too (pyproject.toml reads it)

import importlib

from .inference.registration import light_start, register_auto_classes

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


def __getattr__(name: str) -> type:
    """The public classes (registering the Auto classes first, where a console command deferred it),
    `ElmoTokenClassificationPipeline` and `ElmoFeatureExtractionPipeline`, imported on first use (Transformers'
    pipelines are slow to import)."""
    if name in _EXPORTS:
        register_auto_classes()
        globals()[name] = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        return globals()[name]
    if name in ("ElmoFeatureExtractionPipeline", "ElmoTokenClassificationPipeline"):
        register_auto_classes()
        from .configuration_elmo import pipeline_class

        return pipeline_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# A console command (`inference.registration.LIGHT_START_COMMANDS`) answers --help and argument errors first and
# registers afterwards (`commands.elmo`): importing torch and Transformers takes seconds.
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
