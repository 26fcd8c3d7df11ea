"""ELMo for Hugging Face Transformers. Importing this package registers the Auto classes."""

from transformers import AutoConfig, AutoModel, AutoTokenizer

from .configuration_elmo import ElmoConfig
from .modeling_elmo import ElmoModel, ElmoModelOutput, ElmoPreTrainedModel
from .tokenization_elmo import ElmoBatchEncoding, ElmoTokenizer

AutoConfig.register(ElmoConfig.model_type, ElmoConfig)
AutoModel.register(ElmoConfig, ElmoModel)
AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer)

__all__ = [
    "ElmoBatchEncoding",
    "ElmoConfig",
    "ElmoModel",
    "ElmoModelOutput",
    "ElmoPreTrainedModel",
    "ElmoTokenizer",
]
