"""
`elmo serve`'s memory and liveness under the largest request its default limits accept (issue 53, point 3): the
server's idle RSS, its peak RSS while the request runs (`VmHWM` of /proc/PID/status, reset before the request by
writing 5 to /proc/PID/clear_refs; and the largest `VmRSS` sampled beside it), and the latency of `GET /health`,
polled every `--interval` seconds on a keep-alive connection while the request runs (p50, p99, max). The target:
within idle RSS + 3 GiB, `/health` under 100 ms.

The largest request is the per-word request of the most words the defaults accept (`protocol.largest_word_request`:
inputs of `--max-words` distinct words, as many as the response budget, `--max-inputs` and the body limit allow), for
each shape in `--shapes`: `top-base64` (the most words: the model's work and its every layer held until the answer),
`all-float` (the route's default, the response's JSON numbers), and on request `sentences` (OpenAI's route,
`--max-inputs` inputs of `--max-words` words: bounded by those, not by the budget; hours on 'original').

The server is a real `elmo-serve` process on 127.0.0.1 with its default limits (benchmarks/bench_serve.py's
`Server`), at `--threads` torch threads. Models: 'original' (random weights of the real shapes) by default, or the
fixture, as benchmarks/bench_inference.py builds them.

    python benchmarks/bench_serve_memory.py [--model original] [--threads 1] [--shapes top-base64,all-float]
"""

import argparse
import http.client
import json
import os
import statistics
import threading
import time
from pathlib import Path

from bench_inference import cpu_description, ensure_model
from bench_serve import Server

from modeling_elmo.configuration_elmo import ElmoConfig
from modeling_elmo.serve.protocol import Limits, largest_word_request
from modeling_elmo.word_splitter import split_words

SHAPES = {"top-base64": ("top", "base64"), "all-float": ("all", "float"), "sentences": None}
TARGET_GROWTH_GIB, TARGET_HEALTH_MS = 3, 100


def status_kib(pid: int, field: str) -> int:
    """A `field` of /proc/PID/status in KiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int) -> None:
    """Set VmHWM back to the current RSS (Linux 4.0+)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


class HealthPoller(threading.Thread):
    """`GET /health` every `interval` seconds on one keep-alive connection, and VmRSS beside it, until `stop`:
    `latencies` (seconds), `statuses`, `largest_rss_kib`."""

    def __init__(self, port: int, pid: int, interval: float):
        super().__init__(daemon=True)
        self.port, self.pid, self.interval = port, pid, interval
        self.latencies: list[float] = []
        self.times: list[float] = []  # when each poll began, seconds since the poller started
        self.statuses: list[int] = []
        self.largest_rss_kib = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        began = time.perf_counter()
        while not self.stopping.is_set():
            started = time.perf_counter()
            self.times.append(started - began)
            connection.request("GET", "/health")
            response = connection.getresponse()
            response.read()
            self.latencies.append(time.perf_counter() - started)
            self.statuses.append(response.status)
            self.largest_rss_kib = max(self.largest_rss_kib, status_kib(self.pid, "VmRSS"))
            self.stopping.wait(self.interval)
        connection.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join()


