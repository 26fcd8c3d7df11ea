"""Training throughput and memory of ElmoForPreTraining (CPU, float32) beside a `torch.nn.LSTM(proj_size=...)` biLM.

Shapes of issue 9 (AllenNLP's 'small' ELMo): character filters as 'original', char embedding 16, 1 highway, LSTM cell
1024 projected to 128, 2 layers, skip connections, cell and projection clip 3, 50 characters a word, a softmax of
100,000 words, batch 128 x unroll 20, 8,192 negatives, dropout 0.1. One timed training step = forward + backward +
gradient clipping (global norm 10, bilm-tf's `all_clip_norm_val`) + AdamW step; words/s = batch x unroll positions
per second (each position is a forward and a backward LM prediction), as bilm-tf counts them.

The two implementations (each in its own process, so that peak RSS is per implementation):
- `ours`: `ElmoForPreTraining` in training mode, as the Trainer runs it.
- `nn.LSTM`: the same character CNN (`ElmoCharacterEncoder.embed_words`, the same words deduplicated), the same
  sampled softmax (`LogUniformSampler` + `sampled_softmax_loss`, one draw of negatives per direction) and the same
  optimizer, with the biLM made of one `torch.nn.LSTM(128, 1024, proj_size=128)` per layer and direction, LSTM states
  carried (detached) between steps as ours does, dropout on every layer's input and on the top output, skip
  connection on the second layer. `nn.LSTM` cannot clip its cell, nor its projected state inside the recurrence:
  it runs without the cell clip, and its layer outputs are clamped to the projection clip after the recurrence
  (the same cost, not the same function).
Parts: `step` is the whole training step; `bilm` isolates the biLM stack: forward + backward of the two layers on
fixed random inputs (a fixed random projection of the top layer as the loss) + AdamW on the stack's weights.

Inputs: CoNLL-2003 train.txt (tokens only) as bilm-tf streams it, sentences `<S> w1 .. wn` -> `w1 .. wn </S>` (and the
reverse for the backward LM); each batch row reads consecutive windows from its own random start in that stream, so
batches repeat words as real text does (the character CNN runs once per distinct word of a batch). Labels are the
words' frequency ranks in the 100,000-word vocabulary (the corpus' words by frequency, then filler words).

Timing: both implementations are set up, then `--warmup` untimed steps each, then `--passes` passes of `--steps`
steps, alternating the implementations (ABBA order) so that both see the same machine load; the median pass is
reported with the range of the passes, and also words per CPU-second (median over the passes of the process' CPU
time, all threads): on a CPU shared with other busy processes the wall clock mostly measures their load, CPU time less.
Peak RSS is each worker process's maximum resident set size.

`--corpus-files`: peak RSS of `ElmoForPreTraining` training `--stream-steps` steps from real streams
(`modeling_elmo.pretraining.streams.LmStreamDataset`) on a file of the CoNLL train text repeated 1x and 10x, and of
reading the whole stream of each file (every batch, no model), each in a fresh process: RSS must not grow with the
corpus.

    python benchmarks/bench_pretrain.py [--conll ../shared/data/conll2003/train.txt] [--parts step,bilm]
        [--batch-size 128] [--unroll 20] [--warmup 3] [--steps 1] [--passes 10] [--threads 2] [--omp-passive]
        [--corpus-files] [--stream-steps 5] [--work-dir DIR]
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONLL = REPO.parent / "shared" / "data" / "conll2003" / "train.txt"
IMPLEMENTATIONS = ("ours", "nn.LSTM")
VOCAB_SIZE, NUM_NEGATIVES, DROPOUT, CLIP_NORM, LEARNING_RATE = 100_000, 8192, 0.1, 10.0, 1e-3


def read_conll_sentences(path: Path) -> list[list[str]]:
    """The sentences (first column) of a CoNLL-2003 file, without the `-DOCSTART-` lines."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if fields and fields[0] != "-DOCSTART-":
                current.append(fields[0])
            elif current:
                sentences.append(current)
                current = []
    if current:
        sentences.append(current)
    return sentences


def vocabulary_tokens(sentences: list[list[str]], size: int) -> list[str]:
    """`<S>`, `</S>`, `<UNK>`, the corpus' words by decreasing frequency, then filler words up to `size` tokens."""
    from modeling_elmo.character_ids import BOS_TOKEN, EOS_TOKEN

    counts = Counter(word for sentence in sentences for word in sentence)
    tokens = [BOS_TOKEN, EOS_TOKEN, "<UNK>"] + [word for word, _ in counts.most_common(size - 3)]
    taken = set(tokens)
    fillers = (f"filler{index}" for index in range(size))
    tokens += [word for word in fillers if word not in taken][: size - len(tokens)]
    return tokens


