"""
A load test of `elmo serve` with locust: `POST /v1/embeddings`, one CoNLL-2003 sentence per request, at a fixed
arrival rate held for `--duration` seconds (60 by default) at each of three rates, below, at and past the server's
capacity; per rate it reports the requests sent, answered 200, answered 429 (queue full), other failures, timeouts,
the achieved rate and the 50th/95th/99th percentile latency of the answered requests, as a Markdown table headed by
the machine (`lscpu`'s CPU model), the versions and the load average before and after.

How the rate is held. A fixed arrival rate is an open-loop model (requests arrive whatever the answers' times);
locust's users are closed loops (a user sends its next request once its last is answered). So each rate R runs
U = ceil(R x `--pacing`) users (`FastHttpUser`, one keep-alive connection each), each starting a request every
U / R seconds: the rule of locust's `constant_pacing` (a user waits out the rest of its period after each answer),
written here as the users' `wait_time` so that each keeps its own phase: user n sends its first request n / R
seconds after the start, its next ones U / R seconds apart, so that the requests arrive 1 / R seconds apart (locust
spawns R users at once each second; `constant_pacing` would send their requests in one burst each second).
`--pacing` defaults to the client's `--timeout`, so no request, not even a timed-out one, outlasts its user's
period: every user sends on time, and U users of period U / R send R requests a second. No request starts after
`--duration`; those in flight then are waited for (answered or timed out). The achieved rate (requests sent /
`--duration`) is printed beside the target, flagged where below 95% of it, with how late the latest 1% of requests
started after their slot (this process starved of CPU by the server beside it, say).

Past saturation the server's queue fills: `elmo serve` answers 429 (`queue_full`) once a request's inputs would make
more than `--max-queue` inputs queued or running. A server this script starts gets `--max-queue 64` (about 3 to 6 s
of work for the 'original' shapes on 2 cores), so that past saturation the excess is refused at once and no client
times out; the server's own default, 4096, is minutes of work at one sentence a request, longer than any client's
timeout.

The server: a fresh `elmo-serve` process of `--model` on 127.0.0.1 at `--threads` torch threads (the script starts
it, waits for `/health`, and stops it with SIGTERM at the end), or `--url` of a running one. Models: 'original'
(random weights of the real shapes, converted once into `--work-dir`, as bench_serve.py makes them), 'small',
'fixture', or a model folder. The three rates: `--rates`, or 0.5x, 1x and 2x the capacity measured first: the
answers per second of `--probe-users` closed-loop users sending without a wait for `--probe-seconds` (64 users, the
queue the script gives the server, so that the rows per time step are as many as at saturation). Every run starts with
`--warm-up` requests one after the other. Needs the `bench` extra (`pip install -e ".[bench]"`).

    python benchmarks/load_test.py [--model original] [--duration 60] [--rates R1,R2,R3] [--url URL]
"""

import argparse
import itertools
import json
import math
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import NoReturn

try:  # locust patches the standard library for gevent on import: this process never imports torch
    import gevent
    from locust import FastHttpUser, constant, task
    from locust.env import Environment
except ImportError:
    sys.exit('benchmarks/load_test.py needs locust: pip install -e ".[bench]"')

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))
from inference_bench.ceilings import cpu_description  # noqa: E402  (the standard library only)
from inference_bench.common import DEFAULT_CONLL, REPO, load_corpus  # noqa: E402

PROG = "load_test.py"
ROUTE = "/v1/embeddings"
HELD = 0.95  # an achieved rate below this share of its target is flagged
RATE_MULTIPLES = (0.5, 1.0, 2.0)  # the default rates, times the measured capacity
START_SECONDS = 600  # building the 'original' model once and loading it, on a busy machine
STOP_MARGIN_SECONDS = 5.0  # past the timeout, for the requests in flight at the end of a rate


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line, `load_test.py: error: MESSAGE (see load_test.py --help)`, exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{PROG}: error: {message} (see {PROG} --help)", file=sys.stderr)
        raise SystemExit(2)


