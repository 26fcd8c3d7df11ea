"""Fine-tune ELMo for NER on CoNLL-format files with the Trainer: the `elmo-train-ner` command as a script.

    python examples/run_ner.py --model_name_or_path elmo-original --data_dir ../shared/data/conll2003 \
        --output_dir ner-out --classifier_head bilstm --use_crf True --num_train_epochs 10 ...

Every option is documented in `modeling_elmo/ner/train.py` (`elmo-train-ner --help`).
"""

import sys

from modeling_elmo.ner.train import cli

if __name__ == "__main__":
    sys.exit(cli())
