"""Convert an original ELMo checkpoint to a Transformers model folder (same as the `elmo-convert` command).

python conversion/convert_elmo_original_to_hf.py --options OPTIONS.json --weights WEIGHTS.hdf5 --output DIR
"""

import sys

from modeling_elmo.conversion.convert import main

if __name__ == "__main__":
    sys.exit(main())
