"""Quality study of `elmo-pretrain` (issue 9, "Speed and quality", Quality): pretrain a small biLM on the tokens of
CoNLL-2003's train file only, then train the same NER head on it and on the same architecture at random init, frozen
and fine-tuned end to end.

    python benchmarks/pretrain_quality.py --work_dir work/quality --data_dir ../shared/data/conll2003

Steps (all by default, in this order; `--steps` runs a subset, e.g. `--steps report`):
  prepare   the tokens of train.txt, one whitespace-joined sentence per line -> WORK/corpus/train.txt; dev.txt's
            tokens -> WORK/dev.txt, used only to measure the LM's perplexity (the LM never trains on dev or test)
  vocab     elmo-pretrain build-vocab --min_count 2 -> WORK/vocab.txt
  options   bilm-tf training options -> WORK/options.json (n_tokens_vocab = the vocabulary's size; the sampled
            softmax with 1,024 negatives, or the full softmax for vocabularies under 10,000 words: see `softmax_mode`)
  probe     20 training steps, to measure the speed and estimate an epoch's time (not in the default list)
  lr_probe  short runs at several learning rates, perplexity on 500 dev sentences (not in the default list)
  pretrain  elmo-pretrain with dev perplexity every --eval_steps -> WORK/pretrained (ElmoForPreTraining folder)
  random    the same architecture at random init (fixed seed) -> WORK/random (ElmoModel folder + tokenizer)
  ner       elmo-train-ner, four runs with the same head, epochs, learning rate, batch and seed:
            (a) frozen pretrained, (b) frozen random, (c) fine-tuned from pretrained, (d) fine-tuned from random
  report    a Markdown table: the perplexity curve, the four NER runs (dev and test F1), wall times, the CPU

The defaults are the settings of the reported run: vocabulary min_count 2 (11,985 tokens, so the sampled softmax),
4 pretraining epochs (1,361 steps of 32 x 20) at AdamW 3e-3 (best of 1e-3, 2e-3, 3e-3, 5e-3 in `lr_probe`), dev
perplexity every 200 steps; NER: BiLSTM-CRF head, 3 epochs for all four runs at 3e-3, batch 32, seed 13.

Every command runs in its own process with --threads threads (OMP_WAIT_POLICY=PASSIVE, for a shared machine); its
output goes to WORK/logs/STEP.log, its exact command line to WORK/commands.txt, its wall time to WORK/timings.json.
"""

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "conll2003"
STEPS = ("prepare", "vocab", "options", "probe", "lr_probe", "pretrain", "random", "ner", "report")
DEFAULT_STEPS = ("prepare", "vocab", "options", "pretrain", "random", "ner", "report")
FULL_SOFTMAX_BELOW = 10_000  # words; see softmax_mode

# the small biLM of the study (bilm-tf's training layout); n_tokens_vocab, n_epochs and the softmax are filled in
ARCHITECTURE = {
    "bidirectional": True,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 16},
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]],
        "max_characters_per_token": 50,
        "n_characters": 261,
        "n_highway": 1,
    },
    "lstm": {
        "cell_clip": 3,
        "dim": 512,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 128,
        "use_skip_connections": True,
    },
    "dropout": 0.1,
    "all_clip_norm_val": 10.0,
    "batch_size": 32,
    "unroll_steps": 20,
}