def small_config(max_characters_per_token: int = 50):
    """The 'small' ELMo shapes with the issue's softmax."""
    from modeling_elmo import ElmoConfig
    from modeling_elmo.configuration_elmo import ORIGINAL_CHAR_FILTERS

    return ElmoConfig(
        char_embedding_dim=16,
        char_filters=[list(spec) for spec in ORIGINAL_CHAR_FILTERS],
        num_highway_layers=1,
        lstm_cell_size=1024,
        projection_dim=128,
        num_hidden_layers=2,
        use_skip_connections=True,
        cell_clip=3.0,
        proj_clip=3.0,
        max_characters_per_token=max_characters_per_token,
        lm_vocab_size=VOCAB_SIZE,
        lm_num_negative_samples=NUM_NEGATIVES,
        lm_dropout=DROPOUT,
    )


class StreamWindows:
    """
    bilm-tf-like stream windows from real sentences: every row reads consecutive `unroll`-position windows of the
    token stream from its own random start (wrapping around). Batches are dicts as `LmStreamDataset` yields them.
    """

    def __init__(self, sentences: list[list[str]], batch_size: int, unroll: int, seed: int = 0):
        import torch

        from modeling_elmo.character_ids import BOS_TOKEN, EOS_TOKEN, word_to_char_ids

        tokens = vocabulary_tokens(sentences, VOCAB_SIZE)
        ids = {word: index for index, word in enumerate(tokens)}
        forward_inputs, forward_labels, backward_inputs, backward_labels = [], [], [], []
        for words in sentences:
            sentence = [ids[BOS_TOKEN], *(ids[word] for word in words), ids[EOS_TOKEN]]
            forward_inputs += sentence[:-1]
            forward_labels += sentence[1:]
            backward_inputs += sentence[::-1][:-1]
            backward_labels += sentence[::-1][1:]
        used = sorted(set(forward_inputs) | set(backward_inputs))
        char_table = torch.zeros(len(tokens), 50, dtype=torch.long)  # rows of words that occur only
        char_table[used] = torch.tensor([word_to_char_ids(tokens[index]) for index in used])
        self.char_table = char_table
        self.streams = [torch.tensor(values) for values in (forward_inputs, forward_labels)]
        self.streams += [torch.tensor(values) for values in (backward_inputs, backward_labels)]
        self.length = len(forward_inputs)
        self.batch_size, self.unroll = batch_size, unroll
        self.starts = torch.tensor(random.Random(seed).sample(range(self.length), batch_size))
        self.distinct_words = len(used)

    def __iter__(self):
        import torch

        step = torch.arange(self.unroll)
        while True:
            positions = (self.starts.unsqueeze(1) + step) % self.length  # (batch, unroll)
            self.starts = (self.starts + self.unroll) % self.length
            forward_inputs, labels, backward_inputs, backward_labels = (stream[positions] for stream in self.streams)
            yield {
                "input_ids": self.char_table[forward_inputs],
                "labels": labels,
                "backward_input_ids": self.char_table[backward_inputs],
                "backward_labels": backward_labels,
            }


