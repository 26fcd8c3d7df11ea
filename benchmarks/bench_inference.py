"""Inference speed and memory of ElmoModel (CPU, float32, stateless): fast path vs the per-step reference path.

Builds random-weight checkpoints of the real 'small' (LSTM 1024/128, 1 highway) and 'original' (LSTM 4096/512,
2 highways) shapes in the original HDF5 layout, converts them with `convert_checkpoint`, then runs every setting
(model x path x batch size) in a fresh process (so peak RSS is per setting, weights loading included), with
`--threads` threads, an untimed warm-up batch and the sentences in corpus order. Timed: tokenizer + forward with all
layers (`output_hidden_states=True`) under `torch.inference_mode()`, `--repeats` passes over the setting's sentences;
the median pass is reported, with the range of the passes (the machine's memory bandwidth is shared, so single passes
vary). Paths: `fast` (default model), `fast-cache`
(`model.enable_word_cache()`, empty when the timing starts), `reference` (`with model.reference_implementation()`).

Corpus: as the AllenNLP peer benchmark (../shared/peers/bench_allennlp.py): the first 500 sentences with >= 11 words of
CoNLL-2003 dev.txt, shuffled with random.Random(0) (24.5 words on average); a setting uses the first N of them.
Also measured: a single 2,000-word sentence (batch 1, fast path), the max abs difference between the paths and of each
against the reference path run in float64, and the max abs error of bfloat16 against float32.

    python benchmarks/bench_inference.py [--conll ../shared/data/conll2003/dev.txt] [--models small,original]
        [--batch-sizes 1,32,64] [--work-dir /tmp/elmo-bench] [--threads 2] [--repeats 3]
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

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONLL = REPO.parent / "shared" / "data" / "conll2003" / "dev.txt"
# sentences per (path, batch size); the reference path is slow on 'original', so it gets fewer
ORIGINAL_FAST, SMALL_FAST = {1: 32, 32: 128, 64: 128}, {1: 64, 32: 256, 64: 256}
SENTENCES = {
    "original": {"fast": ORIGINAL_FAST, "fast-cache": ORIGINAL_FAST, "reference": {1: 8, 32: 64, 64: 64}},
    "small": {"fast": SMALL_FAST, "fast-cache": SMALL_FAST, "reference": {1: 32, 32: 128, 64: 128}},
}


def load_corpus(path: Path, count: int = 500) -> list[list[str]]:
    """The peer benchmark's corpus: first `count` sentences with >= 11 words, shuffled with Random(0)."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                current.append(line.split()[0])
                continue
            if len(current) >= 11:
                sentences.append(current)
            current = []
            if len(sentences) >= count:
                break
    if len(current) >= 11 and len(sentences) < count:
        sentences.append(current)
    random.Random(0).shuffle(sentences)
    return sentences


def ensure_model(work_dir: Path, name: str) -> Path:
    """Random original-format checkpoint of architecture `name`, converted once into `work_dir/name/hf`; a model
    folder given as `name` is used as it is."""
    from modeling_elmo.conversion.convert import convert_checkpoint
    from modeling_elmo.conversion.testing_utils import ARCHITECTURES, write_random_original_checkpoint

    if Path(name).is_dir():
        return Path(name)
    folder = work_dir / name / "hf"
    if not (folder / "config.json").exists():
        options, weights = write_random_original_checkpoint(work_dir / name / "original", ARCHITECTURES[name], seed=0)
        convert_checkpoint(str(options), str(weights), folder, overwrite=True)
    return folder


def _load(model_dir: Path, threads: int, dtype=None):
    import torch
    from transformers import AutoModel, AutoTokenizer

    import modeling_elmo  # noqa: F401  (registers the Auto classes)

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, dtype=dtype or torch.float32).eval()
    return tokenizer, model


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_speed(args: argparse.Namespace) -> dict:
    """Tok/s and peak RSS of one setting (runs in its own process)."""
    import torch

    tokenizer, model = _load(args.model_dir, args.threads)
    rss_after_load = _peak_rss_mib()
    if args.long_sentence:
        words = [word for sentence in load_corpus(args.conll) for word in sentence]
        sentences = [words[: args.long_sentence]]
    else:
        sentences = load_corpus(args.conll)[: args.sentences]
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]

    def run(batch: list[list[str]]) -> None:
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        model(**encoded, output_hidden_states=True)

    passes = []
    with torch.inference_mode(), model.reference_implementation(enabled=args.path == "reference"):
        run(load_corpus(args.conll)[-args.batch_size :])  # warm-up, untimed
        for _ in range(args.repeats):
            if args.path == "fast-cache":
                model.enable_word_cache(100_000)  # a new, empty cache: filled by the timed batches only
            start = time.perf_counter()
            for batch in batches:
                run(batch)
            passes.append(time.perf_counter() - start)
    tokens = sum(map(len, sentences))
    seconds = statistics.median(passes)
    return {
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "tok_s": round(tokens / seconds, 1),
        "tok_s_range": [round(tokens / max(passes)), round(tokens / min(passes))],
        "peak_rss_mib": round(_peak_rss_mib()),
        "rss_after_load_mib": round(rss_after_load),
    }


