"""Convert an original ELMo checkpoint to a Transformers model folder: the `elmo-convert` command, in the place
where Transformers keeps its `convert_*_original_*` scripts, for readers who look for it there.

python conversion/convert_elmo_original_to_hf.py --options OPTIONS.json --weights WEIGHTS.hdf5 --output DIR
"""

import sys

from modeling_elmo.conversion.convert_command import main

if __name__ == "__main__":
    sys.exit(main())