def post(port: int, route: str, document: dict) -> tuple[int, int]:
    """(status, body bytes) of one POST, the body read and dropped."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=7200)
    connection.request("POST", route, json.dumps(document), {"Content-Type": "application/json"})
    response = connection.getresponse()
    size = len(response.read())
    connection.close()
    return response.status, size


def largest_request(shape: str, limits: Limits, width: int, num_layers: int, name: str) -> tuple[str, dict]:
    """(route, body) of the largest request of `shape` the `limits` accept."""
    if SHAPES[shape] is None:
        text = " ".join(f"w{k}" for k in range(limits.words_per_input))
        return "/v1/embeddings", {"input": [text] * limits.inputs}
    layers, encoding_format = SHAPES[shape]
    return "/v1/word-embeddings", largest_word_request(
        limits, width, num_layers, name, split_words, layers, encoding_format
    )


def quantile(values: list[float], q: float) -> float:
    """The `q` quantile (a multiple of 0.01) of `values`."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def measure(server: Server, route: str, document: dict, interval: float) -> dict:
    """Idle RSS, the request's peak RSS and its time, and /health's latencies while it ran."""
    pid = server.process.pid
    warm = {**document, "input": [document["input"][0][:200]]}  # the route and shape once: lazy allocations
    assert post(server.port, route, warm)[0] == 200
    time.sleep(1)
    idle = status_kib(pid, "VmRSS")
    reset_peak(pid)
    model_before = server.metric("elmo_model_seconds_sum")
    poller = HealthPoller(server.port, pid, interval)
    poller.start()
    started = time.perf_counter()
    status, size = post(server.port, route, document)
    seconds = time.perf_counter() - started
    poller.stop()
    model_seconds = server.metric("elmo_model_seconds_sum") - model_before
    assert status == 200, status
    peak = max(status_kib(pid, "VmHWM"), poller.largest_rss_kib)
    latencies_ms = [1000 * latency for latency in poller.latencies]
    return {
        "words": sum(len(split_words(text)) for text in document["input"]),
        "inputs": len(document["input"]),
        "body_mb": size / 1e6,
        "seconds": seconds,
        "model_seconds": model_seconds,  # the batches' time on the model (/metrics)
        "idle_mib": idle / 1024,
        "peak_mib": peak / 1024,
        "growth_mib": (peak - idle) / 1024,
        "sampled_growth_mib": (poller.largest_rss_kib - idle) / 1024,
        "health_polls": len(latencies_ms),
        "health_not_200": sum(status != 200 for status in poller.statuses),
        "health_p50_ms": statistics.median(latencies_ms),
        "health_p99_ms": quantile(latencies_ms, 0.99),
        "health_max_ms": max(latencies_ms),
        "slowest_polls": sorted(zip(latencies_ms, poller.times, strict=True), reverse=True)[:5],  # (ms, s in)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="original", help="original, fixture, or a model folder")
    parser.add_argument("--shapes", default="top-base64,all-float", help=f"of {', '.join(SHAPES)}")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between two /health polls")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/elmo-bench-serve"))
    parser.add_argument("--json", type=Path, help="write the rows here too")
    parser.add_argument(
        "--server-checkout", type=Path, help="the server runs this checkout's package (a before/after comparison)"
    )
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        parser.error(f"--shapes: {unknown[0]!r} is not one of {', '.join(SHAPES)}")

    if args.server_checkout:
        os.environ["PYTHONPATH"] = str(args.server_checkout.resolve())  # the server's (bench_serve.Server's) only
    model_dir = ensure_model(args.work_dir, args.model)
    config = ElmoConfig.from_pretrained(model_dir)
    width, num_layers = config.hidden_size, config.num_hidden_layers + 1  # the runner's: the CNN's, each biLM's
    cpu = cpu_description()["model"]
    print(f"{cpu}; model {args.model} (width {width}, {num_layers} layers), {args.threads} torch threads")
    limits = Limits()  # elmo serve's defaults
    rows = []
    for shape in shapes:
        route, document = largest_request(shape, limits, width, num_layers, model_dir.name)
        server = Server(model_dir, args.threads, [])  # a fresh one: an earlier request's heap is not idle
        try:
            row = {"shape": shape, **measure(server, route, document, args.interval)}
        finally:
            server.stop()
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        "\n| request | inputs | words | body MB | s (model) | idle RSS MiB | peak RSS MiB | growth MiB "
        "| /health polls | p50 ms | p99 ms | max ms |"
    )
    print("| --- " * 12 + "|")
    for row in rows:
        print(
            f"| {row['shape']} | {row['inputs']} | {row['words']} | {row['body_mb']:.1f} "
            f"| {row['seconds']:.1f} ({row['model_seconds']:.1f}) "
            f"| {row['idle_mib']:.0f} | {row['peak_mib']:.0f} | {row['growth_mib']:.0f} | {row['health_polls']} "
            f"| {row['health_p50_ms']:.1f} | {row['health_p99_ms']:.1f} | {row['health_max_ms']:.1f} |"
        )
    within = all(row["growth_mib"] <= TARGET_GROWTH_GIB * 1024 for row in rows)
    live = all(row["health_max_ms"] < TARGET_HEALTH_MS and not row["health_not_200"] for row in rows)
    print(f"\nwithin idle + {TARGET_GROWTH_GIB} GiB: {within}; /health under {TARGET_HEALTH_MS} ms throughout: {live}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
