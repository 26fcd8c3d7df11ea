"""
The inference core, below the tools: what every caller that runs ELMo on text shares, the package's front door,
`elmo-embed` and `ElmoBatchEmbedder` (`embed/`), `elmo serve` (`serve/`) and the drop-ins (AllenNLP, ELMoForManyLangs,
simple_elmo, flair):

- `registration`: ELMo registered with the Auto classes (the config, the models, the tokenizer, the engines'
  implementations and the quantization config), once; and whether this process defers it (a console command that
  answers `--help` and argument errors before importing torch).
- `pretrained`: the one loader of a converted folder or Hub id (a location that can only fail answers at once, in
  one line).
- `loading`: a model and its tokenizer loaded for inference (folder or Hub id, dtype, device, quantization), in eval
  mode, each failure one line.
- `batches`: the sentences of a batch (`Sentence`, `Batch`) and one forward pass over them (`embed_batch`).

It sits above the model, the engine and quantization (which it registers and loads) and imports nothing of the tools
or of `commands/`, the commands' workshop (the import rules test, tests/test_import_rules.py, holds it to that).
Importing this package or `registration` imports neither torch nor Transformers; each module imports them when its
work starts.
"""