def build_baseline(config):
    """The `nn.LSTM` biLM with our character CNN and softmax (see the module docstring)."""
    import torch
    from torch import nn

    from modeling_elmo import ElmoForPreTraining

    class NnLstmForPreTraining(nn.Module):
        def __init__(self):
            super().__init__()
            reference = ElmoForPreTraining(config)  # for the initialised character CNN and softmax
            self.char_encoder = reference.elmo.char_encoder
            self.softmax = reference.softmax
            self.sampled_loss = reference._loss  # `reference` stays in training mode: the sampled softmax
            dims = dict(input_size=config.projection_dim, hidden_size=config.lstm_cell_size)
            self.lstms = nn.ModuleList(
                nn.ModuleList(nn.LSTM(**dims, proj_size=config.projection_dim) for _ in range(2))
                for _ in range(config.num_hidden_layers)
            )
            self.states = None

        def zero_states(self, batch_size: int) -> list:
            hidden = torch.zeros(1, batch_size, config.projection_dim)
            cell = torch.zeros(1, batch_size, config.lstm_cell_size)
            return [[(hidden, cell)] * 2 for _ in self.lstms]

        def run_stack(self, inputs: torch.Tensor, dropout: float) -> torch.Tensor:
            """`inputs` (2, unroll, batch, dim) time-major, backward direction already reversed -> top layer."""
            if self.states is None or self.states[0][0][0].shape[1] != inputs.shape[2]:
                self.states = self.zero_states(inputs.shape[2])
            new_states = []
            for index, directions in enumerate(self.lstms):
                if dropout:
                    inputs = nn.functional.dropout(inputs, dropout)
                results = [lstm(inputs[d], self.states[index][d]) for d, lstm in enumerate(directions)]
                outputs = torch.stack([output for output, _ in results]).clamp(-config.proj_clip, config.proj_clip)
                new_states.append([(h.detach(), c.detach()) for _, (h, c) in results])
                inputs = outputs + inputs if config.use_skip_connections and index > 0 else outputs
            self.states = new_states
            return inputs

        def loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            """`ElmoForPreTraining._loss` in training mode, on the same softmax parameters."""
            return self.sampled_loss(hidden, labels)

        def forward(self, input_ids, backward_input_ids, labels, backward_labels) -> torch.Tensor:
            batch_size, steps, width = input_ids.shape
            char_ids = torch.stack([input_ids, backward_input_ids]).transpose(1, 2).reshape(-1, width)
            inputs = self.char_encoder.embed_words(char_ids).view(2, steps, batch_size, -1)
            top = self.run_stack(inputs, DROPOUT).transpose(1, 2)  # (2, batch, steps, dim)
            top = nn.functional.dropout(top, DROPOUT)
            forward_loss = self.loss(top[0].flatten(0, 1), labels.flatten())
            backward_loss = self.loss(top[1].flatten(0, 1), backward_labels.flatten())
            return 0.5 * (forward_loss + backward_loss)

    return NnLstmForPreTraining()


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _make_step(args: argparse.Namespace):
    """One training step (a closure) of `args.impl` for `args.part`, and the parameter count."""
    import torch

    from modeling_elmo import ElmoForPreTraining, ElmoLstmStates

    torch.manual_seed(0)
    config = small_config()
    if args.impl == "ours":
        model = ElmoForPreTraining(config).train()
        run_model = lambda batch: model(**batch).loss  # noqa: E731
    else:
        model = build_baseline(config).train()
        run_model = lambda batch: model(**batch)  # noqa: E731
    if args.part == "step":
        parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
        batches = iter(StreamWindows(read_conll_sentences(args.conll), args.batch_size, args.unroll))
        compute_loss = lambda: run_model(next(batches))  # noqa: E731
    else:
        batch_size, steps, dim = args.batch_size, args.unroll, config.projection_dim
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(2, steps, batch_size, dim, generator=generator)
        probe = torch.randn(2, steps, batch_size, dim, generator=generator) / (steps * batch_size) ** 0.5
        if args.impl == "ours":
            bilm, states = model.elmo.bilm, ElmoLstmStates(config)  # its dropout: config.lm_dropout (DROPOUT)
            parameters = list(bilm.parameters())

            def compute_loss() -> torch.Tensor:
                initial = states.initial(batch_size, inputs)
                top, final = bilm(inputs.view(2, steps * batch_size, dim), [batch_size] * steps, initial)
                states.update(final)
                return (top.view_as(probe) * probe).sum()
        else:
            parameters = list(model.lstms.parameters())
            compute_loss = lambda: (model.run_stack(inputs, DROPOUT) * probe).sum()  # noqa: E731
    optimizer = torch.optim.AdamW(parameters, lr=LEARNING_RATE)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        compute_loss().backward()
        torch.nn.utils.clip_grad_norm_(parameters, CLIP_NORM)
        optimizer.step()

    return step, sum(parameter.numel() for parameter in parameters)


def worker_train(args: argparse.Namespace) -> None:
    """Serve `warmup` / `pass` / `finish` commands from stdin for one implementation and part (own process)."""
    import torch

    torch.set_num_threads(args.threads)
    step, num_parameters = _make_step(args)
    rss_after_setup = _peak_rss_mib()
    print("READY", flush=True)
    for command in sys.stdin:
        command = command.strip()
        if command == "warmup":
            for _ in range(args.warmup):
                step()
            print("OK", flush=True)
        elif command == "pass":
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step()
            print(f"PASS {time.perf_counter() - start} {time.process_time() - start_cpu}", flush=True)
        elif command == "finish":
            result = {
                "peak_rss_mib": round(_peak_rss_mib()),
                "rss_after_setup_mib": round(rss_after_setup),
                "parameters": num_parameters,
            }
            print("RESULT " + json.dumps(result), flush=True)
            return


