"""The speed job of `bench_inference.py`: tok/s and peak RSS of one setting (model x path x batch size) in a fresh
process (`worker_speed`), float32 and the quantized models interleaved in one process (`worker_compare`), the list of
settings (`build_settings`) and the two tables."""

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from .ceilings import ceiling_tok_s
from .common import (
    QUANTIZED_PATHS,
    WARM_UP_PASSES,
    busy_process,
    ensure_model,
    load_model,
    median_range,
    original_folder,
    peak_rss_mib,
    setting_sentences,
)
from .split import SPLIT_CALLS, SPLIT_PATHS, time_split

TIMED_LIKE_FAST = ("fast", *QUANTIZED_PATHS, "fast-cache", "onnx", "allennlp")

# sentences per (path, batch size); the reference path is slow on 'original', so it gets fewer
ORIGINAL_FAST, SMALL_FAST = {1: 32, 32: 128, 64: 128}, {1: 64, 32: 256, 64: 256}
SENTENCES = {
    "original": {path: ORIGINAL_FAST for path in TIMED_LIKE_FAST} | {"reference": {1: 8, 32: 64, 64: 64}},
    "small": {path: SMALL_FAST for path in TIMED_LIKE_FAST} | {"reference": {1: 32, 32: 128, 64: 128}},
}
QUICK_SENTENCES = {1: 8, 32: 64, 64: 64}  # --quick: every path, every model


def worker_speed(args: argparse.Namespace) -> dict:
    """Tok/s and peak RSS of one setting (runs in its own process)."""
    import torch

    quantization = args.path if args.path in QUANTIZED_PATHS else None  # packed in the untimed warm-up
    tokenizer, model = load_model(args.model_dir, args.threads, quantization=quantization)
    if args.path == "reference":
        model.set_implementation("reference")
    if args.path == "onnx":
        session = onnx_session(args, model)
    rss_after_load = peak_rss_mib()
    sentences = setting_sentences(args.conll, args.sentences, args.long_sentence)
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]

    def run(batch: list[list[str]]) -> None:
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        if args.path == "onnx":  # all layers, as `output_hidden_states=True`
            session.run(None, {name: encoded[name].numpy() for name in ("input_ids", "attention_mask")})
        else:
            model(**encoded, output_hidden_states=True)

    passes, warm_up = [], []
    busy = busy_process() if args.busy else None
    try:
        with torch.inference_mode():
            # untimed: in its first calls of a size class the default path measures its step products and thread
            # counts (each count on one call); steady-state speed is what the ceilings compare with
            for _ in range(WARM_UP_PASSES):
                start = time.perf_counter()
                for batch in batches:
                    run(batch)
                warm_up.append(time.perf_counter() - start)
            for _ in range(args.repeats):
                if args.path == "fast-cache":
                    model.set_word_cache(100_000)  # a new, empty cache: filled by the timed batches only
                start = time.perf_counter()
                for batch in batches:
                    run(batch)
                passes.append(time.perf_counter() - start)
            split = time_split(lambda: [run(batch) for batch in batches[:SPLIT_CALLS]]) if args.profile else None
    finally:
        if busy is not None:
            busy.kill()
    tokens = sum(map(len, sentences))
    seconds = statistics.median(passes)
    return {
        "split": split and {kind: ms / len(batches[:SPLIT_CALLS]) for kind, ms in split.items()},
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "tok_s": round(tokens / seconds, 1),
        "tok_s_range": [round(tokens / max(passes)), round(tokens / min(passes))],
        "warm_up_tok_s": [round(tokens / elapsed) for elapsed in warm_up],
        "peak_rss_mib": round(peak_rss_mib()),
        "rss_after_load_mib": round(rss_after_load),
    }