def worker_accuracy(args: argparse.Namespace) -> dict:
    """
    Max abs differences of all layers: fast vs reference path in float32, both against the reference path computed in
    float64 (the exact values up to float64 rounding), and bfloat16 (fast path) vs float32.
    """
    import torch

    tokenizer, model = _load(args.model_dir, args.threads)
    sentences = load_corpus(args.conll)[: args.sentences]
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")

    def layers(reference: bool, dtype: torch.dtype) -> tuple:
        model.to(dtype)
        with torch.inference_mode(), model.reference_implementation(enabled=reference):
            return model(**encoded, output_hidden_states=True).hidden_states

    fast, reference = layers(False, torch.float32), layers(True, torch.float32)
    exact, low = layers(True, torch.float64), layers(False, torch.bfloat16)

    def difference(left, right) -> float:
        # torch's max propagates NaN (the builtin `max` of floats would hide it)
        return float(
            torch.stack([(a.double() - b.double()).abs().max() for a, b in zip(left, right, strict=True)]).max()
        )

    return {
        "fast_vs_reference": difference(fast, reference),
        "fast_vs_float64_reference": difference(fast, exact),
        "reference_vs_float64_reference": difference(reference, exact),
        "bf16_vs_fp32": difference(low, fast),
        "max_abs_value": float(torch.stack([layer.abs().max() for layer in fast]).max()),
    }


def _spawn(args: argparse.Namespace, mode: str, model_dir: Path, **options) -> dict | None:
    command = [sys.executable, __file__, "--worker", mode, "--model-dir", str(model_dir), "--conll", str(args.conll)]
    command += ["--threads", str(args.threads), "--repeats", str(args.repeats)]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"} if args.omp_passive else None
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        print(f"FAILED {mode} {model_dir} {options}:\n{result.stderr[-2000:]}", flush=True)
        return None
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL, help="CoNLL-2003 dev.txt")
    parser.add_argument("--models", default="small,original")
    parser.add_argument("--batch-sizes", default="1,32,64")
    parser.add_argument("--paths", default="fast,fast-cache,reference", help="fast-cache: with the word cache on")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/elmo-bench"), help="checkpoints are kept here")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--long-sentence-words", type=int, default=2000, help="0 to skip")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per setting; the median is reported")
    parser.add_argument(
        "--omp-passive",
        action="store_true",
        help="run the workers with OMP_WAIT_POLICY=PASSIVE: on a CPU shared with other busy processes, spinning "
        "OpenMP threads otherwise slow every small parallel operation down by orders of magnitude",
    )
    parser.add_argument("--worker", choices=["speed", "accuracy"], help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--path", default="fast", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--sentences", type=int, default=32, help=argparse.SUPPRESS)
    parser.add_argument("--long-sentence", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.worker:
        result = worker_speed(args) if args.worker == "speed" else worker_accuracy(args)
        print("RESULT " + json.dumps(result), flush=True)
        return

    sys.path.insert(0, str(REPO))
    corpus = load_corpus(args.conll)
    lengths = list(map(len, corpus))
    policy = "PASSIVE" if args.omp_passive else os.environ.get("OMP_WAIT_POLICY", "default")
    average = sum(lengths) / len(lengths)
    print(f"corpus: {len(corpus)} sentences, {sum(lengths)} words, avg {average:.1f}; threads={args.threads}; "
          f"OMP_WAIT_POLICY={policy}; load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    rows = []
    for name in args.models.split(","):
        model_dir = ensure_model(args.work_dir, name)
        for path in args.paths.split(","):
            for batch_size in map(int, args.batch_sizes.split(",")):
                count = SENTENCES.get(name, {}).get(path, {}).get(batch_size, 64)
                result = _spawn(args, "speed", model_dir, path=path, batch_size=batch_size, sentences=count)
                if result:
                    rows.append((name, path, f"{batch_size}", result))
                    print(f"{name:>8} {path:>9} bs={batch_size:<3} {result}", flush=True)
        if args.long_sentence_words:
            result = _spawn(args, "speed", model_dir, long_sentence=args.long_sentence_words)
            if result:
                rows.append((name, "fast", f"1 ({args.long_sentence_words}-word sentence)", result))
                print(f"{name:>8} long sentence {result}", flush=True)
        accuracy = _spawn(args, "accuracy", model_dir, sentences=16)
        print(f"{name:>8} accuracy on 16 sentences: {accuracy}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print("\n| model | path | batch | tok/s (median) | passes | peak RSS (MiB) | tokens |")
    print("|---|---|---|---|---|---|---|")
    for name, path, batch, result in rows:
        low, high = result["tok_s_range"]
        print(
            f"| {name} | {path} | {batch} | {result['tok_s']:,.0f} | {low:,}-{high:,} | {result['peak_rss_mib']:,} "
            f"| {result['tokens']} |"
        )


if __name__ == "__main__":
    main()
