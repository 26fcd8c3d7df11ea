"""
`Elmo` of `modeling_elmo.allennlp` side by side with AllenNLP 2.10.1's `Elmo` (the venv of ../shared/peers), same
script, same run: tokens/s and peak RSS on 'original' (random weights of the original's shapes, from
../shared/peers/make_random_elmo.py) at batch 64 and batch 1.

    python benchmarks/bench_allennlp_elmo.py --peer-python "$PEER_DIR/venv/bin/python" \
        --model-dir "$PEER_DIR/models/original" [--rounds 2] [--repeats 3]

Each (implementation, batch size) runs in a fresh process (2 threads, OMP_WAIT_POLICY=PASSIVE, eval mode, no_grad,
the default statefulness: both carry LSTM states between calls), the two implementations alternating within each
round. Timed: `batch_to_ids` + `Elmo(...)(ids)` with one representation (dropout 0); one untimed warm-up batch,
then --repeats passes over the sentences, median pass reported. Corpus: the first 500 CoNLL-2003 dev sentences with
at least 11 words (as ../shared/peers/bench_allennlp.py), shuffled with seed 0; batch 64 runs 128 of them, batch 1
runs 16.
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SENTENCES = {64: 128, 1: 16}


def conll_sentences(count: int) -> list[list[str]]:
    sentences, current = [], []
    with open(SHARED / "data" / "conll2003" / "dev.txt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                current.append(line.split()[0])
                continue
            if len(current) >= 11:
                sentences.append(current)
            current = []
            if len(sentences) >= 500:
                break
    random.Random(0).shuffle(sentences)
    return sentences[:count]


def worker(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(2)
    if args.impl == "allennlp":
        sys.path.insert(0, str(SHARED / "peers"))
        from allennlp_shim import load_elmo

        module, _ = load_elmo()
    else:
        sys.path.insert(0, str(ROOT))
        from modeling_elmo import allennlp as module
    options, weights = str(Path(args.model_dir) / "options.json"), str(Path(args.model_dir) / "lm_weights.hdf5")
    started = time.perf_counter()
    elmo = module.Elmo(options, weights, 1, dropout=0.0).eval()
    load_seconds = time.perf_counter() - started
    sentences = conll_sentences(SENTENCES[args.batch_size])
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]

    def one_pass(batches: list) -> float:
        started = time.perf_counter()
        with torch.no_grad():
            for batch in batches:
                elmo(module.batch_to_ids(batch))["elmo_representations"][0]
        return time.perf_counter() - started

    one_pass(batches[:1])  # warm-up
    tokens = sum(len(sentence) for sentence in sentences)
    rates = [tokens / one_pass(batches) for _ in range(args.repeats)]
    print(
        "RESULT "
        + json.dumps(
            {
                "impl": args.impl,
                "batch_size": args.batch_size,
                "tokens": tokens,
                "tokens_per_s": statistics.median(rates),
                "passes": [round(rate, 1) for rate in rates],
                "load_s": round(load_seconds, 1),
                "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        ),
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer-python", help="python of the AllenNLP 2.10.1 venv (../shared/peers); required")
    parser.add_argument("--model-dir", required=True, help="folder with options.json and lm_weights.hdf5")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--impl", choices=["ours", "allennlp"], help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, choices=sorted(SENTENCES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        worker(args)
        return 0
    if not args.peer_python:
        parser.error("--peer-python is required")
    results = []
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    for round_index in range(args.rounds):
        for batch_size in (64, 1):
            order = ("ours", "allennlp") if round_index % 2 == 0 else ("allennlp", "ours")
            for impl in order:
                python = sys.executable if impl == "ours" else args.peer_python
                command = [python, __file__, "--impl", impl, "--batch-size", str(batch_size)]
                command += ["--model-dir", args.model_dir, "--repeats", str(args.repeats)]
                output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
                result = json.loads(output.split("RESULT ", 1)[1])
                results.append(result)
                print(json.dumps(result), flush=True)
    print("| batch | AllenNLP 2.10.1 tok/s | modeling_elmo.allennlp tok/s | speed-up | peak RSS (AllenNLP / ours) |")
    print("|---|---|---|---|---|")
    for batch_size in (64, 1):
        by_impl = {
            impl: [r for r in results if r["impl"] == impl and r["batch_size"] == batch_size]
            for impl in ("allennlp", "ours")
        }
        rate = {impl: statistics.median(r["tokens_per_s"] for r in runs) for impl, runs in by_impl.items()}
        rss = {impl: max(r["peak_rss_mib"] for r in runs) for impl, runs in by_impl.items()}
        print(
            f"| {batch_size} | {rate['allennlp']:,.0f} | {rate['ours']:,.0f} | {rate['ours'] / rate['allennlp']:.2f}x "
            f"| {rss['allennlp']:,} / {rss['ours']:,} MiB |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
