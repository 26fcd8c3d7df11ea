"""`python -m modeling_elmo.embed ...` (what `accelerate launch -m modeling_elmo.embed` runs): `elmo-embed`, through
the same start as the console script (`--verbose` included)."""

import sys

from ..commands.elmo import run_subcommand

sys.exit(run_subcommand("embed", sys.argv[1:], typed="elmo-embed"))
