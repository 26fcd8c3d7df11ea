"""NER benchmark on CoNLL-2003 with `elmo-train-ner` (train on train, pick on dev, report test).

    # (a) the paper's setup on the fixture biLM: frozen, BiLSTM-CRF head, activation cache
    python benchmarks/train_ner_small.py fixture --data_dir ../shared/data/conll2003 --output_dir work/ner-fixture
    # (b) a small ELMo, randomly initialised and trained end to end with the CRF head, 30-minute budget
    python benchmarks/train_ner_small.py small --data_dir ../shared/data/conll2003 --output_dir work/ner-small

Extra arguments after the known ones are passed to elmo-train-ner (they override the defaults below).
"""

import argparse
import os
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle threads sleep (see README, Speed)

import torch  # noqa: E402

from modeling_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from modeling_elmo.conversion.convert import convert_checkpoint
from modeling_elmo.ner import train as run_ner  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "elmo"

SMALL_ELMO = {  # char CNN with 256 filters, LSTM 256 cells projected to 128, 2 layers
    "char_filters": [[1, 32], [2, 32], [3, 64], [4, 64], [5, 64]],
    "char_embedding_dim": 16,
    "num_highway_layers": 1,
    "lstm_cell_size": 256,
    "projection_dim": 128,
    "num_hidden_layers": 2,
}

COMMON = [
    "--classifier_head=bilstm",
    "--use_crf=True",
    "--tagger_hidden_size=128",
    "--scalar_mix_layer_norm=True",
    "--per_device_train_batch_size=32",
    "--per_device_eval_batch_size=64",
    "--eval_strategy=epoch",
    "--save_strategy=epoch",
    "--save_total_limit=1",
    "--load_best_model_at_end=True",
    "--metric_for_best_model=f1",
    "--train_sampling_strategy=group_by_length",
    "--logging_steps=50",
    "--report_to=none",
    "--use_cpu=True",
    "--seed=13",
]
SETUPS = {
    "fixture": [
        "--freeze_elmo=True",
        "--elmo_cache=True",
        "--num_train_epochs=3",
        "--learning_rate=3e-3",
        "--classifier_dropout=0.3",
    ],
    "small": [
        "--freeze_elmo=False",
        "--num_train_epochs=10",
        "--learning_rate=5e-3",
        "--classifier_dropout=0.3",
        "--warmup_steps=100",
        "--time_budget_minutes=30",
    ],
}


def prepare_model(setup: str, folder: Path) -> Path:
    """Write the starting model folder: the converted fixture biLM, or a randomly initialised small ELMo."""
    if setup == "fixture":
        convert_checkpoint(str(FIXTURE / "options.json"), str(FIXTURE / "lm_weights.hdf5"), folder, overwrite=True)
    else:
        torch.manual_seed(0)
        model = ElmoModel(ElmoConfig(**SMALL_ELMO))
        model.save_pretrained(folder)
        ElmoTokenizer().save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("setup", choices=sorted(SETUPS))
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--output_dir", required=True)
    args, extra = parser.parse_known_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    output = Path(args.output_dir)  # the starting model lies beside it: elmo-train-ner refuses files it did not write
    start_model = prepare_model(args.setup, output.with_name(f"{output.name}-start-model"))
    results = run_ner.main(
        [
            f"--model_name_or_path={start_model}",
            f"--data_dir={args.data_dir}",
            f"--output_dir={args.output_dir}",
            *COMMON,
            *SETUPS[args.setup],
            *extra,
        ]
    )
    for split in ("train", "dev", "test"):
        metrics = results.get(split, {})
        summary = {k: v for k, v in metrics.items() if not any(t in k for t in ("LOC", "MISC", "ORG", "PER"))}
        print(split, summary)


if __name__ == "__main__":
    main()
