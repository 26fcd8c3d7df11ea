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

The jobs live in `inference_bench/`, one module each, this script being the command line and the rounds that run
them: `common.py` (the corpus, the models, loading, a worker process), `speed.py` (the speed worker, the comparison
in one process, the settings and their tables), `accuracy.py`, `peers.py` (AllenNLP), `ceilings.py`, `split.py`,
`ner.py` and `choice.py` (`--choice`). Every worker is this script run with `--worker MODE`.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from inference_bench.accuracy import print_accuracy, worker_accuracy
from inference_bench.ceilings import cpu_description, print_ceilings, worker_ceilings
from inference_bench.choice import run_choice, worker_choice
from inference_bench.common import (
    DEFAULT_CONLL,
    DEFAULT_PEER_PYTHON,
    HAS_ONNXRUNTIME,
    QUANTIZED_PATHS,
    REPO,
    busy_process,
    ensure_model,
    load_corpus,
    original_folder,
    spawn,
)
from inference_bench.common import peak_rss_mib as _peak_rss_mib
from inference_bench.ner import run_ner
from inference_bench.peers import spawn_allennlp
from inference_bench.speed import (
    QUICK_SENTENCES,
    SENTENCES,
    build_settings,
    print_compare_table,
    print_speed_table,
    worker_compare,
    worker_speed,
)
from inference_bench.split import print_split

# what bench_engine.py, bench_scale_out.py and bench_serve.py import from here
__all__ = ["DEFAULT_CONLL", "_peak_rss_mib", "busy_process", "cpu_description", "ensure_model", "load_corpus"]

QUICK = {"models": "small", "batch_sizes": "1,64", "paths": "fast,int8"}
QUICK |= {"busy_paths": "fast,int8", "repeats": 1, "long_sentence_words": 0, "accuracy_sentences": 8}


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
                found = spawn(args, "ceilings", setting.model_dir, max_rows=max(batch_sizes), **quantized)
                round_ceilings[name] = found
                if found:
                    for key in ("step_ms", "step_gflops"):  # JSON keys are strings
                        found[key] = {kind: {int(k): v for k, v in rows.items()} for kind, rows in found[key].items()}
                    ceilings[name].append(found)
                    print(f"{name:>8} round {round_index + 1} ceilings {json.dumps(found)}", flush=True)
            if setting.path == "allennlp":
                folder = original_folder(args.work_dir, name)
                result = spawn_allennlp(args, folder, setting.batch_size, setting.options["sentences"])
            else:
                result = spawn(args, "speed", setting.model_dir, **setting.options)
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
            result = spawn(args, "compare", model_dir, batch_size=batch_size, sentences=count, **quantized)
            if result:
                found.append(result)
                print(f"{name:>8} round {round_index + 1} quantized vs float32 bs={batch_size}: {result}", flush=True)
        loads.append(os.getloadavg()[0])
        print(f"load average after round {round_index + 1}: {loads[-1]:.2f}", flush=True)
    accuracies = {}
    for name in models + ["fixture"] * ("fixture" not in models):
        found = spawn(
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
        print_compare_table(comparisons, methods)
    if any(ceilings.values()):
        print(f"\nCeilings on {cpu['model']}, L3 {cpu['l3']}, {args.threads} threads (median of the rounds, range):")
        for name, rounds in ceilings.items():
            if rounds:
                print_ceilings(name, rounds)
    print_speed_table(args, settings, results)
    splits = [
        (setting, found[0][0]["split"])
        for setting, found in zip(settings, results.values(), strict=True)
        if found and found[0][0].get("split")
    ]
    if splits:
        print_split(splits)
    if accuracies and methods:
        print_accuracy(accuracies)
    if args.ner_tagger is not None:
        run_ner(args, methods)


if __name__ == "__main__":
    main()