def positive_number(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def whole_number(minimum: int):
    """An argparse type: a whole number >= `minimum`."""

    def parse(text: str) -> int:
        if not text.strip().lstrip("-").isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return int(text)

    return parse


def rate_list(text: str) -> list[float]:
    """An argparse type: comma-separated request rates > 0 (requests per second)."""
    try:
        return [positive_number(part) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be rates > 0 separated by commas, e.g. 5,10,20; got {text!r}"
        ) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0].strip(),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", default="original", help="original, small, fixture, or a model folder")
    parser.add_argument("--url", help="a running server (http://HOST:PORT) instead of starting one")
    parser.add_argument("--rates", type=rate_list, help="requests/s, e.g. 5,10,20 (default: 0.5x,1x,2x capacity)")
    parser.add_argument("--duration", type=positive_number, default=60.0, help="seconds each rate is held")
    parser.add_argument("--timeout", type=positive_number, default=30.0, help="seconds a client waits for an answer")
    parser.add_argument(
        "--pacing", type=positive_number, help="seconds between one user's requests (default: timeout)"
    )
    parser.add_argument(
        "--probe-users", type=whole_number(1), default=64, help="closed-loop users measuring the capacity"
    )
    parser.add_argument("--probe-seconds", type=positive_number, default=20.0, help="seconds measuring the capacity")
    parser.add_argument(
        "--threads", type=whole_number(1), default=1, help="torch threads of a server this script starts"
    )
    parser.add_argument(
        "--max-queue", type=whole_number(1), default=64, help="--max-queue of a server this script starts"
    )
    parser.add_argument("--warm-up", type=whole_number(0), default=8, help="untimed requests sent one by one first")
    parser.add_argument("--sentences", type=whole_number(1), default=500, help="CoNLL sentences sent in turn")
    parser.add_argument("--conll", type=Path, default=DEFAULT_CONLL, help="a CoNLL-2003 file (dev.txt)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/elmo-load-test"), help="where models are built")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.url is not None and not args.url.startswith(("http://", "https://")):
        parser.error(f"--url must start with http:// or https://, got {args.url!r}")
    if not args.conll.is_file():
        parser.error(f"--conll: no file {args.conll} (CoNLL-2003 is read from ../shared/data/conll2003)")
    if args.url is None and args.model not in ("original", "small", "fixture") and not Path(args.model).is_dir():
        parser.error(f"--model must be original, small, fixture or a model folder, got {args.model!r}")
    args.pacing = args.pacing or args.timeout
    return args


# --- the server ---------------------------------------------------------------------------------------------------


def http_get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    """(status, text) of a GET; status 0 where nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError:
        return 0, ""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def build_model(work_dir: Path, name: str) -> Path:
    """The model folder of `name` (bench_inference.py's `ensure_model`), built in a child process: this one has
    gevent's patches and keeps torch out."""
    if Path(name).is_dir():
        return Path(name)
    if (work_dir / name / "hf" / "config.json").is_file():  # built by an earlier run
        return work_dir / name / "hf"
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "from inference_bench.common import ensure_model; print(ensure_model(Path(sys.argv[2]), sys.argv[3]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(BENCHMARKS), str(work_dir), name],
        capture_output=True,
        text=True,
        env=server_environment(1),
    )
    if result.returncode != 0:
        sys.exit(f"{PROG}: building the {name!r} model failed: {result.stderr.strip().splitlines()[-1:]}")
    return Path(result.stdout.strip().splitlines()[-1])


def server_environment(threads: int) -> dict[str, str]:
    """Offline, `threads` torch threads, and this checkout's package first (as the tests run the server)."""
    path = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path}


class Server:
    """A fresh `elmo-serve MODEL --port PORT --max-queue N` process on 127.0.0.1, ready when constructed."""

    def __init__(self, model_dir: Path, threads: int, max_queue: int):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [str(Path(sysconfig.get_path("scripts")) / "elmo-serve"), str(model_dir), "--port", str(port)]
        # a request may hold no more inputs than the queue (the server refuses a --max-inputs above --max-queue)
        command += ["--max-queue", str(max_queue), "--max-inputs", str(min(max_queue, 2048)), "--log-level", "warning"]
        self.process = subprocess.Popen(command, env=server_environment(threads), stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while http_get(self.url + "/health", timeout=2)[0] != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"{PROG}: elmo-serve did not start (exit status {self.process.returncode})")
            time.sleep(0.5)

    def stop(self) -> int | None:
        """SIGTERM (the server answers what it accepted and exits 0); its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def server_metrics(url: str) -> dict[str, float]:
    """The unlabelled samples of the server's `/metrics` (empty where it has none)."""
    status, text = http_get(url + "/metrics")
    if status != 200:
        return {}
    samples = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            try:
                samples[name] = float(value)
            except ValueError:
                continue
    return samples