def worker_compare(args: argparse.Namespace) -> dict:
    """
    Float32 and quantized models side by side in one process: one model per kind (float32, each method of `--path`,
    comma-separated), each batch run by every kind in turn (the order rotating from batch to batch), forward only (the
    batch is tokenized once), `--repeats` passes. Per kind: words/s of every pass; per quantized kind: its speedup over
    float32 in every pass (the kinds of a pass saw the same machine, so the ratio is steadier than separate runs).
    """
    import torch

    tokenizer, float32 = load_model(args.model_dir, args.threads)
    models = {"fp32": float32}
    for method in args.path.split(","):
        models[method] = load_model(args.model_dir, args.threads, quantization=method)[1]
    sentences = setting_sentences(args.conll, args.sentences)
    batches = [
        tokenizer(sentences[i : i + args.batch_size], is_split_into_words=True, padding=True, return_tensors="pt")
        for i in range(0, len(sentences), args.batch_size)
    ]
    kinds, words = list(models), sum(map(len, sentences))
    seconds = {kind: [] for kind in kinds}
    with torch.inference_mode():
        for _ in range(WARM_UP_PASSES):  # untimed: derives the packed and quantized weights, learns the choices
            for batch in batches:
                for model in models.values():
                    model(**batch, output_hidden_states=True)
        for _ in range(args.repeats):
            totals = dict.fromkeys(kinds, 0.0)
            for index, batch in enumerate(batches):
                for kind in kinds[index % len(kinds) :] + kinds[: index % len(kinds)]:
                    start = time.perf_counter()
                    models[kind](**batch, output_hidden_states=True)
                    totals[kind] += time.perf_counter() - start
            for kind in kinds:
                seconds[kind].append(totals[kind])
    return {
        "tokens": words,
        "tok_s": {kind: [words / value for value in values] for kind, values in seconds.items()},
        "speedup": {
            kind: [base / value for base, value in zip(seconds["fp32"], seconds[kind], strict=True)]
            for kind in kinds[1:]
        },
        "peak_rss_mib": round(peak_rss_mib()),
    }


def onnx_session(args: argparse.Namespace, model):
    """An onnxruntime session (`--threads` intra-op threads) on the model exported once with `elmo-export-onnx`'s
    code into `<model dir>.onnx`."""
    import onnxruntime

    from modeling_elmo.deploy.onnx_export import export_onnx

    path = args.model_dir.with_suffix(".onnx")
    if not path.exists():
        export_onnx(args.model_dir, path)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class Setting:
    """One timed setting: the model, the path, the batch's label and size, beside a busy process or not, and the
    speed worker's options."""

    name: str
    model_dir: Path
    path: str
    label: str
    batch_size: int
    busy: bool
    options: dict


def build_settings(args: argparse.Namespace, batch_sizes: list[int]) -> list[Setting]:
    settings = []
    busy_paths = [path for path in args.busy_paths.split(",") if path and path != "allennlp"]
    for name in args.models.split(","):
        model_dir = ensure_model(args.work_dir, name)
        for path, busy in [(path, False) for path in args.paths.split(",")] + [(path, True) for path in busy_paths]:
            if path == "allennlp" and original_folder(args.work_dir, name) is None:
                print(f"{name}: no original-format files, so no allennlp rows", flush=True)
                continue
            for batch_size in batch_sizes:
                count = SENTENCES.get(name, {}).get(path, {}).get(batch_size, 64)
                if args.quick:
                    count = QUICK_SENTENCES.get(batch_size, 64)
                options = {"path": path, "batch_size": batch_size, "sentences": count} | ({"busy": ""} if busy else {})
                if args.split and not busy and path in SPLIT_PATHS:
                    options["profile"] = ""
                settings.append(Setting(name, model_dir, path, f"{batch_size}", batch_size, busy, options))
        if args.long_sentence_words:
            label = f"1 ({args.long_sentence_words}-word sentence)"
            options = {"long_sentence": args.long_sentence_words}
            settings.append(Setting(name, model_dir, "fast", label, 1, False, options))
    return settings


def ratio_text(value: float, base: float | None) -> str:
    return "-" if not base else f"{value / base:.2f}x"


