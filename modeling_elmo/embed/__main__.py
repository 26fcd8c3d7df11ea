"""`python -m modeling_elmo.embed ...` (what `accelerate launch -m modeling_elmo.embed` runs): `elmo-embed`."""

import sys

from .cli import main

sys.exit(main())