def rows_per_step(before: dict[str, float], after: dict[str, float]) -> float | None:
    """The server's mean rows per time step between two readings of its metrics (`elmo_step_rows`)."""
    steps = after.get("elmo_step_rows_count", 0) - before.get("elmo_step_rows_count", 0)
    rows = after.get("elmo_step_rows_sum", 0) - before.get("elmo_step_rows_sum", 0)
    return rows / steps if steps > 0 else None


# --- the load -----------------------------------------------------------------------------------------------------


@dataclass
class Outcomes:
    """What came back for each request of one run: its start, its end, its status (0: no answer) and error."""

    sent: int = 0
    lags: list[float] = field(default_factory=list)  # each paced request's start after its slot, seconds
    answers: list[tuple[float, float, int, str]] = field(default_factory=list)  # (start, end, status, error)

    def record(self, response_time: float, response, exception: BaseException | None, **_) -> None:
        """locust's `request` event (`response_time` in ms): one request answered, refused or failed."""
        end = time.perf_counter()
        status = getattr(response, "status_code", 0) or 0
        error = "" if exception is None or status else f"{type(exception).__name__}: {exception}"
        self.answers.append((end - response_time / 1000, end, status, error))


def is_timeout(error: str) -> bool:
    """Whether a request's error (no HTTP answer) is the client's timeout."""
    return error.split(":")[0] in ("TimeoutError", "timeout", "Timeout", "ConnectionTimeout") or "timed out" in error


def embeddings_user(url: str, bodies: list[bytes], timeout: float, outcomes: Outcomes) -> type[FastHttpUser]:
    """A locust user class posting the `bodies` in turn (shared over the users) to `url` + /v1/embeddings, each
    request counted in `outcomes` (its `results`)."""
    turn = itertools.count()

    class EmbeddingsUser(FastHttpUser):
        results = outcomes
        host = url
        network_timeout = timeout
        connection_timeout = timeout
        deadline = math.inf  # no request starts after it
        abstract = True

        @task
        def embed(self) -> None:
            now = time.perf_counter()
            if now >= self.deadline:
                return
            outcomes.sent += 1
            if hasattr(self, "next_start"):  # a paced user's slot
                outcomes.lags.append(now - self.next_start)
            body = bodies[next(turn) % len(bodies)]
            self.client.post(ROUTE, data=body, headers={"Content-Type": "application/json"})

    return EmbeddingsUser


def paced_user(base: type[FastHttpUser], rate: float, period: float, start: float) -> type[FastHttpUser]:
    """`base` sending every `period` seconds (`constant_pacing`'s rule), user n's first request at `start` + n /
    `rate`."""
    created = itertools.count()

    class PacedUser(base):
        abstract = False

        def on_start(self) -> None:
            self.next_start = start + next(created) / rate
            gevent.sleep(max(0.0, self.next_start - time.perf_counter()))

        def wait_time(self) -> float:
            self.next_start += period  # the period counts from the last start, whatever the answer's time
            return max(0.0, self.next_start - time.perf_counter())

    return PacedUser


