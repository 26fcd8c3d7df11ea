"""Inference speed and memory of ElmoModel (CPU, stateless): the exact float32 path, each quantization method and
AllenNLP side by side, each figure also as a fraction of this machine's own limits for the model's work, where the
time of a call goes, and the accuracy of each method (issue 44: "one benchmark command prints every figure").

Builds random-weight checkpoints of the real 'small' (LSTM 1024/128, 1 highway) and 'original' (LSTM 4096/512,
2 highways) shapes in the original HDF5 layout, converts them with `convert_checkpoint`, then runs every setting
(model x path x batch size) in a fresh process (so peak RSS is per setting, weights loading included), with
`--threads` threads, two untimed warm-up passes over the setting's sentences (in its first calls of a size class the
default path measures its step products and, on one call each, its thread counts; their tok/s are printed as
`warm_up_tok_s`) and the sentences in corpus order. Timed: tokenizer + forward with all
layers (`output_hidden_states=True`) under `torch.inference_mode()`, `--repeats` passes over the setting's sentences;
the median pass is reported, with the range of the passes (the machine's memory bandwidth is shared, so single passes
vary). Paths: `fast` (the default model: exact float32), `int8` / `int8_weight_only` / `bf16` (loaded with
`quantization_config=ElmoQuantizationConfig(method)`; the kernels' packed weights derived in the untimed warm-up),
`fast-cache` (`model.set_word_cache()`, empty when the timing starts), `reference`
(`model.set_implementation("reference")`), `onnx` (onnxruntime, `--threads` intra-op threads, on the model exported by
`elmo-export-onnx`'s code, once, to `<model dir>.onnx`; listed when onnxruntime is installed) and `allennlp`
(AllenNLP 2.10.1's `_ElmoBiLm` on the same original-format files, run by `../shared/peers/bench_allennlp.py`'s worker
in the peer's venv, `--peer-python`: the same sentences, threads and repeats, stateless, one untimed warm-up batch;
listed when that Python exists). The `--busy-paths` (default `fast`, the quantized paths and `onnx`) are also timed
with a competing busy process (a Python loop keeping one CPU busy) running beside the worker: the rows "beside a busy
process". Columns "x AllenNLP" and "x exact" divide a row's tok/s by AllenNLP's and by `fast`'s at the same model and
batch (busy rows: by `fast` beside a busy process). `--models` takes `fixture` (the shared fixture's model) and model
folders too (no `allennlp` rows for folders: they have no original-format files).
`--rounds N` runs the whole list of settings N times, interleaved (round 1: every setting, then round 2, ...), so that
the settings see the same machine; a row reports the median of its rounds' medians and the range of all its passes.
With quantized paths listed, every round also runs float32 and each quantized model side by side in one process,
batch by batch in rotating order (`worker_compare`), and reports the speedups pass by pass.

Ceilings (`--ceilings`, on by default), measured in a fresh process at the start of every round, with the model's own
weights and the products its inference paths run (float32: `LstmEngine._linear_sets`, oneDNN with packed weights on
x86 CPUs and `bmm`, at each row count the faster of the two, whichever vendor; each quantization method: its quantized
layers' own products, `ElmoQuantizedLstmLayer.linear_sets`):
- GEMM: the input-to-gate product of a block (`INPUT_GATE_BLOCK_ROWS` rows) and one time step's recurrent +
  projection products of every layer and direction (the (W_hh, W_proj) pairs the model runs in turn) at row counts
  1 ... max batch, interpolated linearly in between. A setting's GEMM ceiling is the time these products (its path's:
  float32 or its method's) take for its batches (every time step at its own row count, boundary tokens included), with
  the character CNN's FLOPs at the float32 input-to-gate rate, counted once per distinct word of a batch as the model
  runs it (the word cache, `fast-cache`, skips even those, so it can pass 100%). Batch sizes above 1 are compared with
  it. The table also gives every figure as GFLOP/s at the FLOPs per token counted from the config (LSTM: 2 x layers x 2
  x (P*4C + P*4C + C*P); char side: convolutions, highways and projection for every word; 204 MFLOP for 'original').
- Bandwidth: one time step at 1 row, i.e. every (W_hh, W_proj) pair streamed once in the model's order; bytes per
  step / time = GB/s. Batch 1 is compared with the time steps it runs (words + 2 per sentence) at that speed, for
  quantized weights at the float32 GB/s over their own (smaller) bytes (one direction of a quantized layer may stay in
  cache over its steps, so a quantized path can pass 100%). The quantized step times are printed too.
The CPU model and L3 size come from `lscpu` (or /proc/cpuinfo, /sys).

Where the time goes (`--split`, on by default): per model, path (`fast` and the quantized ones) and batch size, in
the speed worker after its timed passes (round 1), its first `SPLIT_CALLS` calls once without and once under
`torch.profiler`: the ops' own (self) CPU time summed as products (matrix products of every kind, the character CNN's
included: `mm`, `linear`, `matmul` in the op's name) and other ops (element-wise work, copies), and the rest of the
wall time (Python between the ops, and the profiler's own cost), in ms per call; beside them the same calls' wall time
without the profiler.

Accuracy: per model, on `--accuracy-sentences` CoNLL dev sentences in one batch, the max abs difference between the
paths and of each against the reference path run in float64, the max abs error of bfloat16 against float32, and per
quantization method the max and mean abs error against float32 of every layer (layer 0: the character CNN, then each
biLM layer; the mean over the real words' values); for every model of `--models` and the fixture's. `--ner-tagger DIR`
adds the NER F1 of an `elmo-train-ner` folder in float32 and with each method (`quantized_ner_f1.py`, CoNLL dev and
test next to `--conll`).

Corpus: as the AllenNLP peer benchmark (../shared/peers/bench_allennlp.py): the first 500 sentences with >= 11 words of
CoNLL-2003 dev.txt, shuffled with random.Random(0) (24.5 words on average); a setting uses the first N of them.
Also measured: a single 2,000-word sentence (batch 1, fast path).

`--quick` is a one-minute run for checking the benchmark itself: 'small', batch 1 and 64 on a few sentences, one
repeat, `fast`, `int8` and `allennlp` where its Python exists (busy: `fast`, `int8`), no long sentence (its
figures are not for the record).

`--choice` validates the default's automatic choices instead (`worker_choice`): per model, on the idle machine and
beside a busy process, batch 1, batch 64 and one long sentence (`--choice-long-words`), the default path against
every fixed choice it picks from (oneDNN or `bmm` step products x `--threads` or 1 thread for the whole call) in one
process, interleaved; the table gives the default's tok/s as a fraction of the best fixed choice's.

    python benchmarks/bench_inference.py [--conll ../shared/data/conll2003/dev.txt] [--models small,original]
        [--batch-sizes 1,32,64] [--paths fast,int8,...,allennlp] [--busy-paths fast,int8,...] [--work-dir DIR]
        [--threads 2] [--repeats 3] [--rounds 1] [--no-ceilings] [--no-split] [--omp-passive]
        [--peer-python PEER_VENV/bin/python] [--ner-tagger NER_FOLDER] [--quick]
    python benchmarks/bench_inference.py --choice --models fixture,small,original [--repeats 3]
"""

