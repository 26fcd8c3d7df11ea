"""ELMo for Hugging Face Transformers, for users of the installed package: importing it registers the config, the
models and the tokenizer with the Auto classes and for `save_pretrained`'s remote code (and no pipeline: see
pipeline_elmo.py). The top-level modules are the remote code; the commands live in the subpackages."""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .configuration_elmo import ElmoConfig, pipeline_token_classification_class
from .modeling_elmo import (
    ElmoForPreTraining,
    ElmoForPreTrainingOutput,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoHeadModel,
    ElmoModel,
    ElmoModelOutput,
    ElmoPreTrainedModel,
)
from .tokenization_elmo import ElmoBatchEncoding, ElmoTokenizer
from .transformers_compat import register_tokenizer

AutoConfig.register(ElmoConfig.model_type, ElmoConfig)
AutoModel.register(ElmoConfig, ElmoModel)
AutoModelForTokenClassification.register(ElmoConfig, ElmoForTokenClassification)
AutoModelForSequenceClassification.register(ElmoConfig, ElmoForSequenceClassification)
AutoModelForPreTraining.register(ElmoConfig, ElmoForPreTraining)
register_tokenizer(ElmoConfig, ElmoTokenizer)

# save_pretrained / push_to_hub then copy the code files and write `auto_map`, so that saved folders also load with
# `trust_remote_code=True` where this package is not installed (see `modeling_elmo.hub.remote_code`).
ElmoConfig.register_for_auto_class()
ElmoModel.register_for_auto_class("AutoModel")
ElmoForTokenClassification.register_for_auto_class("AutoModelForTokenClassification")
ElmoForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
ElmoForPreTraining.register_for_auto_class("AutoModelForPreTraining")
ElmoTokenizer.register_for_auto_class("AutoTokenizer")


def __getattr__(name: str) -> type:
    """`ElmoTokenClassificationPipeline`, imported on first use (Transformers' pipelines are slow to import)."""
    if name == "ElmoTokenClassificationPipeline":
        return pipeline_token_classification_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ElmoBatchEncoding",
    "ElmoConfig",
    "ElmoForPreTraining",
    "ElmoForPreTrainingOutput",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
    "ElmoHeadModel",
    "ElmoModel",
    "ElmoModelOutput",
    "ElmoPreTrainedModel",
    "ElmoTokenClassificationPipeline",
    "ElmoTokenizer",
]