class _Worker:
    """A `worker_train` process driven line by line."""

    def __init__(self, args: argparse.Namespace, impl: str, part: str):
        command = [sys.executable, __file__, "--worker", "train", "--impl", impl, "--part", part]
        command += ["--conll", str(args.conll), "--threads", str(args.threads), "--batch-size", str(args.batch_size)]
        command += ["--unroll", str(args.unroll), "--warmup", str(args.warmup), "--steps", str(args.steps)]
        environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"} if args.omp_passive else None
        self.name = impl
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.process = subprocess.Popen(command, env=environment, **pipes)

    def ask(self, command: str | None, prefix: str) -> str:
        if command is not None:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise RuntimeError(f"{self.name} worker exited (code {self.process.wait()}) before answering {command!r}")


def compare(args: argparse.Namespace, part: str) -> dict:
    """
    Both implementations of `part`, passes interleaved in ABBA order: per implementation the passes' wall-clock and
    CPU seconds (`passes`, `cpu_passes`), peak RSS and parameter count.
    """
    workers = [_Worker(args, impl, part) for impl in IMPLEMENTATIONS]
    try:
        for worker in workers:  # setup runs in parallel; everything timed runs one worker at a time
            worker.ask(None, "READY")
        for worker in workers:
            worker.ask("warmup", "OK")
        passes = {worker.name: [] for worker in workers}
        for index in range(args.passes):
            for worker in workers if index % 4 in (0, 3) else workers[::-1]:
                passes[worker.name].append(tuple(map(float, worker.ask("pass", "PASS ").split())))
        results = {}
        for worker in workers:
            wall, cpu = ([values[i] for values in passes[worker.name]] for i in range(2))
            results[worker.name] = {"passes": wall, "cpu_passes": cpu, **json.loads(worker.ask("finish", "RESULT "))}
            worker.process.wait()
        return results
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.kill()


def worker_stream(args: argparse.Namespace) -> dict:
    """Peak RSS of training `args.stream_steps` steps of ours from `LmStreamDataset` on `args.corpus`, or of reading
    the whole stream without a model (`args.stream_steps == 0`)."""
    import torch

    from modeling_elmo import ElmoForPreTraining
    from modeling_elmo.formats.vocab import LmVocabulary
    from modeling_elmo.pretraining.streams import LmStreamDataset

    torch.set_num_threads(args.threads)
    vocab = LmVocabulary.from_file(args.vocab)
    dataset = LmStreamDataset([args.corpus], vocab, args.batch_size, args.unroll, 50, num_passes=1)
    start = time.perf_counter()
    batches = 0
    if args.stream_steps == 0:
        for _ in dataset:
            batches += 1
    else:
        torch.manual_seed(0)
        model = ElmoForPreTraining(small_config()).train()
        parameters = list(model.parameters())
        optimizer = torch.optim.AdamW(parameters, lr=LEARNING_RATE)
        for batch in dataset:
            optimizer.zero_grad(set_to_none=True)
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, CLIP_NORM)
            optimizer.step()
            batches += 1
            if batches == args.stream_steps:
                break
    seconds = time.perf_counter() - start
    return {"batches": batches, "seconds": round(seconds, 1), "peak_rss_mib": round(_peak_rss_mib())}


def corpus_files(args: argparse.Namespace) -> list[tuple]:
    """Write the 1x and 10x corpus files and the vocabulary, then run the stream workers (fresh process each)."""
    try:
        from modeling_elmo.formats.vocab import LmVocabulary
        from modeling_elmo.pretraining.streams import LmStreamDataset  # noqa: F401
    except ImportError as error:
        print(f"--corpus-files: the streaming dataset is not available ({error})", flush=True)
        return []
    sentences = read_conll_sentences(args.conll)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    vocab = args.work_dir / "vocab.txt"
    LmVocabulary(vocabulary_tokens(sentences, VOCAB_SIZE)).save(vocab)
    text = "".join(" ".join(sentence) + "\n" for sentence in sentences)
    rows = []
    for factor in (1, 10):
        corpus = args.work_dir / f"conll_train_x{factor}.txt"
        corpus.write_text(text * factor, encoding="utf-8")
        words = sum(map(len, sentences)) * factor
        for steps in (args.stream_steps, 0):
            command = [sys.executable, __file__, "--worker", "stream", "--corpus", str(corpus), "--vocab", str(vocab)]
            command += ["--stream-steps", str(steps), "--threads", str(args.threads)]
            command += ["--batch-size", str(args.batch_size), "--unroll", str(args.unroll)]
            result = subprocess.run(command, capture_output=True, text=True)
            lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
            if result.returncode != 0 or not lines:
                print(f"FAILED stream x{factor} steps={steps}:\n{result.stderr[-2000:]}", flush=True)
                continue
            outcome = json.loads(lines[-1][len("RESULT ") :])
            what = f"train {steps} steps" if steps else "read the whole stream (no model)"
            rows.append((f"{factor}x ({words:,} words, {corpus.stat().st_size / 2**20:.1f} MiB)", what, outcome))
            print(f"corpus {factor}x: {what}: {outcome}", flush=True)
    return rows


