"""NER tooling: the CoNLL reader (`conll`), entity-level metrics (`metrics`), the frozen-biLM activation cache
(`activation_cache`) and `elmo-train-ner` (`train`). The token-classification pipeline ships with the model code
(`modeling_elmo/pipeline_elmo.py`)."""
