"""NER tooling: the CoNLL reader (`conll`), entity-level metrics (`metrics`) and `elmo-train-ner` (`train`). The
frozen-biLM activation cache is shared with `elmo-train-classifier` (`modeling_elmo/finetuning`); the
token-classification pipeline ships with the model code (`modeling_elmo/pipeline_elmo.py`)."""
