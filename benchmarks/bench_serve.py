"""
`elmo serve` against the model called directly: throughput with 16 concurrent HTTP clients, each sending one
sentence per request, against `ElmoBatchEmbedder`'s offline throughput on the same sentences (layers "top", pooling
"mean": the sentence vectors the server gives, in its default batches of 64 sentences, in batches of as many
sentences as there are clients, the largest a server can form from them, and on each run of that many consecutive
sentences in turn, the batches the clients' requests make: sorted within themselves only, so each runs as many time
steps as its longest sentence); and one client's median latency
per request against one direct call of the model on that sentence alone (`ElmoBatchEmbedder.embed` of one row).

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

from modeling_elmo.serve.batcher import ROUNDS_REMEMBERED
from modeling_elmo.serve.settings import DEFAULT_MAX_BATCH_WORDS, DEFAULT_MAX_WAIT_MS


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

    def mean_batch_inputs(self) -> float:
        return self.metric("elmo_batch_inputs_sum") / max(self.metric("elmo_batch_inputs_count"), 1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


def embed_over(connection: http.client.HTTPConnection, text: str) -> None:
    body = json.dumps({"model": "bench", "input": text})
    connection.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    assert response.status == 200, payload


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
    """The median time of one client's requests, once the batcher has seen it alone (after a burst of other clients
    it waits for them during `ROUNDS_REMEMBERED` rounds)."""
    connection = server.connection()
    for text in texts[:ROUNDS_REMEMBERED]:
        embed_over(connection, text)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="original", help="original, small, fixture, or a model folder")
    parser.add_argument("--quick", action="store_true", help="the fixture, 64 sentences, 1 round")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--latency-sentences", type=int, default=40)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server and the offline runs")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-batch-words", type=int, default=DEFAULT_MAX_BATCH_WORDS)
    parser.add_argument("--max-wait-ms", type=float, default=DEFAULT_MAX_WAIT_MS)
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/elmo-bench-serve"))
    args = parser.parse_args()
    if args.quick:
        args.model, args.sentences, args.latency_sentences, args.rounds = "fixture", 64, 20, 1

    import torch

    from modeling_elmo.embed import ElmoBatchEmbedder

    torch.set_num_threads(args.threads)
    model_dir = ensure_model(args.work_dir, args.model)
    sentences = load_corpus(args.conll, args.sentences)
    texts = [" ".join(words) for words in sentences]
    latency_words, latency_texts = sentences[: args.latency_sentences], texts[: args.latency_sentences]
    embedder = ElmoBatchEmbedder(model_dir, layers="top", pooling="mean", threads=args.threads)  # 64 a batch
    # the most a server can batch when `clients` clients have one sentence each outstanding: batches of `clients`
    same_batches = ElmoBatchEmbedder(
        model_dir, layers="top", pooling="mean", threads=args.threads, batch_size=args.clients
    )
    flags = ["--max-batch-words", str(args.max_batch_words), "--max-wait-ms", str(args.max_wait_ms)]
    server = Server(model_dir, args.threads, flags)
    rows = []
    try:
        offline_throughput(embedder, sentences[:32])  # warm-up: loading, the engine's first choices
        served_throughput(server, texts[:32], args.clients)
        for round_number in range(args.rounds):
            row = {"round": round_number + 1}
            row["offline_sentences_per_s"] = offline_throughput(embedder, sentences)
            row["offline_batches_of_clients_per_s"] = offline_throughput(same_batches, sentences)
            row["offline_groups_of_clients_per_s"] = offline_throughput(same_batches, sentences, args.clients)
            batches_before = server.metric("elmo_batch_inputs_count")
            row["served_sentences_per_s"] = served_throughput(server, texts, args.clients)
            row["served_inputs_per_batch"] = len(texts) / (server.metric("elmo_batch_inputs_count") - batches_before)
            row["direct_ms"] = direct_latency_ms(embedder, latency_words)
            row["served_ms"] = served_latency_ms(server, latency_texts)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.stop()
    ratio = statistics.median(r["served_sentences_per_s"] / r["offline_sentences_per_s"] for r in rows)
    ceiling = statistics.median(r["served_sentences_per_s"] / r["offline_batches_of_clients_per_s"] for r in rows)
    groups = statistics.median(r["served_sentences_per_s"] / r["offline_groups_of_clients_per_s"] for r in rows)
    latency = statistics.median(r["served_ms"] / r["direct_ms"] for r in rows)
    summary = {
        "cpu": cpu_description()["model"],
        "load_average_at_end": os.getloadavg()[0],
        "model": args.model,
        "sentences": len(sentences),
        "mean_words": sum(map(len, sentences)) / len(sentences),
        "threads": args.threads,
        "clients": args.clients,
        "max_batch_words": args.max_batch_words,
        "max_wait_ms": args.max_wait_ms,
        "throughput_ratio": round(ratio, 3),
        "throughput_ratio_to_batches_of_clients": round(ceiling, 3),
        "throughput_ratio_to_groups_of_clients": round(groups, 3),
        "latency_ratio": round(latency, 3),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.exit(main())
