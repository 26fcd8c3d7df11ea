"""The peers job of `bench_inference.py`: AllenNLP 2.10.1's tok/s on the same original-format files, run by the peer's
own benchmark worker (../shared/peers/bench_allennlp.py) in the peer's venv (`--peer-python`)."""

import argparse
from pathlib import Path

from .common import PEERS, worker_result


def spawn_allennlp(args: argparse.Namespace, folder: Path, batch_size: int, sentences: int) -> dict | None:
    """AllenNLP's tok/s on the original-format files in `folder`: the peer's own benchmark worker
    (../shared/peers/bench_allennlp.py, in its venv), on the same corpus, sentences, threads and repeats."""
    command = [args.peer_python, str(PEERS / "bench_allennlp.py"), "--worker", "--model-dir", str(folder)]
    command += ["--batch-size", str(batch_size), "--n-sentences", str(sentences), "--corpus", "conll"]
    command += ["--conll-dir", str(args.conll.parent), "--threads", str(args.threads), "--repeats", str(args.repeats)]
    found = worker_result(args, command, f"allennlp {folder} batch {batch_size}")
    if found is None:
        return None
    passes = found["tokens_per_s_all"]
    return {
        "tokens": found["tokens"],
        "tok_s": found["tokens_per_s"],
        "tok_s_range": [round(min(passes)), round(max(passes))],
        "peak_rss_mib": found["peak_rss_mib"],
    }
