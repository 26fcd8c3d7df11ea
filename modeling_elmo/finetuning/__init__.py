"""What the fine-tuning commands (`elmo-train-ner`, `elmo-train-classifier`) share: the frozen-biLM activation cache
and the Trainer pieces (time budget, cache wiring, model-card keeping, config overrides)."""
