"""
AllenNLP's ELMo API on this project's `ElmoModel`: change the import line and keep the code and its numbers.

    from modeling_elmo.allennlp import Elmo, batch_to_ids   # was: from allennlp.modules.elmo import ...

`Elmo`, `_ElmoBiLm`, `_ElmoCharacterEncoder`, `batch_to_ids`, `ElmoTokenEmbedder` (AllenNLP 2.x),
`ELMoCharacterMapper`, `remove_sentence_boundaries`, `add_sentence_boundary_token_ids`, `ScalarMix`, and AllenNLP
0.9's `ElmoEmbedder`, with AllenNLP's signatures, defaults, outputs and LSTM statefulness (`stateful=False` to start
every call from zero states). See docs/allennlp.md.
"""

from .bilm import _ElmoBiLm, _ElmoCharacterEncoder
from .boundaries import add_sentence_boundary_token_ids, remove_sentence_boundaries
from .characters import ELMoCharacterMapper, batch_to_ids
from .checkpoint import ConfigurationError, load_elmo_model
from .elmo import Elmo, ElmoTokenEmbedder
from .embedder import ElmoEmbedder
from .scalar_mix import ScalarMix

__all__ = [
    "ConfigurationError",
    "ELMoCharacterMapper",
    "Elmo",
    "ElmoEmbedder",
    "ElmoTokenEmbedder",
    "ScalarMix",
    "_ElmoBiLm",
    "_ElmoCharacterEncoder",
    "add_sentence_boundary_token_ids",
    "batch_to_ids",
    "load_elmo_model",
    "remove_sentence_boundaries",
]