# The four NER runs: name -> (start model, frozen biLM)
NER_RUNS = {
    "a": ("pretrained", True),
    "b": ("random", True),
    "c": ("pretrained", False),
    "d": ("random", False),
}
NER_LABELS = {
    "a": "(a) frozen, pretrained biLM",
    "b": "(b) frozen, random biLM",
    "c": "(c) fine-tuned, from pretrained",
    "d": "(d) fine-tuned, from random",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--work_dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-pretrain-quality", help="all outputs"
    )
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA, help="CoNLL-2003 train.txt, dev.txt, test.txt")
    parser.add_argument("--steps", default=",".join(DEFAULT_STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--threads", type=int, default=2, help="threads of every process (OMP_NUM_THREADS)")
    parser.add_argument("--seed", type=int, default=13, help="seed of the pretraining, the random twin and NER")
    # vocabulary and LM
    parser.add_argument("--min_count", type=int, default=2, help="build-vocab --min_count")
    parser.add_argument(
        "--softmax",
        choices=("auto", "sampled", "full"),
        default="auto",
        help=f"training softmax: auto = full below {FULL_SOFTMAX_BELOW:,} words, else sampled",
    )
    parser.add_argument("--n_negative_samples_batch", type=int, default=1024)
    parser.add_argument("--pretrain_epochs", type=int, default=4, help="options.json n_epochs")
    parser.add_argument("--pretrain_max_steps", type=int, default=None, help="overrides the epochs")
    parser.add_argument("--pretrain_learning_rate", type=float, default=3e-3, help="AdamW (elmo-pretrain: 1e-3)")
    parser.add_argument("--eval_steps", type=int, default=200, help="dev perplexity every this many steps")
    parser.add_argument("--lr_probe", default="1e-3,2e-3,3e-3", help="learning rates of the lr_probe step")
    parser.add_argument("--lr_probe_steps", type=int, default=300, help="steps of each lr_probe run")
    # NER
    parser.add_argument("--ner_runs", default="a,b,c,d", help="which of the four NER runs (a,b,c,d)")
    parser.add_argument("--ner_epochs", type=float, default=3, help="the same for all four runs")
    parser.add_argument("--ner_learning_rate", type=float, default=3e-3, help="the same for all four runs")
    parser.add_argument("--ner_batch_size", type=int, default=32)
    parser.add_argument(
        "--ner_time_budget_minutes", type=float, default=None, help="optional cap on each run's training time"
    )
    args = parser.parse_args(argv)
    args.work_dir = args.work_dir.resolve()
    args.data_dir = args.data_dir.resolve()
    steps = [step.strip() for step in args.steps.split(",") if step.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    args.steps = [step for step in STEPS if step in steps]
    runs = [run.strip() for run in args.ner_runs.split(",") if run.strip()]
    if not runs or set(runs) - set(NER_RUNS):
        parser.error(f"--ner_runs: a comma-separated subset of {','.join(NER_RUNS)}, got {args.ner_runs!r}")
    args.ner_runs = [run for run in NER_RUNS if run in runs]
    return args


class Study:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = args.work_dir
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.timings_file = self.work / "timings.json"
        self.timings = json.loads(self.timings_file.read_text()) if self.timings_file.is_file() else {}

    # paths
    @property
    def corpus(self) -> Path:
        return self.work / "corpus" / "train.txt"

    @property
    def dev_text(self) -> Path:
        return self.work / "dev.txt"

    @property
    def vocab(self) -> Path:
        return self.work / "vocab.txt"

    @property
    def options(self) -> Path:
        return self.work / "options.json"

    @property
    def pretrained(self) -> Path:
        return self.work / "pretrained"

    @property
    def random(self) -> Path:
        return self.work / "random"

    def ner_dir(self, run: str) -> Path:
        start, frozen = NER_RUNS[run]
        return self.work / "ner" / f"{run}-{'frozen' if frozen else 'finetuned'}-{start}"

    # running
    def environment(self) -> dict[str, str]:
        threads = str(self.args.threads)
        return {
            **os.environ,
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "OMP_WAIT_POLICY": "PASSIVE",  # see README, Speed: spinning threads slow a shared CPU down
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
        }

    def record(self, name: str, seconds: float) -> None:
        self.timings[name] = round(seconds, 1)
        self.timings_file.write_text(json.dumps(self.timings, indent=2) + "\n")

    def execute(self, name: str, command: list[str], shown: list[str] | None = None) -> float:
        """Run `command`, output to logs/NAME.log; `shown` is the equivalent command line printed and recorded."""
        line = shlex.join(shown or command)
        print(f"\n[{name}] $ {line}", flush=True)
        with open(self.work / "commands.txt", "a", encoding="utf-8") as handle:
            handle.write(f"# {name}\n{line}\n")
            if shown:
                handle.write(f"# (run as: {shlex.join(command)})\n")
        log = self.logs / f"{name}.log"
        start = time.monotonic()
        with open(log, "w", encoding="utf-8") as output:
            result = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=self.environment())
        seconds = time.monotonic() - start
        if result.returncode != 0:
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            sys.exit(f"[{name}] failed (exit {result.returncode}); last lines of {log}:\n" + "\n".join(tail))
        print(f"[{name}] done in {seconds:.1f} s (log: {log})", flush=True)
        self.record(name, seconds)
        return seconds

    @staticmethod
    def tool(name: str) -> str:
        """A console script of this environment (beside the running Python), else the one on PATH."""
        beside = Path(sys.executable).parent / name
        return str(beside) if beside.exists() else (shutil.which(name) or name)

    # steps
    def prepare(self) -> None:
        from modeling_elmo.ner.conll import read_conll

        self.corpus.parent.mkdir(parents=True, exist_ok=True)
        for split, target in (("train", self.corpus), ("dev", self.dev_text)):
            sentences = read_conll(self.args.data_dir / f"{split}.txt")  # -DOCSTART- and blank lines dropped
            with open(target, "w", encoding="utf-8") as handle:
                for sentence in sentences:
                    handle.write(" ".join(sentence["tokens"]) + "\n")
            words = sum(len(sentence["tokens"]) for sentence in sentences)
            print(f"[prepare] {target}: {len(sentences):,} sentences, {words:,} words", flush=True)

    def build_vocab(self) -> None:
        self.execute(
            "vocab",
            [
                self.tool("elmo-pretrain"), "build-vocab",
                "--train_files", str(self.corpus),
                "--output", str(self.vocab),
                "--min_count", str(self.args.min_count),
                "--overwrite", "--no_progress",
            ],
        )  # fmt: skip
        print((self.logs / "vocab.log").read_text(encoding="utf-8").strip().splitlines()[-1], flush=True)

    def vocab_size(self) -> int:
        with open(self.vocab, encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())

    def softmax_mode(self, n_tokens_vocab: int) -> str:
        """The full softmax costs a (positions x projection_dim x vocabulary) product each way per step: under 10,000
        words it is affordable and exact; above, the sampled softmax (bilm-tf's default) is much cheaper."""
        if self.args.softmax != "auto":
            return self.args.softmax
        return "full" if n_tokens_vocab < FULL_SOFTMAX_BELOW else "sampled"

    def write_options(self) -> None:
        n_tokens_vocab = self.vocab_size()
        options = {**json.loads(json.dumps(ARCHITECTURE)), "n_epochs": self.args.pretrain_epochs}
        options["n_tokens_vocab"] = n_tokens_vocab
        if self.softmax_mode(n_tokens_vocab) == "full":
            options["sample_softmax"] = False
        else:
            options["n_negative_samples_batch"] = min(self.args.n_negative_samples_batch, n_tokens_vocab)
        self.options.write_text(json.dumps(options, indent=2) + "\n", encoding="utf-8")
        print(
            f"[options] {self.options}: n_tokens_vocab {n_tokens_vocab:,}, {self.softmax_mode(n_tokens_vocab)} "
            f"softmax, {self.args.pretrain_epochs} epochs",
            flush=True,
        )

    def pretrain_command(self, output_dir: Path, extra: list[str]) -> tuple[list[str], list[str]]:
        """(the command run, the equivalent elmo-pretrain command line)"""
        arguments = [
            "--options", str(self.options),
            "--vocab_file", str(self.vocab),
            "--train_files", str(self.corpus),
            "--output_dir", str(output_dir),
            "--report_to", "none",
            "--save_strategy", "no",
            "--seed", str(self.args.seed),
            "--disable_tqdm", "true",  # no progress bars in the logs
            *extra,
        ]  # fmt: skip
        command = [self.tool("elmo-pretrain"), *arguments]
        return command, command

    def probe(self) -> None:
        output = self.work / "probe"
        command, shown = self.pretrain_command(output, ["--do_train", "--max_steps", "20", "--logging_steps", "5"])
        self.execute("probe", command, shown)
        metrics = json.loads((output / "train_results.json").read_text())
        positions = self.corpus_positions()
        options = json.loads(self.options.read_text())
        per_step = options["batch_size"] * options["unroll_steps"]
        steps_per_epoch = -(-positions // per_step)
        rate = metrics["train_steps_per_second"]
        print(
            f"[probe] {rate:.2f} steps/s ({rate * per_step:,.0f} positions/s); an epoch is {steps_per_epoch} steps, "
            f"about {steps_per_epoch / rate / 60:.1f} min",
            flush=True,
        )

    def corpus_positions(self) -> int:
        from modeling_elmo.formats.corpus import count_positions

        return count_positions([self.corpus])

    def lr_probe(self) -> None:
        dev_sample = self.work / "lr_probe" / "dev500.txt"
        dev_sample.parent.mkdir(parents=True, exist_ok=True)
        with open(self.dev_text, encoding="utf-8") as handle:
            dev_sample.write_text("".join(handle.readlines()[:500]), encoding="utf-8")
        results = []
        for learning_rate in self.args.lr_probe.split(","):
            output = self.work / "lr_probe" / f"lr{learning_rate}"
            extra = [
                "--eval_files", str(dev_sample),
                "--do_train", "--do_eval",
                "--max_steps", str(self.args.lr_probe_steps),
                "--learning_rate", learning_rate,
                "--logging_steps", "50",
            ]  # fmt: skip
            command, shown = self.pretrain_command(output, extra)
            self.execute(f"lr_probe-{learning_rate}", command, shown)
            perplexity = json.loads((output / "eval_results.json").read_text())["eval_perplexity"]
            results.append((learning_rate, perplexity))
        print(f"\nlearning rate probe: {self.args.lr_probe_steps} steps, perplexity on 500 dev sentences")
        for learning_rate, perplexity in results:
            print(f"  lr {learning_rate}: {perplexity:.1f}")

    def pretrain(self) -> None:
        extra = [
            "--eval_files", str(self.dev_text),
            "--do_train", "--do_eval",
            "--eval_strategy", "steps",
            "--eval_steps", str(self.args.eval_steps),
            "--learning_rate", repr(self.args.pretrain_learning_rate),
            "--logging_steps", "50",
        ]  # fmt: skip
        if self.args.pretrain_max_steps:
            extra += ["--max_steps", str(self.args.pretrain_max_steps)]
        command, shown = self.pretrain_command(self.pretrained, extra)
        self.execute("pretrain", command, shown)

    def make_random(self) -> None:
        import torch
        from transformers import AutoConfig

        from modeling_elmo import ElmoModel, ElmoTokenizer

        config = AutoConfig.from_pretrained(self.pretrained)
        torch.manual_seed(self.args.seed)
        model = ElmoModel(config)  # freshly initialised (ElmoPreTrainedModel._init_weights), same architecture
        if self.random.exists():
            shutil.rmtree(self.random)
        model.save_pretrained(self.random)
        ElmoTokenizer(max_characters_per_token=config.max_characters_per_token).save_pretrained(self.random)
        print(f"[random] {self.random}: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)

    def ner(self) -> None:
        for run in self.args.ner_runs:
            start, frozen = NER_RUNS[run]
            output = self.ner_dir(run)
            if output.exists():
                shutil.rmtree(output)
            command = [
                self.tool("elmo-train-ner"),
                "--model_name_or_path", str(self.pretrained if start == "pretrained" else self.random),
                "--data_dir", str(self.args.data_dir),
                "--output_dir", str(output),
                "--classifier_head", "bilstm",
                "--use_crf", "True",
                "--tagger_hidden_size", "128",
                "--scalar_mix_layer_norm", "True",
                "--classifier_dropout", "0.3",
                "--freeze_elmo", str(frozen),
                "--num_train_epochs", f"{self.args.ner_epochs:g}",
                "--learning_rate", repr(self.args.ner_learning_rate),
                "--warmup_steps", "100",
                "--per_device_train_batch_size", str(self.args.ner_batch_size),
                "--per_device_eval_batch_size", "64",
                "--train_sampling_strategy", "group_by_length",
                "--eval_strategy", "epoch",
                "--save_strategy", "epoch",
                "--save_total_limit", "1",
                "--load_best_model_at_end", "True",
                "--metric_for_best_model", "f1",
                "--logging_steps", "50",
                "--report_to", "none",
                "--use_cpu", "True",
                "--seed", str(self.args.seed),
                "--disable_tqdm", "True",
            ]  # fmt: skip
            if frozen:
                command += ["--elmo_cache", "True"]
            if self.args.ner_time_budget_minutes:
                command += ["--time_budget_minutes", f"{self.args.ner_time_budget_minutes:g}"]
            self.execute(f"ner-{run}", command)
            for checkpoint in output.glob("checkpoint-*"):  # the best model is in the folder itself
                shutil.rmtree(checkpoint)

    # report
    def perplexity_curve(self, max_steps: int | None) -> list[tuple[int | None, dict, bool]]:
        """(step, metrics, final) of the dev evaluations: those the Trainer logged during pretraining, one per step
        (the Trainer evaluates at the last step too, and --do_eval once more: the same numbers), the last one
        replaced by eval_results.json's unrounded values."""
        by_step: dict[int | None, dict] = {}
        for line in self.pretrain_log():
            if line.startswith("{") and "eval_perplexity" in line:
                try:
                    logged = ast.literal_eval(line)
                except (ValueError, SyntaxError):
                    continue
                step = round(float(logged["epoch"]) * max_steps) if max_steps and "epoch" in logged else None
                by_step[step] = logged
        rows = [(step, metrics, False) for step, metrics in by_step.items()]
        final = self.pretrained / "eval_results.json"
        if final.is_file():
            metrics = json.loads(final.read_text())
            step = round(float(metrics["epoch"]) * max_steps) if max_steps and "epoch" in metrics else None
            rows = [row for row in rows if row[0] != step] + [(step, metrics, True)]
        return rows

    def pretrain_log(self) -> list[str]:
        log = self.logs / "pretrain.log"
        return log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []

    def pretrain_steps(self) -> int | None:
        """The run's max_steps, from elmo-pretrain's log line 'N positions x E epochs: S steps' or --max_steps."""
        for line in self.pretrain_log():
            match = re.search(r"positions x \S+ epochs: ([\d,]+) steps", line)
            if match:
                return int(match.group(1).replace(",", ""))
        return self.args.pretrain_max_steps

    def train_losses(self, max_steps: int | None) -> dict[int, float]:
        """step -> training loss logged at that step. The Trainer's `epoch` of a stream without a length is the
        fraction of max_steps done, so step = epoch * max_steps."""
        losses = {}
        for line in self.pretrain_log():
            if line.startswith("{'loss'") and max_steps:
                try:
                    logged = ast.literal_eval(line)
                except (ValueError, SyntaxError):
                    continue
                losses[round(float(logged["epoch"]) * max_steps)] = float(logged["loss"])
        return losses

    def report(self) -> str:
        lines = []
        options = json.loads(self.options.read_text()) if self.options.is_file() else {}
        positions_per_step = options["batch_size"] * options["unroll_steps"] if options else None
        positions = self.corpus_positions() if self.corpus.is_file() else None
        max_steps = self.pretrain_steps()
        curve = self.perplexity_curve(max_steps)
        losses = self.train_losses(max_steps)
        lines += [
            "### Dev perplexity during pretraining",
            "",
            "Sentence-level protocol, full softmax, CoNLL-2003 dev (never trained on). Train loss: the sampled-softmax"
            " loss logged over the 50 steps before (not comparable with the dev perplexity).",
            "",
            "| step | epoch | dev perplexity | forward | backward | train loss |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for step, row, final in curve:
            label = f"{step} (end)" if final else str(step)
            epoch = f"{step * positions_per_step / positions:.2f}" if positions and positions_per_step and step else ""
            loss = losses.get(step) if step else None
            perplexities = " | ".join(
                f"{float(row[f'eval_perplexity{suffix}']):.1f}" for suffix in ("", "_forward", "_backward")
            )
            lines.append(f"| {label} | {epoch} | {perplexities} | {'' if loss is None else f'{loss:.3f}'} |")
        lines += [
            "",
            "### CoNLL-2003 NER, same head and budget",
            "",
            "| run | dev F1 | test F1 | epochs trained | training time | run wall time |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for run in NER_RUNS:
            folder = self.ner_dir(run)
            results = {}
            for split in ("train", "dev", "test"):
                path = folder / f"{split}_results.json"
                results[split] = json.loads(path.read_text()) if path.is_file() else {}
            if not results["dev"]:
                lines.append(f"| {NER_LABELS[run]} | not run | | | | |")
                continue
            train, test_f1 = results["train"], results["test"].get("test_f1", float("nan"))
            lines.append(
                f"| {NER_LABELS[run]} | {results['dev']['dev_f1']:.4f} | {test_f1:.4f}"
                f" | {train.get('epoch', float('nan')):.2f} | {train.get('train_runtime', float('nan')) / 60:.1f} min"
                f" | {self.timings.get(f'ner-{run}', float('nan')) / 60:.1f} min |"
            )
        lines += ["", "### Wall times", "", "| step | wall time |", "|---|---:|"]
        for name, seconds in self.timings.items():
            lines.append(f"| {name} | {seconds / 60:.1f} min |")
        lines += ["", f"CPU: {cpu_model()}; {self.args.threads} threads per process."]
        text = "\n".join(lines)
        (self.work / "report.md").write_text(text + "\n", encoding="utf-8")
        return text


def cpu_model() -> str:
    try:
        output = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (lscpu failed)"
    fields = dict(line.split(":", 1) for line in output.splitlines() if ":" in line)
    model = fields.get("Model name", "unknown").strip()
    return f"{model}, {fields.get('CPU(s)', '?').strip()} CPUs (lscpu)"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    study = Study(args)
    actions = {
        "prepare": study.prepare,
        "vocab": study.build_vocab,
        "options": study.write_options,
        "probe": study.probe,
        "lr_probe": study.lr_probe,
        "pretrain": study.pretrain,
        "random": study.make_random,
        "ner": study.ner,
    }
    for step in args.steps:
        if step == "report":
            continue
        start = time.monotonic()
        actions[step]()
        if step in ("prepare", "options", "random"):
            study.record(step, time.monotonic() - start)
    if "report" in args.steps:
        print("\n" + study.report())


if __name__ == "__main__":
    main()
