"""SST-5 / SST-2 with `elmo-train-classifier` (issue 19, "Quality and speed"): the same head and budget on four biLMs,
(a) the small biLM pretrained on CoNLL-2003's text by `benchmarks/pretrain_quality.py`, frozen; (b) the same
architecture at random init, frozen; (c) (a) fine-tuned end to end; (d) (b) fine-tuned end to end. Then the training
throughput with a frozen biLM (first epoch, which runs the biLM, against cached epochs) and the inference throughput
of `pipeline("text-classification")`.

    python benchmarks/pretrain_quality.py --work_dir work/quality --steps prepare,vocab,options,pretrain,random
    python benchmarks/train_classifier_sst.py --bilm_dir work/quality --work_dir work/sst-bench

Steps (`--steps`, all by default): `prepare` (prepare-sst for SST-2 and SST-5 -> WORK/data/TASK), `train` (the four
runs per task, each `elmo-train-classifier` in its own process; wall time and that process's peak RSS recorded),
`throughput`, `report` (a Markdown table on stdout and in WORK/report.md, with the CPU model).
Results accumulate in WORK/results/*.json, so steps and tasks can be run separately (or in parallel processes).
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = {  # name -> (start biLM in --bilm_dir, frozen)
    "a": ("pretrained", True),
    "b": ("random", True),
    "c": ("pretrained", False),
    "d": ("random", False),
}
LABELS = {
    "a": "(a) pretrained, frozen",
    "b": "(b) random init, frozen",
    "c": "(c) pretrained, fine-tuned",
    "d": "(d) random init, fine-tuned",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bilm_dir", type=Path, required=True, help="pretrain_quality.py's work dir")
    parser.add_argument("--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-sst-bench")
    parser.add_argument("--sst_dir", type=Path, default=REPO.parent / "shared" / "data" / "sst")
    parser.add_argument("--steps", default="prepare,train,throughput,report")
    parser.add_argument("--tasks", default="sst2,sst5")
    parser.add_argument("--runs", default="a,b,c,d")
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_train_samples", type=int, default=None, help="a reduced budget: the first N")
    parser.add_argument("--max_eval_samples", type=int, default=None, help="dev sentences scored per epoch")
    parser.add_argument("--time_budget_minutes", type=float, default=None, help="stop a run's training after this")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--throughput_sentences", type=int, default=1000)
    return parser.parse_args(argv)


def _update_results(args: argparse.Namespace, key: str, value: object) -> None:
    """Write one entry to WORK/results/KEY.json (one file each: several processes may run steps in parallel)."""
    folder = args.work_dir / "results"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{key}.partial"
    partial.write_text(json.dumps(value, indent=2, sort_keys=True))
    os.replace(partial, folder / f"{key}.json")


def _read_results(args: argparse.Namespace) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in (args.work_dir / "results").glob("*.json")}


def _environment(args: argparse.Namespace) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
        "OMP_WAIT_POLICY": "PASSIVE",
        "HF_HUB_OFFLINE": "1",
    }


def prepare(args: argparse.Namespace) -> None:
    for task in args.tasks.split(","):
        folder = args.work_dir / "data" / task
        if not (folder / "test.jsonl").exists():
            command = [sys.executable, "-m", "modeling_elmo.classification.sst", "--data_dir", str(args.sst_dir)]
            subprocess.run(
                [*command, "--output_dir", str(folder), *(["--binary"] if task == "sst2" else [])], check=True
            )


def _run_measured(command: list[str], log: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run `command`, output to `log`; (wall seconds, peak RSS of that process in MiB)."""
    start = time.monotonic()
    with log.open("w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed; see {log}")
    return time.monotonic() - start, usage.ru_maxrss / 1024


def train(args: argparse.Namespace) -> None:
    for task in args.tasks.split(","):
        data = args.work_dir / "data" / task
        for run in args.runs.split(","):
            start, frozen = RUNS[run]
            output = args.work_dir / "runs" / f"{task}-{run}"
            command = [
                sys.executable, "-m", "modeling_elmo.classification.train",
                "--model_name_or_path", str(args.bilm_dir / start),
                "--train_file", str(data / "train.jsonl"),
                "--validation_file", str(data / "validation.jsonl"),
                "--test_file", str(data / "test.jsonl"),
                "--output_dir", str(output),
                "--do_train", "--do_eval", "--do_predict",
                "--classifier_head", "linear",
                "--classifier_pooling", "mean_max",
                "--scalar_mix_layer_norm", "True",
                "--classifier_dropout", "0.3",
                "--freeze_elmo", str(frozen),
                "--num_train_epochs", f"{args.epochs:g}",
                "--learning_rate", repr(args.learning_rate),
                "--per_device_train_batch_size", str(args.batch_size),
                "--per_device_eval_batch_size", "64",
                "--eval_strategy", "epoch",
                "--save_strategy", "epoch",
                "--save_total_limit", "1",
                "--load_best_model_at_end", "True",
                "--metric_for_best_model", "accuracy",
                "--logging_steps", "50",
                "--report_to", "none",
                "--use_cpu", "True",
                "--seed", str(args.seed),
                "--disable_tqdm", "True",
                "--shuffle_train_dataset", "True",  # the SST files are ordered by label
            ]  # fmt: skip
            if frozen:
                command += ["--elmo_cache", "True"]
            for flag in ("max_train_samples", "max_eval_samples", "time_budget_minutes"):
                if getattr(args, flag):
                    command += [f"--{flag}", f"{getattr(args, flag):g}"]
            output.parent.mkdir(parents=True, exist_ok=True)
            seconds, rss = _run_measured(command, args.work_dir / "runs" / f"{task}-{run}.log", _environment(args))
            _update_results(
                args,
                f"{task}-{run}",
                {
                    "eval": json.loads((output / "eval_results.json").read_text()),
                    "test": json.loads((output / "test_results.json").read_text()),
                    "train": json.loads((output / "train_results.json").read_text()),
                    "wall_seconds": seconds,
                    "peak_rss_mib": rss,
                },
            )
            print(f"[{task}-{run}] {seconds / 60:.1f} min, peak RSS {rss:.0f} MiB", flush=True)


