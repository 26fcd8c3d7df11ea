"""
`elmo serve` (batching at the time step, `modeling_elmo.inference.step_scheduler`) against the model called directly,
with real HTTP clients (issue 53's targets):

- throughput: 16 and 64 concurrent clients (`--clients`), each sending one sentence per request and waiting for its
  answer, against `ElmoBatchEmbedder`'s default offline throughput on the same sentences (layers "top", pooling
  "mean": the sentence vectors the server gives; its default batches of 64 sentences), with the server's mean rows
  per time step (`elmo_step_rows`: where the time goes);
- latency: one client's median time per request against one direct call of the model on that sentence alone
  (`ElmoBatchEmbedder.embed` of one row);
- a bulk client sending `--bulk-size` (1,024) sentence requests back to back beside an interactive client sending one
  20-word sentence every 0.5 s: the interactive p50 / p90 against the bulk requests' median, and every status;
- the scheduler offline: `StepScheduler` in this process on the same sentences, unsorted (all queued at once),
  against `ElmoBatchEmbedder` (whether `elmo-embed` and `ElmoBatchEmbedder` would gain from it).

The server is a real `elmo-serve` process on 127.0.0.1, at the same torch thread count as this process's offline
runs; the clients are threads of this process with keep-alive connections (`http.client`). Offline and served runs
alternate, `--rounds` times, so that a change in the machine's load shows in both. Models: 'original' (random
weights of the real shapes: LSTM 4096/512, 2 highways, as benchmarks/bench_inference.py builds them) by default,
`--quick` the fixture and fewer sentences. Sentences: CoNLL-2003 dev's, as bench_inference.py reads them.

    python benchmarks/bench_serve.py [--model original] [--sentences 256] [--threads 1] [--rounds 2]
    python benchmarks/bench_serve.py --quick
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

from bench_inference import DEFAULT_CONLL, cpu_description, ensure_model, load_corpus

from modeling_elmo.serve.settings import DEFAULT_MAX_BATCH_ROWS, DEFAULT_MAX_BATCH_WORDS


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """An `elmo-serve` process of `model_dir` at `threads` torch threads, ready when constructed."""

    def __init__(self, model_dir: Path, threads: int, extra: list[str]):
        self.port = free_port()
        command = [str(Path(sysconfig.get_path("scripts")) / "elmo-serve"), str(model_dir), "--port", str(self.port)]
        environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            [*command, "--log-level", "warning", *extra], env=environment, stdout=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 300
        while not self._ready():
            assert self.process.poll() is None and time.monotonic() < deadline, "elmo-serve did not start"
            time.sleep(0.5)

    def _ready(self) -> bool:
        try:
            return self.get("/health") == 200
        except OSError:  # not listening yet
            return False

    def connection(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        connection.connect()
        return connection

    def get(self, path: str) -> int:
        connection = self.connection()
        connection.request("GET", path)
        status = connection.getresponse().status
        connection.close()
        return status

    def metric(self, name: str) -> float:
        connection = self.connection()
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        connection.close()
        return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")), 0.0)

    def step_rows(self) -> tuple[float, float]:
        """(rows summed over time steps, time steps) so far (`elmo_step_rows`)."""
        return self.metric("elmo_step_rows_sum"), self.metric("elmo_step_rows_count")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


def embed_over(connection: http.client.HTTPConnection, text: str | list[str]) -> int:
    """POST /v1/embeddings of `text` (one input or several); the status (200 asserted unless `text` is a list)."""
    body = json.dumps({"model": "bench", "input": text})
    connection.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    assert response.status == 200 or isinstance(text, list), payload
    return response.status


def served_throughput(server: Server, texts: list[str], clients: int) -> float:
    """Sentences per second: `clients` threads, each taking the next sentence and waiting for its answer."""
    next_text = iter(texts)
    lock = threading.Lock()

    def client() -> None:
        connection = server.connection()
        while True:
            with lock:
                text = next(next_text, None)
            if text is None:
                break
            embed_over(connection, text)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(texts) / (time.perf_counter() - started)


def served_latency_ms(server: Server, texts: list[str]) -> float:
    """The median time of one client's requests."""
    connection = server.connection()
    times = []
    for text in texts:
        started = time.perf_counter()
        embed_over(connection, text)
        times.append(time.perf_counter() - started)
    connection.close()
    return 1000 * statistics.median(times)


