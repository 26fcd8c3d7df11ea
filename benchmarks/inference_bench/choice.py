"""`bench_inference.py --choice`: the default path's automatic choices against every fixed choice of step products and
threads, in one worker process per model and machine state (`worker_choice`), and their table (`run_choice`)."""

import argparse
import json
import os
import statistics
import time

from .common import busy_process, ensure_model, load_corpus, load_model, setting_sentences, spawn


def use_engine(model, products: str, threads: int | str | None) -> None:
    """Run `model` on the CPU engine with these settings (a `CpuImplementation` registered under its own name)."""
    from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
    from modeling_elmo.engine import CpuImplementation

    name = f"bench:{products}/{threads}"
    ALL_ELMO_IMPLEMENTATIONS.register(name, CpuImplementation(products, threads))
    model.set_implementation(name)


def worker_choice(args: argparse.Namespace) -> dict:
    """
    The automatic inference choices (products and threads "auto", opt-in) and the default (`bmm`, the
    threads as set) against every fixed choice the automatic ones pick from (oneDNN or `bmm` products x `--threads`
    or 1 thread for the whole call), in one process: per input (batch 1:
    sentences one at a time; batch 64; one `--long-sentence`-word sentence), two untimed warm-up passes of every
    path (packing; the default measures its products and its first thread counts), then `--repeats` passes in
    rotating order, forward only. With `--busy`, a competing busy process runs throughout. Returns per input and
    path the tok/s of every pass.
    """
    import torch

    from modeling_elmo.engine.cpu_linear import onednn_linear_applies

    tokenizer, model = load_model(args.model_dir, args.threads)
    products = ["onednn", "bmm"] if onednn_linear_applies(torch.zeros(1), torch.zeros(1)) else ["bmm"]
    paths = {"default": ("bmm", None), "auto": ("auto", "auto")} | {
        f"{name} {threads}t": (name, threads) for name in products for threads in sorted({args.threads, 1})
    }
    corpus = load_corpus(args.conll)

    def use(products: str, threads: int | str | None) -> None:
        """The default (`--threads`), the automatic choice (`--threads` at most) or a fixed choice: that many threads
        for all of a call."""
        torch.set_num_threads(args.threads if threads in ("auto", None) else threads)
        use_engine(model, products, threads)

    def encode(sentences: list[list[str]]) -> dict:
        return tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")

    inputs = {
        "batch 1": [encode([sentence]) for sentence in corpus[: args.sentences]],
        "batch 64": [encode(corpus[:64])],
        f"{args.long_sentence}-word sentence": [encode(setting_sentences(args.conll, 0, args.long_sentence))],
    }
    busy = busy_process() if args.busy else None
    results = {}
    try:
        with torch.inference_mode():
            for label, batches in inputs.items():
                words = int(sum(int(batch["attention_mask"].sum()) for batch in batches))
                passes = {name: [] for name in paths}
                for setting in paths.values():  # warm-up, untimed: two passes (the default learns its choices)
                    use(*setting)
                    for batch in batches + batches:
                        model(**batch)
                names = list(paths)
                for repeat in range(args.repeats):
                    for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
                        use(*paths[name])
                        start = time.perf_counter()
                        for batch in batches:
                            model(**batch, output_hidden_states=True)
                        passes[name].append(words / (time.perf_counter() - start))
                results[label] = passes
    finally:
        if busy is not None:
            busy.kill()
    return {"tok_s": results, "load_average": os.getloadavg()[0]}


def run_choice(args: argparse.Namespace) -> None:
    """`--choice`: per model, the choice worker on the idle machine and beside a busy process; prints the table."""
    long_words = {}
    for item in args.choice_long_words.split(","):
        name, _, words = item.partition(":")
        if not words.isdigit() or int(words) < 1:
            raise SystemExit(f"--choice-long-words: expected MODEL:WORDS with WORDS a positive integer, got {item!r}")
        long_words[name] = int(words)
    rows = []
    for name in args.models.split(","):
        model_dir = ensure_model(args.work_dir, name)
        for machine in ("idle", "busy"):
            options = {"sentences": 16, "long_sentence": long_words.get(name, 2000)}
            if machine == "busy":
                options["busy"] = ""
            result = spawn(args, "choice", model_dir, **options)
            if result:
                print(f"{name:>8} {machine}: {json.dumps(result)}", flush=True)
                rows += [(name, label, machine, passes) for label, passes in result["tok_s"].items()]
    print("\n| model | input | machine | default tok/s | auto tok/s | best fixed path | its tok/s | default / best "
          "| auto / best | worst fixed / best |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, label, machine, passes in rows:
        speed = {path: statistics.median(values) for path, values in passes.items()}
        fixed = {path: value for path, value in speed.items() if path not in ("default", "auto")}
        best = max(fixed, key=fixed.__getitem__)
        print(f"| {name} | {label} | {machine} | {speed['default']:,.0f} | {speed['auto']:,.0f} | {best} "
              f"| {fixed[best]:,.0f} | {speed['default'] / fixed[best]:.2f} | {speed['auto'] / fixed[best]:.2f} "
              f"| {min(fixed.values()) / fixed[best]:.2f} |")  # fmt: skip