def _cpu_model() -> str:
    try:
        output = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in output.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL, help="CoNLL-2003 train.txt (tokens are used)")
    parser.add_argument("--parts", default="step,bilm", help="step: whole training step; bilm: the LSTM stack only")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--unroll", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per implementation")
    parser.add_argument("--steps", type=int, default=1, help="timed steps per pass")
    parser.add_argument("--passes", type=int, default=10, help="timed passes per implementation; the median is shown")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--omp-passive",
        action="store_true",
        help="run the workers with OMP_WAIT_POLICY=PASSIVE (on a CPU shared with other busy processes)",
    )
    parser.add_argument("--corpus-files", action="store_true", help="also measure RSS on 1x and 10x stream corpora")
    parser.add_argument("--stream-steps", type=int, default=5, help="training steps per corpus in --corpus-files")
    parser.add_argument(
        "--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "elmo-bench-pretrain", help="corpus files"
    )
    parser.add_argument("--worker", choices=["train", "stream"], help=argparse.SUPPRESS)
    parser.add_argument("--impl", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=["step", "bilm"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--vocab", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("batch_size", "unroll", "steps", "passes", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    sys.path.insert(0, str(REPO))
    if args.worker == "train":
        worker_train(args)
        return
    if args.worker == "stream":
        print("RESULT " + json.dumps(worker_stream(args)), flush=True)
        return

    words_per_step = args.batch_size * args.unroll
    policy = "PASSIVE" if args.omp_passive else os.environ.get("OMP_WAIT_POLICY", "default")
    windows = iter(StreamWindows(read_conll_sentences(args.conll), args.batch_size, args.unroll))
    distinct = [len(next(windows)["input_ids"].flatten(0, 1).unique(dim=0)) for _ in range(5)]
    print(f"CPU: {_cpu_model()}; threads={args.threads}; OMP_WAIT_POLICY={policy}; batch {args.batch_size} x unroll "
          f"{args.unroll}; distinct words per forward window: {distinct}; load average {os.getloadavg()[0]:.2f}",
          flush=True)  # fmt: skip
    rows = []
    for part in filter(None, args.parts.split(",")):
        results = compare(args, part)
        print(f"{part}: {json.dumps(results)}", flush=True)
        rows.append((part, results))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    stream_rows = corpus_files(args) if args.corpus_files else []

    print(f"\nCPU: {_cpu_model()}, {args.threads} threads; words/s = {args.batch_size} x {args.unroll} positions per "
          f"step; {args.passes} passes of {args.steps} steps after {args.warmup} warm-up steps")  # fmt: skip
    if rows:
        print(
            "\n| part | implementation | words/s (median) | passes | ours / nn.LSTM | words per CPU-second (median) "
            "| ours / nn.LSTM (CPU time) | peak RSS (MiB) | parameters |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
    words = words_per_step * args.steps
    for part, results in rows:
        speeds = {name: words / statistics.median(result["passes"]) for name, result in results.items()}
        cpu_speeds = {name: words / statistics.median(result["cpu_passes"]) for name, result in results.items()}
        for name, result in results.items():
            low, high = words / max(result["passes"]), words / min(result["passes"])
            ratios = [
                f"{values['ours'] / values['nn.LSTM']:.2f}" if name == "ours" else ""
                for values in (speeds, cpu_speeds)
            ]
            cells = [part, name, f"{speeds[name]:,.0f}", f"{low:,.0f}-{high:,.0f}", ratios[0]]
            cells += [
                f"{cpu_speeds[name]:,.0f}",
                ratios[1],
                f"{result['peak_rss_mib']:,}",
                f"{result['parameters']:,}",
            ]
            print("| " + " | ".join(cells) + " |")
    if stream_rows:
        print("\n| corpus | run | batches | seconds | peak RSS (MiB) |")
        print("|---|---|---|---|---|")
        for corpus, what, outcome in stream_rows:
            print(f"| {corpus} | {what} | {outcome['batches']} | {outcome['seconds']} | {outcome['peak_rss_mib']:,} |")


if __name__ == "__main__":
    main()
