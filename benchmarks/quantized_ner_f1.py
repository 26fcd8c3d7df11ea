"""NER F1 of a saved ELMo tagger in float32 and with each quantization method (issue 44, "Accuracy on a task").

    python benchmarks/quantized_ner_f1.py --tagger WORK/ner/a-frozen-pretrained --data_dir ../shared/data/conll2003
        [--methods int8,int8_weight_only,bf16] [--threads 2] [--batch_size 64] [--tolerance 0.005]

The tagger is the folder `elmo-train-ner` saved (`benchmarks/pretrain_quality.py`'s NER run (a): the study's CoNLL
biLM, frozen, under its BiLSTM-CRF tagger). Each setting loads it afresh with `AutoModelForTokenClassification.
from_pretrained` (float32, or `quantization_config=ElmoQuantizationConfig(method)`) and scores CoNLL dev and test
the way `elmo-train-ner` does: the tagger's own labels (`load_conll`), `encode_for_elmo`, batches of `--batch_size`
sentences in file order padded by `DataCollatorForTokenClassification`, the eval-mode logits (the CRF's Viterbi path)
decoded by `decode_tags` and scored by seqeval (`ner_scores`: entity-level micro F1, CoNLL semantics). Prints a
Markdown table: F1 per split, the difference from float32 and whether it is within `--tolerance`, with the F1 that
`elmo-train-ner` wrote (`dev_results.json`, `test_results.json`) beside them. Exit status 1 where a method is further
than `--tolerance` from float32 on a split.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "conll2003"
METHODS = ("int8", "int8_weight_only", "bf16")
SPLITS = {"dev": "dev.txt", "test": "test.txt"}


def load_tagger(folder: Path, method: str | None):
    """The tagger at `folder` in eval mode: float32 (`method` None) or quantized with `method`."""
    import torch
    from transformers import AutoModelForTokenClassification

    from modeling_elmo import ElmoQuantizationConfig

    options = {} if method is None else {"quantization_config": ElmoQuantizationConfig(method=method)}
    return AutoModelForTokenClassification.from_pretrained(folder, dtype=torch.float32, **options).eval()


def encoded_splits(folder: Path, data_dir: Path) -> tuple[dict, object]:
    """CoNLL dev and test with the tagger's own labels, encoded for ELMo as `elmo-train-ner` encodes them, and the
    collator that pads them (`elmo-train-ner`'s, on the tagger's tokenizer)."""
    from transformers import AutoConfig, DataCollatorForTokenClassification

    from modeling_elmo import ElmoTokenizer
    from modeling_elmo.ner.conll import encode_for_elmo, load_conll

    config = AutoConfig.from_pretrained(folder)
    labels = [config.id2label[index] for index in range(config.num_labels)]
    raw = load_conll({split: data_dir / name for split, name in SPLITS.items()}, label_names=labels)
    tokenizer = ElmoTokenizer.from_pretrained(folder)
    encoded = {split: encode_for_elmo(dataset, tokenizer) for split, dataset in raw.items()}
    return encoded, DataCollatorForTokenClassification(tokenizer)


def split_f1(model, dataset, collate, batch_size: int) -> float:
    """Entity-level micro F1 of `model` on one encoded split (batches in order, padded per batch by `collate`)."""
    import torch

    from modeling_elmo.ner.metrics import decode_tags, ner_scores

    gold, predicted = [], []
    with torch.inference_mode():
        for start in range(0, len(dataset), batch_size):
            batch = collate([dataset[index] for index in range(start, min(start + batch_size, len(dataset)))])
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            labels = batch["labels"].numpy()  # (sentences, words), -100 where padded
            tags = decode_tags(logits.argmax(-1).numpy(), labels, model.config.id2label)
            gold += tags[0]
            predicted += tags[1]
    return ner_scores(gold, predicted)["f1"]


def recorded_f1(folder: Path) -> dict[str, float | None]:
    """The dev and test F1 that `elmo-train-ner` wrote beside the tagger (None where a file is missing)."""
    found = {}
    for split in SPLITS:
        path = folder / f"{split}_results.json"
        found[split] = json.loads(path.read_text())[f"{split}_f1"] if path.is_file() else None
    return found


def measure(folder: Path, data_dir: Path, methods: list[str], batch_size: int) -> dict[str, dict[str, float]]:
    """F1 per setting ("float32", then each method) and split."""
    splits, collate = encoded_splits(folder, data_dir)
    scores = {}
    for method in [None, *methods]:
        model, name = load_tagger(folder, method), method or "float32"
        scores[name] = {split: split_f1(model, data, collate, batch_size) for split, data in splits.items()}
        print(f"{name}: {json.dumps(scores[name])}", flush=True)
    return scores


def table(scores: dict[str, dict[str, float]], recorded: dict[str, float | None], tolerance: float) -> list[str]:
    """The Markdown table of `scores` against float32."""
    base = scores["float32"]
    lines = [
        f"| setting | dev F1 | test F1 | dev - float32 | test - float32 | within {tolerance:g} |",
        "|---|---|---|---|---|---|",
    ]
    for name, found in scores.items():
        deltas = {split: found[split] - base[split] for split in SPLITS}
        within = all(abs(delta) <= tolerance for delta in deltas.values())
        lines.append(
            f"| {name} | {found['dev']:.4f} | {found['test']:.4f} | {deltas['dev']:+.4f} | {deltas['test']:+.4f} "
            f"| {'yes' if within else '**no**'} |"
        )
    if all(value is not None for value in recorded.values()):
        lines.append(f"| (elmo-train-ner's own run) | {recorded['dev']:.4f} | {recorded['test']:.4f} | | | |")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tagger", type=Path, required=True, help="elmo-train-ner's output folder")
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA, help="CoNLL-2003 dev.txt and test.txt")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per forward pass (elmo-train-ner: 64)")
    parser.add_argument("--tolerance", type=float, default=0.005, help="largest F1 difference from float32 accepted")
    args = parser.parse_args(argv)
    methods = [method.strip() for method in args.methods.split(",") if method.strip()]
    if set(methods) - set(METHODS):
        parser.error(f"--methods: a comma-separated subset of {','.join(METHODS)}, got {args.methods!r}")
    if not (args.tagger / "config.json").is_file():
        parser.error(f"--tagger {args.tagger}: no config.json there (give elmo-train-ner's --output_dir)")
    for name in SPLITS.values():
        if not (args.data_dir / name).is_file():
            parser.error(f"--data_dir {args.data_dir}: no {name} there")
    if args.threads < 1 or args.batch_size < 1 or not args.tolerance >= 0:
        parser.error("--threads and --batch_size must be at least 1, --tolerance at least 0")
    args.methods = methods
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    scores = measure(args.tagger, args.data_dir, args.methods, args.batch_size)
    lines = table(scores, recorded_f1(args.tagger), args.tolerance)
    print("\n".join(["", f"NER F1 of {args.tagger} (seqeval, entity-level micro F1):", *lines]))
    base = scores["float32"]
    far = [name for name, found in scores.items() if any(abs(found[s] - base[s]) > args.tolerance for s in SPLITS)]
    return 1 if far else 0


if __name__ == "__main__":
    sys.exit(main())