def throughput(args: argparse.Namespace) -> None:
    """In this process (threads = --threads): frozen pretrained biLM with the activation cache, three epochs over
    --throughput_sentences SST-2 training sentences (epoch 1 runs the biLM, 2-3 read the cache); then the pipeline
    on as many test sentences (raw strings, batch 32); peak RSS of this process."""
    import torch
    from datasets import Dataset
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        pipeline,
    )

    import modeling_elmo  # noqa: F401
    from modeling_elmo.finetuning.activation_cache import ElmoActivationCache

    torch.set_num_threads(args.threads)
    data = args.work_dir / "data" / "sst2"
    records = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    records = records[:: max(1, len(records) // args.throughput_sentences)][: args.throughput_sentences]
    model_dir = args.bilm_dir / "pretrained"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2, classifier_dropout=0.3)
    cache = ElmoActivationCache(model).attach()
    encoded = Dataset.from_dict(
        {
            **tokenizer([record["sentence"] for record in records], is_split_into_words=True),
            "labels": [record["label"] for record in records],
        }
    )

    class EpochTimer(TrainerCallback):
        def __init__(self):
            self.seconds: list[float] = []

        def on_epoch_begin(self, *unused, **kwargs):
            self.start = time.perf_counter()

        def on_epoch_end(self, *unused, **kwargs):
            self.seconds.append(time.perf_counter() - self.start)

    timer = EpochTimer()
    training = TrainingArguments(
        output_dir=str(args.work_dir / "throughput"),
        num_train_epochs=3,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=args.seed,
    )
    Trainer(
        model=model,
        args=training,
        train_dataset=encoded,
        data_collator=DataCollatorWithPadding(tokenizer),
        callbacks=[timer],
    ).train()
    test = [json.loads(line) for line in (data / "test.jsonl").read_text().splitlines()]
    test = test[:: max(1, len(test) // args.throughput_sentences)][: args.throughput_sentences]
    texts = [" ".join(record["sentence"]) for record in test]
    model.activation_cache = None  # inference runs the biLM on every sentence
    classifier = pipeline("text-classification", model=model, tokenizer=tokenizer, device=-1)
    classifier(texts[:32], batch_size=32)  # warm-up
    start = time.perf_counter()
    classifier(texts, batch_size=32)
    inference = time.perf_counter() - start
    _update_results(
        args,
        "throughput",
        {
            "sentences": len(records),
            "epoch_seconds": timer.seconds,
            "train_sentences_per_second": [len(records) / seconds for seconds in timer.seconds],
            "cache": {"hits": cache.hits, "misses": cache.misses},
            "pipeline_sentences": len(texts),
            "pipeline_sentences_per_second": len(texts) / inference,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "threads": args.threads,
        },
    )


def cpu_model() -> str:
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def report(args: argparse.Namespace) -> str:
    results = _read_results(args)
    lines = [f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs visible; shared machine)", ""]
    for task, name in (("sst2", "SST-2"), ("sst5", "SST-5")):
        lines += [
            f"### {name}",
            "",
            "| biLM | dev accuracy | test accuracy | test " + ("F1" if task == "sst2" else "macro-F1") + " | "
            "epochs | wall time | peak RSS |",
            "|---|---|---|---|---|---|---|",
        ]
        f1 = "f1" if task == "sst2" else "macro_f1"
        for run in RUNS:
            entry = results.get(f"{task}-{run}")
            if entry is None:
                lines.append(f"| {LABELS[run]} | not run | | | | | |")
                continue
            lines.append(
                f"| {LABELS[run]} | {entry['eval']['eval_accuracy']:.3f} | {entry['test']['test_accuracy']:.3f} | "
                f"{entry['test'][f'test_{f1}']:.3f} | {entry['train'].get('epoch', float('nan')):.2f} | "
                f"{entry['wall_seconds'] / 60:.1f} min | {entry['peak_rss_mib']:.0f} MiB |"
            )
        lines.append("")
    if "throughput" in results:
        entry = results["throughput"]
        speeds = ", ".join(f"{speed:.1f}" for speed in entry["train_sentences_per_second"])
        lines += [
            f"Throughput ({entry['threads']} threads, {entry['sentences']} SST-2 training sentences, (a) frozen with "
            f"the activation cache): training sentences/s per epoch {speeds} (epoch 1 runs the biLM; cache "
            f"{entry['cache']['misses']} misses, {entry['cache']['hits']} hits); pipeline('text-classification') "
            f"{entry['pipeline_sentences_per_second']:.1f} sentences/s on {entry['pipeline_sentences']} test "
            f"sentences (batch 32); peak RSS {entry['peak_rss_mib']:.0f} MiB.",
        ]
    text = "\n".join(lines) + "\n"
    (args.work_dir / "report.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    steps = args.steps.split(",")
    if "prepare" in steps:
        prepare(args)
    if "train" in steps:
        train(args)
    if "throughput" in steps:
        throughput(args)
    if "report" in steps:
        print(report(args))


if __name__ == "__main__":
    main()