def print_speed_table(args, settings: list, results: dict) -> None:
    """The speed table: per setting its median tok/s, the range of its passes, GFLOP/s, its ceiling and the fraction
    of it, the ratios to AllenNLP and to the exact path (same model and batch; busy rows: the exact path beside a
    busy process), peak RSS."""
    medians = {
        (setting.name, setting.path, setting.label, setting.busy): statistics.median(r["tok_s"] for r, _ in found)
        for setting, found in zip(settings, results.values(), strict=True)
        if found
    }
    print("\n| model | path | batch | tok/s (median) | passes | x AllenNLP | x exact | GFLOP/s | ceiling (tok/s) "
          "| of ceiling | peak RSS (MiB) | tokens |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for setting, found in zip(settings, results.values(), strict=True):
        if not found:
            continue
        speed = medians[setting.name, setting.path, setting.label, setting.busy]
        low = min(result["tok_s_range"][0] for result, _ in found)
        high = max(result["tok_s_range"][1] for result, _ in found)
        allennlp = medians.get((setting.name, "allennlp", setting.label, False))
        exact = medians.get((setting.name, "fast", setting.label, setting.busy))
        ceiling_text = fraction_text = gflops_text = "-"
        limits = [(result, limit) for result, limit in found if limit]
        if limits and setting.path != "allennlp":
            options = setting.options
            sentences = setting_sentences(args.conll, options.get("sentences", 0), options.get("long_sentence", 0))
            measured = [
                (result["tok_s"], *ceiling_tok_s(limit, sentences, setting.batch_size, setting.path))
                for result, limit in limits
            ]
            ceiling = statistics.median(tok_s for _, tok_s, _ in measured)
            fractions = [value / tok_s for value, tok_s, _ in measured]
            ceiling_text = f"{ceiling:,.0f} ({measured[0][2]})"
            flops = limits[0][1]["flops_per_token"]
            gflops_text = f"{speed * (flops['lstm'] + flops['char']) / 1e9:.0f}"
            middle, least, most = median_range(fractions)
            fraction_text = f"{middle:.0%}" + (f" ({least:.0%}-{most:.0%})" if len(fractions) > 1 else "")
        path = f"{setting.path}, beside a busy process" if setting.busy else setting.path
        print(
            f"| {setting.name} | {path} | {setting.label} | {speed:,.0f} | {low:,}-{high:,} "
            f"| {ratio_text(speed, allennlp) if setting.path != 'allennlp' else '-'} "
            f"| {ratio_text(speed, exact) if setting.path != 'fast' else '-'} | {gflops_text} | {ceiling_text} "
            f"| {fraction_text} | {max(result['peak_rss_mib'] for result, _ in found):,} | {found[0][0]['tokens']} |"
        )


def print_compare_table(comparisons: dict, methods: list[str]) -> None:
    print("\nQuantized models vs float32, interleaved in one process (forward only; median of all passes of all "
          "rounds, range):")  # fmt: skip
    print("| model | batch | fp32 tok/s | " + " | ".join(f"{m} tok/s | {m} speedup" for m in methods) + " | passes |")
    print("|---|---|---|" + "---|---|" * len(methods) + "---|")

    def show(values: list[float], form: str) -> str:
        middle, low, high = median_range(values)
        return f"{middle:{form}} ({low:{form}}-{high:{form}})"

    for (name, batch_size), found in comparisons.items():
        if not found:
            continue
        speed = {kind: [v for result in found for v in result["tok_s"][kind]] for kind in found[0]["tok_s"]}
        ratio = {kind: [v for result in found for v in result["speedup"][kind]] for kind in found[0]["speedup"]}
        cells = " | ".join(f"{show(speed[m], ',.0f')} | {show(ratio[m], '.2f')}x" for m in methods)
        print(f"| {name} | {batch_size} | {show(speed['fp32'], ',.0f')} | {cells} | {len(ratio[methods[0]])} |")
