"""ELMo for Hugging Face Transformers. Importing this package registers the Auto classes."""

from transformers import AutoConfig, AutoModel

from .configuration_elmo import ElmoConfig
from .modeling_elmo import ElmoModel, ElmoModelOutput, ElmoPreTrainedModel

AutoConfig.register(ElmoConfig.model_type, ElmoConfig)
AutoModel.register(ElmoConfig, ElmoModel)

__all__ = ["ElmoConfig", "ElmoModel", "ElmoModelOutput", "ElmoPreTrainedModel"]