import argparse
import importlib.util
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONLL = REPO.parent / "shared" / "data" / "conll2003" / "dev.txt"
FIXTURE = REPO.parent / "shared" / "fixtures" / "elmo"
PEERS = REPO.parent / "shared" / "peers"  # AllenNLP's benchmark worker (bench_allennlp.py), run in its own venv
DEFAULT_PEER_PYTHON = os.environ.get("ELMO_PEER_PYTHON") or str(Path(tempfile.gettempdir()) / "peer/venv/bin/python")
HAS_ONNXRUNTIME = importlib.util.find_spec("onnxruntime") is not None  # the `onnx` path needs the onnx extra
QUANTIZED_PATHS = ("int8", "int8_weight_only", "bf16")  # ElmoQuantizationConfig(method=path)
TIMED_LIKE_FAST = ("fast", *QUANTIZED_PATHS, "fast-cache", "onnx", "allennlp")
# sentences per (path, batch size); the reference path is slow on 'original', so it gets fewer
ORIGINAL_FAST, SMALL_FAST = {1: 32, 32: 128, 64: 128}, {1: 64, 32: 256, 64: 256}
SENTENCES = {
    "original": {path: ORIGINAL_FAST for path in TIMED_LIKE_FAST} | {"reference": {1: 8, 32: 64, 64: 64}},
    "small": {path: SMALL_FAST for path in TIMED_LIKE_FAST} | {"reference": {1: 32, 32: 128, 64: 128}},
}
QUICK_SENTENCES = {1: 8, 32: 64, 64: 64}  # --quick: every path, every model
QUICK = {"models": "small", "batch_sizes": "1,64", "paths": "fast,int8"}
QUICK |= {"busy_paths": "fast,int8", "repeats": 1, "long_sentence_words": 0, "accuracy_sentences": 8}
SPLIT_PATHS = ("fast", *QUANTIZED_PATHS)  # the paths whose time per call is split (--split)
SPLIT_CALLS = 4  # the first calls of a setting profiled (--split)
PRODUCT_OPS = ("mm", "linear", "matmul")  # in an op's name: a matrix product (addmm, bmm, _int_mm, int8pack_mm, ...)
WARM_UP_PASSES = 2  # untimed passes over a setting's sentences before the timed ones


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
    """Random original-format checkpoint of architecture `name`, or the shared fixture's model for "fixture",
    converted once into `work_dir/name/hf`; a model folder given as `name` is used as it is."""
    from modeling_elmo.conversion.convert import convert_checkpoint
    from modeling_elmo.conversion.testing_utils import ARCHITECTURES, write_random_original_checkpoint

    if Path(name).is_dir():
        return Path(name)
    folder = work_dir / name / "hf"
    if not (folder / "config.json").exists():
        if name == "fixture":
            options, weights = FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5"
        else:
            original = work_dir / name / "original"
            options, weights = write_random_original_checkpoint(original, ARCHITECTURES[name], seed=0)
        convert_checkpoint(str(options), str(weights), folder, overwrite=True)
    return folder


def setting_sentences(conll: Path, count: int, long_sentence: int = 0) -> list[list[str]]:
    """A setting's sentences: the first `count` of the corpus, or one sentence of the corpus' first `long_sentence`
    words."""
    if long_sentence:
        return [[word for sentence in load_corpus(conll) for word in sentence][:long_sentence]]
    return load_corpus(conll)[:count]


def original_folder(work_dir: Path, name: str) -> Path | None:
    """The original-format files (options.json, lm_weights.hdf5) of model `name`, which AllenNLP reads; None for a
    model folder given by path."""
    if name == "fixture":
        return FIXTURE
    folder = work_dir / name / "original"
    return folder if (folder / "options.json").is_file() else None