def offline_throughput(embedder, sentences: list[list[str]], group: int | None = None) -> float:
    """Sentences per second of `embedder` on `sentences`: in one call (its own batches), or called on each `group`
    consecutive sentences in turn (the batches the server forms when `group` clients take the sentences in order,
    each length-sorted within itself only)."""
    group = group or len(sentences)
    started = time.perf_counter()
    for start in range(0, len(sentences), group):
        part = sentences[start : start + group]
        embedder.embed(list(range(len(part))), part)
    return len(sentences) / (time.perf_counter() - started)


def direct_latency_ms(embedder, sentences: list[list[str]]) -> float:
    times = []
    for words in sentences:
        started = time.perf_counter()
        embedder.embed([0], [words])
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def bulk_beside_interactive(server: Server, texts: list[str], bulk_size: int, bulk_requests: int) -> dict:
    """A bulk client sending `bulk_requests` requests of `bulk_size` sentences back to back, and an interactive client
    sending one 20-word sentence every 0.5 s meanwhile: both clients' latencies (seconds) and statuses."""
    bulk = [texts[k % len(texts)] for k in range(bulk_size)]
    interactive_text = " ".join((" ".join(texts)).split()[:20])
    bulk_times, bulk_statuses, interactive_times, interactive_statuses = [], [], [], []
    done = threading.Event()

    def bulk_client() -> None:
        connection = server.connection()
        for _ in range(bulk_requests):
            started = time.perf_counter()
            bulk_statuses.append(embed_over(connection, bulk))
            bulk_times.append(time.perf_counter() - started)
        connection.close()
        done.set()

    def interactive_client() -> None:
        connection = server.connection()
        next_send = time.perf_counter()
        while not done.is_set():
            started = time.perf_counter()
            interactive_statuses.append(embed_over(connection, [interactive_text]))
            interactive_times.append(time.perf_counter() - started)
            next_send += 0.5
            time.sleep(max(0.0, next_send - time.perf_counter()))
        connection.close()

    threads = [threading.Thread(target=bulk_client), threading.Thread(target=interactive_client)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    quantiles = statistics.quantiles(interactive_times, n=10) if len(interactive_times) > 1 else interactive_times * 9
    return {
        "bulk_median_s": statistics.median(bulk_times),
        "interactive_p50_s": statistics.median(interactive_times),
        "interactive_p90_s": quantiles[8],
        "interactive_requests": len(interactive_times),
        "statuses": sorted(set(bulk_statuses + interactive_statuses)),
    }


def scheduler_throughput(model_dir: Path, sentences: list[list[str]], max_rows: int, max_words: int) -> float:
    """Sentences per second of `StepScheduler` in this process on `sentences` queued at once, unsorted, each its own
    request (layers "top"; the mean over words is left out, as it is a fraction of a percent of the work)."""
    import torch

    from modeling_elmo.inference.loading import load_model
    from modeling_elmo.inference.step_scheduler import StepScheduler

    tokenizer, model = load_model(str(model_dir), torch.float32, torch.device("cpu"), progress=False)
    scheduler = StepScheduler(model, tokenizer, max_rows=max_rows, max_words=max_words)
    started = time.perf_counter()
    for index, words in enumerate(sentences):
        scheduler.add(index, words, request=index)
    while scheduler.busy:
        scheduler.step()
    return len(sentences) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="original", help="original, small, fixture, or a model folder")
    parser.add_argument("--quick", action="store_true", help="the fixture, 64 sentences, 1 round, small bulk")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--latency-sentences", type=int, default=40)
    parser.add_argument("--clients", default="16,64", help="concurrent one-sentence clients, comma-separated")
    parser.add_argument("--bulk-size", type=int, default=1024, help="sentences per bulk request")
    parser.add_argument("--bulk-requests", type=int, default=3, help="bulk requests beside the interactive client")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server and the offline runs")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-batch-rows", type=int, default=DEFAULT_MAX_BATCH_ROWS)
    parser.add_argument("--max-batch-words", type=int, default=DEFAULT_MAX_BATCH_WORDS)
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/elmo-bench-serve"))
    args = parser.parse_args()
    if args.quick:
        args.model, args.sentences, args.latency_sentences, args.rounds = "fixture", 64, 20, 1
        args.bulk_size, args.bulk_requests = 128, 2
    clients = [int(count) for count in args.clients.split(",")]

    import torch

    from modeling_elmo.embed import ElmoBatchEmbedder

    torch.set_num_threads(args.threads)
    model_dir = ensure_model(args.work_dir, args.model)
    sentences = load_corpus(args.conll, args.sentences)
    texts = [" ".join(words) for words in sentences]
    latency_words, latency_texts = sentences[: args.latency_sentences], texts[: args.latency_sentences]
    embedder = ElmoBatchEmbedder(model_dir, layers="top", pooling="mean", threads=args.threads)  # 64 a batch
    flags = ["--max-batch-rows", str(args.max_batch_rows), "--max-batch-words", str(args.max_batch_words)]
    server = Server(model_dir, args.threads, flags)
    rows = []
    try:
        offline_throughput(embedder, sentences[:32])  # warm-up: loading, the engine's first choices
        served_throughput(server, texts[:32], max(clients))
        for round_number in range(args.rounds):
            row = {"round": round_number + 1}
            row["offline_sentences_per_s"] = offline_throughput(embedder, sentences)
            row["scheduler_sentences_per_s"] = scheduler_throughput(
                model_dir, sentences, args.max_batch_rows, args.max_batch_words
            )
            for count in clients:
                rows_before, steps_before = server.step_rows()
                row[f"served_{count}_sentences_per_s"] = served_throughput(server, texts, count)
                rows_after, steps_after = server.step_rows()
                row[f"served_{count}_rows_per_step"] = (rows_after - rows_before) / max(steps_after - steps_before, 1)
            row["direct_ms"] = direct_latency_ms(embedder, latency_words)
            row["served_ms"] = served_latency_ms(server, latency_texts)
            rows.append(row)
            print(json.dumps(row), flush=True)
        mixed = bulk_beside_interactive(server, texts, args.bulk_size, args.bulk_requests)
        print(json.dumps(mixed), flush=True)
    finally:
        server.stop()

    def ratio(numerator: str, denominator: str) -> float:
        return round(statistics.median(row[numerator] / row[denominator] for row in rows), 3)

    summary = {
        "cpu": cpu_description()["model"],
        "load_average_at_end": os.getloadavg()[0],
        "model": args.model,
        "sentences": len(sentences),
        "mean_words": sum(map(len, sentences)) / len(sentences),
        "threads": args.threads,
        "max_batch_rows": args.max_batch_rows,
        "max_batch_words": args.max_batch_words,
        **{
            f"throughput_ratio_{count}_clients": ratio(f"served_{count}_sentences_per_s", "offline_sentences_per_s")
            for count in clients
        },
        "latency_ratio": ratio("served_ms", "direct_ms"),
        "interactive_p90_to_bulk_median": round(mixed["interactive_p90_s"] / mixed["bulk_median_s"], 3),
        "scheduler_offline_ratio": ratio("scheduler_sentences_per_s", "offline_sentences_per_s"),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.exit(main())