def run_users(user_class: type[FastHttpUser], users: int, spawn_rate: float, deadline: float, stop_timeout: float):
    """Run `users` of `user_class` (spawned at `spawn_rate` a second) until `deadline` (`time.perf_counter()`), then
    stop them, each user's request in flight answered or timed out first."""
    environment = Environment(user_classes=[user_class], stop_timeout=stop_timeout)
    runner = environment.create_local_runner()
    environment.events.request.add_listener(user_class.results.record)
    user_class.deadline = deadline
    runner.start(users, spawn_rate=spawn_rate)
    gevent.sleep(max(0.0, deadline - time.perf_counter()))
    runner.stop()
    runner.quit()


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile (`share` in (0, 1]) of `values`; None where there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def run_rate(url: str, bodies: list[bytes], rate: float, args: argparse.Namespace) -> dict:
    """One fixed arrival rate held for `args.duration` seconds: its figures."""
    users = max(1, math.ceil(rate * args.pacing))
    period = users / rate  # U users of this period send exactly `rate` requests a second
    outcomes = Outcomes()
    base = embeddings_user(url, bodies, args.timeout, outcomes)
    metrics_before = server_metrics(url)
    started = time.perf_counter() + 0.5  # the first phase: after the runner has spawned its first users
    stop_timeout = args.timeout + STOP_MARGIN_SECONDS
    run_users(paced_user(base, rate, period, started), users, rate, started + args.duration, stop_timeout)
    metrics_after = server_metrics(url)
    statuses = [status for _, _, status, _ in outcomes.answers]
    errors = [error for _, _, status, error in outcomes.answers if not status]
    ok_ms = [1000 * (end - begin) for begin, end, status, _ in outcomes.answers if status == 200]
    refused_ms = [1000 * (end - begin) for begin, end, status, _ in outcomes.answers if status == 429]
    timeouts = sum(map(is_timeout, errors))
    return {
        "rate": rate,
        "users": users,
        "period_s": period,
        "sent": outcomes.sent,
        "achieved_rate": outcomes.sent / args.duration,
        "ok": statuses.count(200),
        "rejected_429": statuses.count(429),
        "other_failures": len(statuses) - statuses.count(200) - statuses.count(429) - timeouts,
        "timeouts": timeouts,
        "unanswered": outcomes.sent - len(statuses),  # still in flight after the stop's wait (none expected)
        "answered_rate": statuses.count(200) / args.duration,
        "p50_ms": percentile(ok_ms, 0.50),
        "p95_ms": percentile(ok_ms, 0.95),
        "p99_ms": percentile(ok_ms, 0.99),
        "p50_429_ms": percentile(refused_ms, 0.50),
        "send_lag_p99_ms": 1000 * (percentile(outcomes.lags, 0.99) or 0.0),
        "rows_per_step": rows_per_step(metrics_before, metrics_after),
        "other_statuses": sorted({status for status in statuses if status not in (0, 200, 429)}),
        "errors": sorted({error for error in errors if not is_timeout(error)})[:5],
    }


def measure_capacity(url: str, bodies: list[bytes], args: argparse.Namespace) -> float:
    """Answers (200) per second of `args.probe_users` closed-loop users sending for `args.probe_seconds`: every
    answer, the requests in flight at the end included, over the time from the start to the last answer (the server
    is busy throughout, and its answers come as their sentences end, so a window in between would cut sentences)."""
    outcomes = Outcomes()
    base = embeddings_user(url, bodies, args.timeout, outcomes)
    probe = type("ProbeUser", (base,), {"abstract": False, "wait_time": constant(0)})
    started = time.perf_counter()
    stop_timeout = args.timeout + STOP_MARGIN_SECONDS
    run_users(probe, args.probe_users, args.probe_users, started + args.probe_seconds, stop_timeout)
    ends = [end for _, end, status, _ in outcomes.answers if status == 200]
    return len(ends) / (max(ends) - started) if ends else 0.0


def warm_up(url: str, bodies: list[bytes], requests: int, timeout: float) -> None:
    """`requests` requests one after the other, untimed (the server's first time steps); any HTTP answer will do."""
    for body in (bodies * requests)[:requests]:
        request = urllib.request.Request(url + ROUTE, data=body, headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=timeout).read()
        except urllib.error.HTTPError:
            continue
        except OSError as error:
            sys.exit(f"{PROG}: {url}{ROUTE} did not answer the warm-up: {error}")


# --- the report ---------------------------------------------------------------------------------------------------


def number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown_table(rows: list[dict]) -> str:
    header = (
        "| target req/s | users | sent | achieved req/s | 200 | 429 | other failures | timeouts | answered/s "
        "| p50 ms | p95 ms | p99 ms | rows per step |"
    )
    lines = [header, "|" + " --- |" * (header.count("|") - 1)]
    for row in rows:
        flag = "" if row["achieved_rate"] >= HELD * row["rate"] else " (not held)"
        lines.append(
            f"| {number(row['rate'], 1)} | {row['users']} | {row['sent']} | {number(row['achieved_rate'], 2)}{flag} "
            f"| {row['ok']} | {row['rejected_429']} | {row['other_failures'] + row['unanswered']} | {row['timeouts']} "
            f"| {number(row['answered_rate'], 2)} | {number(row['p50_ms'])} | {number(row['p95_ms'])} "
            f"| {number(row['p99_ms'])} | {number(row['rows_per_step'], 1)} |"
        )
    return "\n".join(lines)