def _load(model_dir: Path, threads: int, dtype=None, quantization: str | None = None):
    """(tokenizer, model in eval mode): float32 (or `dtype`), or quantized by `quantization` (a method)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    import modeling_elmo  # registers the Auto classes

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    options = (
        {} if quantization is None else {"quantization_config": modeling_elmo.ElmoQuantizationConfig(quantization)}
    )
    model = AutoModel.from_pretrained(model_dir, dtype=dtype or torch.float32, **options).eval()
    return tokenizer, model


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_speed(args: argparse.Namespace) -> dict:
    """Tok/s and peak RSS of one setting (runs in its own process)."""
    import torch

    quantization = args.path if args.path in QUANTIZED_PATHS else None  # packed in the untimed warm-up
    tokenizer, model = _load(args.model_dir, args.threads, quantization=quantization)
    if args.path == "reference":
        model.set_implementation("reference")
    if args.path == "onnx":
        session = _onnx_session(args, model)
    rss_after_load = _peak_rss_mib()
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
        "peak_rss_mib": round(_peak_rss_mib()),
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

    tokenizer, float32 = _load(args.model_dir, args.threads)
    models = {"fp32": float32}
    for method in args.path.split(","):
        models[method] = _load(args.model_dir, args.threads, quantization=method)[1]
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
        "peak_rss_mib": round(_peak_rss_mib()),
    }


def _onnx_session(args: argparse.Namespace, model):
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


def busy_process() -> subprocess.Popen:
    """A competing process keeping one CPU busy (a pure-Python loop), as another user's job would."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _use_engine(model, products: str, threads: int | str | None) -> None:
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

    tokenizer, model = _load(args.model_dir, args.threads)
    products = ["onednn", "bmm"] if onednn_linear_applies(torch.zeros(1), torch.zeros(1)) else ["bmm"]
    paths = {"default": ("bmm", None), "auto": ("auto", "auto")} | {
        f"{name} {threads}t": (name, threads) for name in products for threads in sorted({args.threads, 1})
    }
    corpus = load_corpus(args.conll)

    def use(products: str, threads: int | str | None) -> None:
        """The default (`--threads`), the automatic choice (`--threads` at most) or a fixed choice: that many threads
        for all of a call."""
        torch.set_num_threads(args.threads if threads in ("auto", None) else threads)
        _use_engine(model, products, threads)

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


def worker_accuracy(args: argparse.Namespace) -> dict:
    """
    On `--sentences` sentences in one batch: max abs differences of all layers between the fast and the reference path
    in float32, of both against the reference path computed in float64 (the exact values up to float64 rounding), of
    bfloat16 (fast path) against float32; per quantization method, per layer (0: the character CNN, then each biLM
    layer), the max and the mean abs error against float32 over the real words' values, and its max against the
    float64 reference.
    """
    import torch

    tokenizer, model = _load(args.model_dir, args.threads)
    sentences = load_corpus(args.conll)[: args.sentences]
    encoded = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    words = encoded["attention_mask"].bool()  # (batch, words): the real words

    def layers_of(found_model) -> list:
        with torch.inference_mode():
            return [layer[words] for layer in found_model(**encoded, output_hidden_states=True).hidden_states]

    def layers(reference: bool, dtype: torch.dtype) -> list:
        model.to(dtype)
        model.set_implementation("reference" if reference else None)
        return layers_of(model)

    fast, reference = layers(False, torch.float32), layers(True, torch.float32)
    quantized = {
        method: layers_of(_load(args.model_dir, args.threads, quantization=method)[1])
        for method in _methods(args.path)
    }
    exact, low = layers(True, torch.float64), layers(False, torch.bfloat16)

    def errors(left, right) -> list[torch.Tensor]:
        return [(a.double() - b.double()).abs() for a, b in zip(left, right, strict=True)]

    def difference(left, right) -> float:
        # torch's max propagates NaN (the builtin `max` of floats would hide it)
        return float(torch.stack([error.max() for error in errors(left, right)]).max())

    return {
        "fast_vs_reference": difference(fast, reference),
        "fast_vs_float64_reference": difference(fast, exact),
        "reference_vs_float64_reference": difference(reference, exact),
        "bf16_vs_fp32": difference(low, fast),
        "quantized_vs_fp32": {
            method: [[float(error.max()), float(error.mean())] for error in errors(found, fast)]
            for method, found in quantized.items()
        },
        "quantized_vs_float64_reference": {method: difference(found, exact) for method, found in quantized.items()},
        "max_abs_value": float(torch.stack([layer.abs().max() for layer in fast]).max()),
        "words": int(words.sum()),
    }


def cpu_description() -> dict[str, str]:
    """The CPU model and L3 size as `lscpu` reports them (vendor-neutral), else from /proc/cpuinfo and /sys."""
    found = {}
    try:
        listing = subprocess.run(
            ["lscpu"], capture_output=True, text=True, timeout=30, env={**os.environ, "LC_ALL": "C"}
        )
        for line in listing.stdout.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "L3 cache", "Vendor ID") and value.strip():
                found.setdefault(key.strip(), value.strip())  # the first cluster's, on CPUs that list several
    except (OSError, subprocess.SubprocessError):
        pass
    if "Model name" not in found and Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                found["Model name"] = value.strip()
                break
    cache = Path("/sys/devices/system/cpu/cpu0/cache")
    if "L3 cache" not in found and cache.is_dir():
        for index in sorted(cache.glob("index*")):
            if (index / "level").read_text().strip() == "3":
                found["L3 cache"] = (index / "size").read_text().strip()
    return {
        "model": found.get("Model name") or platform.processor() or platform.machine(),
        "vendor": found.get("Vendor ID", "?"),
        "l3": found.get("L3 cache", "?"),
    }


