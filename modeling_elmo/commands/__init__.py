"""The workshop of the console commands: `elmo` and its subcommands (`elmo`, with the `elmo-*` scripts as
aliases), argument parsing (`arguments`, `trainer_flags`, `trainer_command`), output-folder locks, memory checks.
Only the tools' command lines import it: the library (the front door, the model, the engine, quantization, the
inference core, the Hub pieces, the drop-ins and `elmo serve`'s server) imports nothing of it.

Every console script answers `--help` and argument errors before importing torch and Transformers (seconds of
start-up): in its process `import modeling_elmo` leaves the Auto-class registration to `elmo`, which registers once
the arguments are parsed (`inference.registration.light_start`, `commands/elmo.py`). Any other process registers on
import, as a library user expects.
"""