def saturation_lines(rows: list[dict]) -> list[str]:
    """What the rates past the server's capacity got: 429s (how fast), timeouts, other failures."""
    lines = []
    for row in rows:
        if row["rejected_429"] or row["timeouts"] or row["other_failures"] or row["unanswered"]:
            lines.append(
                f"- {number(row['rate'], 1)} req/s: {row['rejected_429']} of {row['sent']} requests answered 429 "
                f"(median {number(row['p50_429_ms'])} ms), {row['timeouts']} timeouts, "
                f"{row['other_failures'] + row['unanswered']} other failures"
                + (f" ({'; '.join(row['errors'])})" if row["errors"] else "")
                + (f", statuses {row['other_statuses']}" if row["other_statuses"] else "")
            )
    return lines or ["- no rate got a 429, a timeout or a failure: none was past the server's capacity"]


def rate_check(rows: list[dict]) -> str:
    """Whether each rate was held: requests sent against the target, and how late the latest 1% started."""
    short = [number(row["rate"], 1) for row in rows if row["achieved_rate"] < HELD * row["rate"]]
    lag = max(row["send_lag_p99_ms"] for row in rows)
    verdict = f"not held at {', '.join(short)} req/s" if short else f"every rate held (sent >= {HELD:.0%} of target)"
    return f"Rate check: {verdict}; requests started at most {lag:.0f} ms after their slot (99th percentile)"


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    sentences = load_corpus(args.conll, args.sentences)
    if not sentences:
        sys.exit(f"{PROG}: {args.conll} has no sentence of 11 words or more")
    bodies = [json.dumps({"model": "elmo", "input": " ".join(words)}).encode() for words in sentences]
    server = None
    if args.url is None:
        server = Server(build_model(args.work_dir, args.model), args.threads, args.max_queue)
        url = server.url
    else:
        url = args.url.rstrip("/")
    try:
        warm_up(url, bodies, args.warm_up, args.timeout)
        capacity = None
        if args.rates is None:
            capacity = measure_capacity(url, bodies, args)
            if capacity <= 0:
                sys.exit(f"{PROG}: no request was answered in {args.probe_seconds:g} s of the capacity probe")
            args.rates = [round(multiple * capacity, 1) for multiple in RATE_MULTIPLES]
        rows = []
        for rate in args.rates:
            rows.append(run_rate(url, bodies, rate, args))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        exit_status = server.stop() if server is not None else None
    load_after = os.getloadavg()
    server_line = (
        f"`elmo serve` started here: `--max-queue {args.max_queue}`, {args.threads} torch thread(s), "
        f"server exit status {exit_status}"
        if server
        else f"the server at {url}"
    )
    mean_words = sum(map(len, sentences)) / len(sentences)
    print(
        f"\nCPU: {cpu_description().get('model', 'unknown')} ({os.cpu_count()} CPUs); torch {version('torch')}, "
        f"locust {version('locust')}; model {args.model if server else '(the running server)'}; {server_line}\n"
        f"{len(sentences)} CoNLL-2003 sentences ({mean_words:.1f} words on average), one per request; "
        f"{args.duration:g} s per rate; client timeout {args.timeout:g} s; each user sends every ~{args.pacing:g} s\n"
        + (f"capacity measured: {capacity:.2f} answers/s ({args.probe_users} closed-loop users)\n" if capacity else "")
        + f"load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after\n"
    )
    print(markdown_table(rows))
    print("\n" + rate_check(rows))
    print("\nPast saturation:\n" + "\n".join(saturation_lines(rows)))
    if args.json:
        summary = {
            "cpu": cpu_description().get("model"),
            "torch": version("torch"),
            "locust": version("locust"),
            "model": args.model if server else None,
            "url": args.url,
            "server_exit_status": exit_status,
            "capacity": capacity,
            "duration": args.duration,
            "timeout": args.timeout,
            "load_average": [load_before[0], load_after[0]],
            "rows": rows,
        }
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