def flops_per_token(config) -> dict[str, int]:
    """Multiply-adds x 2 per word, counted from the config: the LSTM layers (input-to-gate, recurrent, projection,
    both directions) and the character side (convolutions over all `max_characters_per_token` positions, highways,
    projection), as if every word went through the CNN (the model runs it once per distinct word of a batch)."""
    cells, projection = config.lstm_cell_size, config.projection_dim
    lstm = config.num_hidden_layers * 2 * 2 * (2 * projection * 4 * cells + cells * projection)
    chars, filters = config.max_characters_per_token, config.num_char_filters
    convolutions = sum(
        2 * width * config.char_embedding_dim * count * (chars - width + 1) for width, count in config.char_filters
    )
    char_side = convolutions + config.num_highway_layers * 2 * 2 * filters * filters + 2 * filters * projection
    return {"lstm": lstm, "char": char_side}


def _time_ms(function, repeats: int) -> float:
    """Median wall time of `function()` in ms over `repeats` calls after one untimed call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def worker_ceilings(args: argparse.Namespace) -> dict:
    """
    This machine's limits for the model's products (see the module docstring), with the model's own weights and the
    products its inference paths build (float32: `LstmEngine._linear_sets`; each quantization method of `--path`:
    its quantized layers' `linear_sets`): the input-to-gate product of one block, and one time step (the recurrent +
    projection products of every layer and direction in turn) at several row counts, per kind (float32, each method);
    the one-row steps of all kinds timed interleaved.
    """
    import torch

    from modeling_elmo.engine.cpu_linear import onednn_linear_applies
    from modeling_elmo.engine.lstm_engine import LstmEngine

    _, model = _load(args.model_dir, args.threads)
    config, layers = model.config, list(model.bilm.layers)
    onednn = onednn_linear_applies(layers[0].weight_hh, torch.zeros(1))
    cells, projection = config.lstm_cell_size, config.projection_dim
    block_rows = LstmEngine.INPUT_GATE_BLOCK_ROWS
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(2, max(block_rows, args.max_rows), projection, generator=generator)  # (2, rows, P)
    cell_outputs = torch.randn(2, args.max_rows, cells, generator=generator) * 0.5  # (2, rows, C)

    def float32_sets(products: str) -> list:
        engine = LstmEngine(products)
        # per layer: [(directions, products)]
        return [engine._linear_sets(layer, inputs, args.max_rows)[1] for layer in layers]

    def one_step(sets: list, rows: int) -> None:
        for layer_sets in sets:
            for directions, (_, recurrent, project) in layer_sets:
                recurrent(inputs[directions, :rows])
                project(cell_outputs[directions, :rows])

    def input_blocks(sets: list) -> None:
        for layer_sets in sets:
            for directions, (input_to_gates, _, _) in layer_sets:
                input_to_gates(inputs[directions, :block_rows])

    def step_times(sets: list) -> dict[int, float]:
        return {
            rows: _time_ms(lambda rows=rows: one_step(sets, rows), args.repeats + (12 if rows == 1 else 4))
            for rows in grid
        }

    grid = sorted({1, 2, 4, 8, 16, 24, 32, 48, 64, args.max_rows} - {r for r in range(args.max_rows + 1, 65)})
    step_flops_per_row = len(layers) * 2 * 2 * (projection * 4 * cells + cells * projection)
    input_flops_per_row = len(layers) * 2 * 2 * projection * 4 * cells
    step_bytes = {"fp32": sum(4 * (layer.weight_hh.numel() + layer.weight_proj.numel()) for layer in layers)}
    quantized_models = {
        method: _load(args.model_dir, args.threads, quantization=method)[1] for method in _methods(args.path)
    }
    with torch.inference_mode():
        variants = {"oneDNN": float32_sets("onednn")} if onednn else {}
        variants["bmm"] = float32_sets("bmm")
        input_ms = {
            "fp32": min(_time_ms(lambda sets=sets: input_blocks(sets), args.repeats + 2) for sets in variants.values())
        }
        times = {name: step_times(sets) for name, sets in variants.items()}
        fastest = {rows: min(variants, key=lambda name, rows=rows: times[name][rows]) for rows in grid}
        step_ms = {"fp32": {rows: times[fastest[rows]][rows] for rows in grid}}
        kinds = {"fp32": variants[fastest[1]]}
        for method, quantized_model in quantized_models.items():
            quantized_layers = list(quantized_model.bilm.layers)
            kinds[method] = [layer.linear_sets() for layer in quantized_layers]
            step_bytes[method] = sum(
                buffer.nbytes
                for layer in quantized_layers
                for name, buffer in layer.named_buffers()
                if name.startswith(("weight_hh", "weight_proj"))
            )
            input_ms[method] = _time_ms(lambda sets=kinds[method]: input_blocks(sets), args.repeats + 2)
            step_ms[method] = step_times(kinds[method])
        one_row_times = {kind: [] for kind in kinds}
        for _ in range(args.repeats + 12):  # interleaved, so that all kinds see the same machine
            for kind, kind_sets in kinds.items():
                one_row_times[kind].append(_time_ms(lambda sets=kind_sets: one_step(sets, 1), 1))
        one_row_ms = {kind: statistics.median(found) for kind, found in one_row_times.items()}
    return {
        "cpu": cpu_description(),
        "products": {rows: fastest[rows] for rows in grid},
        "torch": torch.__version__,
        "flops_per_token": flops_per_token(config),
        "input_block_rows": block_rows,
        "input_flops_per_row": input_flops_per_row,
        "input_gflops": {kind: input_flops_per_row * block_rows / ms / 1e6 for kind, ms in input_ms.items()},
        "step_flops_per_row": step_flops_per_row,
        "step_ms": step_ms,
        "step_gflops": {
            kind: {rows: step_flops_per_row * rows / ms / 1e6 for rows, ms in by_rows.items()}
            for kind, by_rows in step_ms.items()
        },
        "step_bytes": step_bytes,
        "one_row_step_ms": one_row_ms,
        "bandwidth_gbs": step_bytes["fp32"] / one_row_ms["fp32"] / 1e6,
    }


def time_split(calls) -> dict[str, float]:
    """Where the time of `calls()` goes (module docstring, `--split`), in ms: its ops' own CPU time by kind under
    `torch.profiler` (`products`, `other ops`), the rest of the profiled wall time (`outside ops`), the profiled
    wall time, and the wall time of the same calls just before without the profiler."""
    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    calls()
    unprofiled = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        start = time.perf_counter()
        calls()
        profiled = time.perf_counter() - start
    spent = {"products": 0.0, "other ops": 0.0}
    for event in profiler.key_averages():
        kind = "products" if any(op in event.key.lower() for op in PRODUCT_OPS) else "other ops"
        spent[kind] += event.self_cpu_time_total / 1e3  # ms
    outside = max(profiled * 1e3 - sum(spent.values()), 0.0)
    return spent | {"outside ops": outside, "profiled": profiled * 1e3, "unprofiled": unprofiled * 1e3}


def _methods(text: str) -> list[str]:
    """The quantization methods of a comma-separated `--path` list given to a worker."""
    return [method for method in text.split(",") if method in QUANTIZED_PATHS]


def _interpolate(points: dict[int, float], x: int) -> float:
    """Piecewise-linear interpolation of `points` {x: y} at `x` (clamped to the measured range)."""
    xs = sorted(points)
    if x <= xs[0]:
        return points[xs[0]]
    for left, right in zip(xs, xs[1:], strict=False):
        if x <= right:
            return points[left] + (points[right] - points[left]) * (x - left) / (right - left)
    return points[xs[-1]] * x / xs[-1]


def ceiling_tok_s(ceilings: dict, sentences: list[list[str]], batch_size: int, path: str) -> tuple[float, str]:
    """
    The setting's ceiling in words/s and its kind. Batch 1: its time steps (words + 2 per sentence), each streaming
    the step's weights (float32, or the path's quantized ones) at the measured float32 GB/s. Larger batches: the time
    the measured products of the path's kind take for its batches (each step at its own row count; input-to-gate
    products at the kind's input-to-gate GEMM rate; the character side at float32's, the character CNN once per
    distinct word of a batch and for `<S>`, `</S>`, as the model runs it).
    """
    kind = path if path in QUANTIZED_PATHS else "fp32"
    words = sum(map(len, sentences))
    steps = ceilings["step_ms"][kind]
    if batch_size == 1:
        step_bytes = ceilings["step_bytes"][kind]
        seconds = sum(len(sentence) + 2 for sentence in sentences) * step_bytes / (ceilings["bandwidth_gbs"] * 1e9)
        return words / seconds, "bandwidth"
    char_rate, input_rate = ceilings["input_gflops"]["fp32"] * 1e9, ceilings["input_gflops"][kind] * 1e9
    seconds = 0.0
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        distinct = len({word for sentence in batch for word in sentence}) + 2
        seconds += distinct * ceilings["flops_per_token"]["char"] / char_rate
        lengths = sorted((len(sentence) + 2 for sentence in batch), reverse=True)
        seconds += sum(lengths) * ceilings["input_flops_per_row"] / input_rate
        seconds += sum(_interpolate(steps, sum(n > t for n in lengths)) for t in range(lengths[0])) / 1000
    return words / seconds, "GEMM"


def _spawn(args: argparse.Namespace, mode: str, model_dir: Path, **options) -> dict | None:
    command = [sys.executable, __file__, "--worker", mode, "--model-dir", str(model_dir), "--conll", str(args.conll)]
    command += ["--threads", str(args.threads), "--repeats", str(args.repeats)]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}"] + ([str(value)] if value != "" else [])
    return _worker_result(args, command, f"{mode} {model_dir} {options}")


def _worker_result(args: argparse.Namespace, command: list[str], label: str) -> dict | None:
    """Run a worker `command` (OpenMP's passive wait with `--omp-passive`) and return its last `RESULT` line's
    JSON, or None (its error printed, named by `label`) where it failed."""
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"} if args.omp_passive else None
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        print(f"FAILED {label}:\n{result.stderr[-2000:]}", flush=True)
        return None
    return json.loads(lines[-1][len("RESULT ") :])


def _spawn_allennlp(args: argparse.Namespace, folder: Path, batch_size: int, sentences: int) -> dict | None:
    """AllenNLP's tok/s on the original-format files in `folder`: the peer's own benchmark worker
    (../shared/peers/bench_allennlp.py, in its venv), on the same corpus, sentences, threads and repeats."""
    command = [args.peer_python, str(PEERS / "bench_allennlp.py"), "--worker", "--model-dir", str(folder)]
    command += ["--batch-size", str(batch_size), "--n-sentences", str(sentences), "--corpus", "conll"]
    command += ["--conll-dir", str(args.conll.parent), "--threads", str(args.threads), "--repeats", str(args.repeats)]
    found = _worker_result(args, command, f"allennlp {folder} batch {batch_size}")
    if found is None:
        return None
    passes = found["tokens_per_s_all"]
    return {
        "tokens": found["tokens"],
        "tok_s": found["tokens_per_s"],
        "tok_s_range": [round(min(passes)), round(max(passes))],
        "peak_rss_mib": found["peak_rss_mib"],
    }


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
            result = _spawn(args, "choice", model_dir, **options)
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


def _median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _print_ceilings(name: str, rounds: list[dict]) -> None:
    """One model's ceilings over the rounds: medians, with ranges where there are several rounds."""

    def show(values: list[float], digits: int = 0) -> str:
        middle, low, high = _median_range(values)
        text = f"{middle:,.{digits}f}"
        return text if len(values) == 1 else f"{text} ({low:,.{digits}f}-{high:,.{digits}f})"

    first = rounds[0]
    flops = first["flops_per_token"]
    measured = first["step_gflops"]["fp32"]
    grid = [rows for rows in measured if rows in (1, 8, 32, 64) or rows == max(measured)]
    mib = {kind: count / 2**20 for kind, count in first["step_bytes"].items()}
    total, lstm, char_side = (flops["lstm"] + flops["char"]) / 1e6, flops["lstm"] / 1e6, flops["char"] / 1e6
    print(f"\n{name}: FLOP/token {total:.1f} M (LSTM {lstm:.1f} M, char side {char_side:.1f} M); "
          f"float32 products: {first['products']}")  # fmt: skip
    for kind in first["step_ms"]:
        gemm = show([r["input_gflops"][kind] for r in rounds])
        print(f"  {kind}: input-to-gate GEMM, {first['input_block_rows']} rows: {gemm} GFLOP/s")
        for rows in grid:
            gflops = [r["step_gflops"][kind][rows] for r in rounds]
            ms = [r["step_ms"][kind][rows] for r in rounds]
            print(f"  {kind}: one time step (all layers and directions), {rows} rows: {show(gflops)} GFLOP/s, "
                  f"{show(ms, 2)} ms")  # fmt: skip
    print("  weights streamed per time step: " + ", ".join(f"{kind} {size:.1f} MiB" for kind, size in mib.items())
          + "; one step at 1 row (interleaved): "
          + ", ".join(f"{kind} {show([r['one_row_step_ms'][kind] for r in rounds], 2)} ms" for kind in mib)
          + f"; float32 bandwidth {show([r['bandwidth_gbs'] for r in rounds], 1)} GB/s")  # fmt: skip


def _ratio(value: float, base: float | None) -> str:
    return "-" if not base else f"{value / base:.2f}x"


def _print_speed_table(args, settings: list, results: dict) -> None:
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
            middle, least, most = _median_range(fractions)
            fraction_text = f"{middle:.0%}" + (f" ({least:.0%}-{most:.0%})" if len(fractions) > 1 else "")
        path = f"{setting.path}, beside a busy process" if setting.busy else setting.path
        print(
            f"| {setting.name} | {path} | {setting.label} | {speed:,.0f} | {low:,}-{high:,} "
            f"| {_ratio(speed, allennlp) if setting.path != 'allennlp' else '-'} "
            f"| {_ratio(speed, exact) if setting.path != 'fast' else '-'} | {gflops_text} | {ceiling_text} "
            f"| {fraction_text} | {max(result['peak_rss_mib'] for result, _ in found):,} | {found[0][0]['tokens']} |"
        )


def _print_compare_table(comparisons: dict, methods: list[str]) -> None:
    print("\nQuantized models vs float32, interleaved in one process (forward only; median of all passes of all "
          "rounds, range):")  # fmt: skip
    print("| model | batch | fp32 tok/s | " + " | ".join(f"{m} tok/s | {m} speedup" for m in methods) + " | passes |")
    print("|---|---|---|" + "---|---|" * len(methods) + "---|")

    def show(values: list[float], form: str) -> str:
        middle, low, high = _median_range(values)
        return f"{middle:{form}} ({low:{form}}-{high:{form}})"

    for (name, batch_size), found in comparisons.items():
        if not found:
            continue
        speed = {kind: [v for result in found for v in result["tok_s"][kind]] for kind in found[0]["tok_s"]}
        ratio = {kind: [v for result in found for v in result["speedup"][kind]] for kind in found[0]["speedup"]}
        cells = " | ".join(f"{show(speed[m], ',.0f')} | {show(ratio[m], '.2f')}x" for m in methods)
        print(f"| {name} | {batch_size} | {show(speed['fp32'], ',.0f')} | {cells} | {len(ratio[methods[0]])} |")


def _print_split(splits: list) -> None:
    print("\nWhere a call's time goes (the first calls of a setting, round 1, under torch.profiler: ops' own CPU "
          "time; ms per call; outside ops: Python between the ops and the profiler's own cost):")  # fmt: skip
    print("| model | path | batch | products | other ops | outside ops | products share | profiled call "
          "| unprofiled call |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for setting, parts in splits:
        share = parts["products"] / parts["profiled"]
        print(f"| {setting.name} | {setting.path} | {setting.label} | {parts['products']:.2f} "
              f"| {parts['other ops']:.2f} | {parts['outside ops']:.2f} | {share:.0%} | {parts['profiled']:.2f} "
              f"| {parts['unprofiled']:.2f} |")  # fmt: skip


def _print_accuracy(accuracies: dict[str, dict]) -> None:
    print("\nAccuracy against float32 (CoNLL dev sentences in one batch; per layer: 0 = character CNN, then each "
          "biLM layer; max abs / mean abs over the real words' values):")  # fmt: skip
    print("| model | method | layer | max abs | mean abs | max abs vs float64 reference | words |")
    print("|---|---|---|---|---|---|---|")
    for name, found in accuracies.items():
        for method, layers in found["quantized_vs_fp32"].items():
            for index, (largest, mean) in enumerate(layers):
                exact = f"{found['quantized_vs_float64_reference'][method]:.2e}" if index == 0 else ""
                print(f"| {name} | {method} | {index} | {largest:.2e} | {mean:.2e} | {exact} | {found['words']} |")
        print(f"| {name} | (fast vs reference, float32) | all | {found['fast_vs_reference']:.2e} | | "
              f"{found['fast_vs_float64_reference']:.2e} | {found['words']} |")  # fmt: skip
        print(f"| {name} | (whole model in bfloat16) | all | {found['bf16_vs_fp32']:.2e} | | | {found['words']} |")


def _run_ner(args, methods: list[str]) -> None:
    """The NER F1 table of `--ner-tagger` (quantized_ner_f1.py in a process of its own)."""
    command = [sys.executable, str(Path(__file__).with_name("quantized_ner_f1.py")), "--tagger", str(args.ner_tagger)]
    command += ["--data_dir", str(args.conll.parent), "--threads", str(args.threads), "--methods", ",".join(methods)]
    result = subprocess.run(command, capture_output=True, text=True)
    table = [line for line in result.stdout.splitlines() if line.startswith(("|", "NER F1"))]
    if not table:
        print(f"\nFAILED NER F1 of {args.ner_tagger}:\n{result.stderr[-2000:]}", flush=True)
        return
    print("\n" + "\n".join(table) + ("" if result.returncode == 0 else "\n(a method is beyond the tolerance)"))


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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL, help="CoNLL-2003 dev.txt")
    parser.add_argument("--models", default="small,original")
    parser.add_argument("--batch-sizes", default="1,32,64")
    peer = Path(DEFAULT_PEER_PYTHON).is_file()
    parser.add_argument(
        "--paths",
        default=",".join(("fast", *QUANTIZED_PATHS, "fast-cache", "reference"))
        + (",onnx" if HAS_ONNXRUNTIME else "")
        + (",allennlp" if peer else ""),
        help="fast: exact float32; int8, int8_weight_only, bf16: ElmoQuantizationConfig(method); fast-cache: with "
        "the word cache on; onnx: onnxruntime on the model exported by elmo-export-onnx (needs the onnx extra); "
        "allennlp: AllenNLP 2.10.1 in the peer's venv (--peer-python)",
    )
    parser.add_argument(
        "--busy-paths",
        default=",".join(("fast", *QUANTIZED_PATHS)) + (",onnx" if HAS_ONNXRUNTIME else ""),
        help="paths also timed with a competing busy process (one CPU kept busy) running beside the worker",
    )
    parser.add_argument(
        "--peer-python",
        default=DEFAULT_PEER_PYTHON,
        help="python of the AllenNLP peer venv (../shared/peers/setup_and_bench.sh; default $ELMO_PEER_PYTHON or "
        "<tmp>/peer/venv/bin/python)",
    )
    parser.add_argument(
        "--ner-tagger", type=Path, help="an elmo-train-ner folder: its NER F1 in float32 and with each method"
    )
    parser.add_argument(
        "--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-bench", help="checkpoints are kept here"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--long-sentence-words", type=int, default=2000, help="0 to skip")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per setting; the median is reported")
    parser.add_argument("--rounds", type=int, default=1, help="runs of the whole list of settings, interleaved")
    parser.add_argument("--accuracy-sentences", type=int, default=32, help="CoNLL dev sentences of the accuracy")
    parser.add_argument(
        "--ceilings",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the GEMM and bandwidth ceilings in every round and report each figure as a fraction of them",
    )
    parser.add_argument(
        "--split",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="where a call's time goes: products, other ops, outside ops (torch.profiler)",
    )
    parser.add_argument(
        "--omp-passive",
        action="store_true",
        help="run the workers with OMP_WAIT_POLICY=PASSIVE: on a CPU shared with other busy processes, spinning "
        "OpenMP threads otherwise slow every small parallel operation down by orders of magnitude",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a one-minute check of the benchmark itself: "
        + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()),
    )
    parser.add_argument(
        "--choice",
        action="store_true",
        help="instead of the speed table: the default path against every fixed choice of products and threads, on "
        "the idle machine and beside a busy process (models: --models, e.g. fixture,small,original)",
    )
    parser.add_argument(
        "--choice-long-words",
        default="fixture:10000,small:10000,original:2000",
        help="words of the long sentence per model for --choice",
    )
    parser.add_argument(
        "--worker", choices=["speed", "accuracy", "ceilings", "compare", "choice"], help=argparse.SUPPRESS
    )
    parser.add_argument("--busy", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)  # the speed worker: --split
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--path", default="fast", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--sentences", type=int, default=32, help=argparse.SUPPRESS)
    parser.add_argument("--long-sentence", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--max-rows", type=int, default=64, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
        if Path(args.peer_python).is_file():
            args.paths += ",allennlp"
    if args.repeats < 1 or args.rounds < 1 or args.accuracy_sentences < 1:
        parser.error(
            f"--repeats, --rounds and --accuracy-sentences must be at least 1, got {args.repeats}, {args.rounds} "
            f"and {args.accuracy_sentences}"
        )
    known = {"fast", *QUANTIZED_PATHS, "fast-cache", "reference", "onnx", "allennlp"}
    for option in ("paths", "busy_paths"):
        unknown = [path for path in getattr(args, option).split(",") if path and path not in known]
        if unknown:
            parser.error(
                f"--{option.replace('_', '-')}: unknown {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
    if not args.worker and "allennlp" in args.paths.split(",") and not Path(args.peer_python).is_file():
        parser.error(f"--paths allennlp: no AllenNLP peer Python at {args.peer_python} (give --peer-python)")
    if args.ner_tagger is not None and not (args.ner_tagger / "config.json").is_file():
        parser.error(f"--ner-tagger {args.ner_tagger}: no config.json there (give elmo-train-ner's --output_dir)")
    return args


def main() -> None:
    args = parse_args()
    if args.worker:
        workers = {
            "speed": worker_speed,
            "accuracy": worker_accuracy,
            "ceilings": worker_ceilings,
            "compare": worker_compare,
            "choice": worker_choice,
        }
        print("RESULT " + json.dumps(workers[args.worker](args)), flush=True)
        return

    sys.path.insert(0, str(REPO))
    corpus = load_corpus(args.conll)
    lengths = list(map(len, corpus))
    policy = "PASSIVE" if args.omp_passive else os.environ.get("OMP_WAIT_POLICY", "default")
    average = sum(lengths) / len(lengths)
    cpu = cpu_description()
    print(f"CPU: {cpu['model']} ({cpu['vendor']}), L3 {cpu['l3']}, {os.cpu_count()} logical CPUs", flush=True)
    print(f"corpus: {len(corpus)} sentences, {sum(lengths)} words, avg {average:.1f}; threads={args.threads}; "
          f"OMP_WAIT_POLICY={policy}; load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    if args.choice:
        run_choice(args)
        return
    batch_sizes = list(map(int, args.batch_sizes.split(",")))
    models = args.models.split(",")
    methods = [path for path in QUANTIZED_PATHS if path in args.paths.split(",")]
    quantized = {"path": ",".join(methods)} if methods else {}  # the methods a worker also measures
    settings = build_settings(args, batch_sizes)
    comparisons = {(name, batch_size): [] for name in models for batch_size in batch_sizes}
    results = {index: [] for index in range(len(settings))}  # per setting: (round result, that round's ceilings)
    ceilings = {name: [] for name in models}
    loads = [os.getloadavg()[0]]
    for round_index in range(args.rounds):
        round_ceilings = {}
        for index, setting in enumerate(settings):
            name = setting.name
            if args.ceilings and name not in round_ceilings:
                found = _spawn(args, "ceilings", setting.model_dir, max_rows=max(batch_sizes), **quantized)
                round_ceilings[name] = found
                if found:
                    for key in ("step_ms", "step_gflops"):  # JSON keys are strings
                        found[key] = {kind: {int(k): v for k, v in rows.items()} for kind, rows in found[key].items()}
                    ceilings[name].append(found)
                    print(f"{name:>8} round {round_index + 1} ceilings {json.dumps(found)}", flush=True)
            if setting.path == "allennlp":
                folder = original_folder(args.work_dir, name)
                result = _spawn_allennlp(args, folder, setting.batch_size, setting.options["sentences"])
            else:
                result = _spawn(args, "speed", setting.model_dir, **setting.options)
            if result:
                results[index].append((result, round_ceilings.get(name)))
                path = f"{setting.path}{' (busy)' if setting.busy else ''}"
                print(f"{name:>8} round {round_index + 1} {path:>16} bs={setting.label:<3} {result}", flush=True)
        for (name, batch_size), found in comparisons.items() if methods else ():
            count = (
                QUICK_SENTENCES[batch_size]
                if args.quick
                else SENTENCES.get(name, {}).get("fast", {}).get(batch_size, 64)
            )
            model_dir = ensure_model(args.work_dir, name)
            result = _spawn(args, "compare", model_dir, batch_size=batch_size, sentences=count, **quantized)
            if result:
                found.append(result)
                print(f"{name:>8} round {round_index + 1} quantized vs float32 bs={batch_size}: {result}", flush=True)
        loads.append(os.getloadavg()[0])
        print(f"load average after round {round_index + 1}: {loads[-1]:.2f}", flush=True)
    accuracies = {}
    for name in models + ["fixture"] * ("fixture" not in models):
        found = _spawn(
            args,
            "accuracy",
            ensure_model(args.work_dir, name),
            sentences=args.accuracy_sentences,
            **quantized,
        )
        if found:
            accuracies[name] = found
            print(f"{name:>8} accuracy on {args.accuracy_sentences} sentences: {json.dumps(found)}", flush=True)
    print(f"load average (1 min) at the start, after each round: {', '.join(f'{load:.2f}' for load in loads)}")
    if any(comparisons.values()):
        _print_compare_table(comparisons, methods)
    if any(ceilings.values()):
        print(f"\nCeilings on {cpu['model']}, L3 {cpu['l3']}, {args.threads} threads (median of the rounds, range):")
        for name, rounds in ceilings.items():
            if rounds:
                _print_ceilings(name, rounds)
    _print_speed_table(args, settings, results)
    splits = [
        (setting, found[0][0]["split"])
        for setting, found in zip(settings, results.values(), strict=True)
        if found and found[0][0].get("split")
    ]
    if splits:
        _print_split(splits)
    if accuracies and methods:
        _print_accuracy(accuracies)
    if args.ner_tagger is not None:
        _run_ner(args, methods)


if __name__ == "__main__":
    main()
