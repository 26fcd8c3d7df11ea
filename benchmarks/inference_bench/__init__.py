"""The jobs of `benchmarks/bench_inference.py`, one module each: `common` (the corpus, the models, loading, a worker
process), `speed` (tok/s and peak RSS per setting, the in-process comparison, the settings, their tables), `accuracy`,
`peers` (AllenNLP), `ceilings`, `split` (where a call's time goes), `ner` and `choice`. The script is the command line
and the rounds; every worker is the script run with `--worker MODE`."""
