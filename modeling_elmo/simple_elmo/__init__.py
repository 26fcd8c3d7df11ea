"""
simple_elmo's API (LTG Oslo's loader of the NLPL repository's ELMo models) on this project's biLM: change the import
line and keep the code and its numbers.

    from modeling_elmo.simple_elmo import ElmoModel   # was: from simple_elmo import ElmoModel

`ElmoModel().load(directory, max_batch_size=32, limit=100)` on an NLPL folder or ZIP, then `get_elmo_vectors` and
`get_elmo_vector_average` with simple_elmo 0.9.2's signatures, float64 outputs and numbers (LSTM states carried
across the chunks of a call, warm-up, padding). See docs/migrate-simple-elmo.md.
"""

from .elmo_model import ElmoModel
from .errors import SimpleElmoError

__all__ = ["ElmoModel", "SimpleElmoError"]
