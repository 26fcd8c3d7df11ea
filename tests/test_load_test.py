"""benchmarks/load_test.py (locust, the `bench` extra), always as a child process: locust patches the standard library
for gevent when imported, which this process must not get. Against a stub server that answers 200, 429, 500 and too
late in a fixed cycle, every request it counts is the stub's own count; against `elmo serve` on the fixture model, a
low rate for 2 s gets every answer. Counts only: speed is measured by the script itself (benchmarks/RESULTS.md)."""

import importlib.util
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from shared_paths import REPO_ROOT, require_shared

SCRIPT = REPO_ROOT / "benchmarks" / "load_test.py"
TIMEOUT = 0.5  # the client's, seconds; the stub's late answers come 4x later
SENTENCE = "The European Commission said on Thursday it disagreed with German advice to consumers ."

# the integration tier: every test runs the script in another interpreter (CI job 4 installs the bench extra)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason='needs locust: pip install -e ".[bench]"'),
]


def run_script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT
    )


def table_rows(output: str) -> dict[str, list[str]]:
    """The Markdown table's rows by their first cell (the target rate)."""
    rows = [line.strip("|").split("|") for line in output.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [cell.strip() for cell in cells] for cells in rows[2:]}  # past the header, the rule


def write_conll(path: Path, sentences: int = 4) -> Path:
    """A CoNLL-2003 file of `sentences` copies of one sentence of 13 words (the script keeps those of 11 or more)."""
    block = "\n".join(f"{word} X X O" for word in SENTENCE.split())
    path.write_text("\n\n".join([block] * sentences) + "\n", encoding="utf-8")
    return path


class StubServer(ThreadingHTTPServer):
    """`/health` 200; `POST /v1/embeddings` in a cycle of 10 requests: the 3rd 429, the 6th 500, the 9th answered
    after 4x the client's timeout, the others 200. `counts` tallies what it gave."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class StubHandler(BaseHTTPRequestHandler):
    server: StubServer

    def do_GET(self) -> None:
        self.answer(200 if self.path == "/health" else 404, {"status": "ready"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            number = sum(self.server.counts.values()) + 1
            kind = {3: "429", 6: "500", 9: "late"}.get(number % 10, "200")
            self.server.counts[kind] += 1
        if kind == "late":
            time.sleep(4 * TIMEOUT)
        status = 200 if kind == "late" else int(kind)
        self.answer(status, {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [1.0]}]})

    def answer(self, status: int, document: dict) -> None:
        body = json.dumps(document).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # a client that timed out has closed the connection
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def stub():
    server = StubServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_every_request_is_counted_as_the_server_answered_it(stub, tmp_path):
    conll = write_conll(tmp_path / "dev.txt")
    result = tmp_path / "result.json"
    completed = run_script(
        "--url",
        stub.url,
        "--rates",
        "10,20",
        "--duration",
        "2",
        "--timeout",
        str(TIMEOUT),
        "--conll",
        str(conll),
        "--json",
        str(result),
        "--warm-up",
        "0",
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = json.loads(result.read_text())["rows"]
    assert [row["rate"] for row in rows] == [10.0, 20.0]
    for row in rows:  # each request sent ended one way, once
        ended = row["ok"] + row["rejected_429"] + row["other_failures"] + row["timeouts"]
        assert row["sent"] == ended and row["unanswered"] == 0
        assert row["other_statuses"] in ([], [500])
    total = Counter(
        {key: sum(row[key] for row in rows) for key in ("ok", "rejected_429", "other_failures", "timeouts")}
    )
    assert total == {
        "ok": stub.counts["200"],
        "rejected_429": stub.counts["429"],
        "other_failures": stub.counts["500"],
        "timeouts": stub.counts["late"],
    }
    assert min(total.values()) > 0  # every kind of answer happened
    table = table_rows(completed.stdout)
    assert set(table) == {"10.0", "20.0"}
    assert "Past saturation:" in completed.stdout and "answered 429" in completed.stdout
    assert "locust" not in sys.modules and "gevent" not in sys.modules  # this process was never patched


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--rates", "5,x"], "--rates: must be rates > 0 separated by commas"),
        (["--duration", "0"], "--duration: must be a number > 0, got '0'"),
        (["--url", "localhost:8000"], "--url must start with http:// or https://"),
        (["--model", "no-such-model"], "--model must be original, small, fixture or a model folder"),
    ],
)
def test_a_bad_argument_is_one_line(arguments, message):
    conll = require_shared("data/conll2003") / "dev.txt"  # the default reads ../shared beside this checkout
    completed = run_script(*arguments, "--conll", str(conll), timeout=60)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and message in completed.stderr, completed.stderr


def test_a_low_rate_on_the_fixture_model_is_answered_in_full(converted_fixture, tmp_path):
    """The script starts `elmo serve` itself (then stops it: exit status 0); 4 and 8 requests a second for 2 s."""
    conll = require_shared("data/conll2003") / "dev.txt"
    result = tmp_path / "result.json"
    completed = run_script(
        "--model",
        str(converted_fixture),
        "--rates",
        "4,8",
        "--duration",
        "2",
        "--conll",
        str(conll),
        "--json",
        str(result),
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads(result.read_text())
    assert summary["server_exit_status"] == 0
    for row in summary["rows"]:
        assert row["sent"] > 0 and row["ok"] == row["sent"]
        assert row["rejected_429"] == row["other_failures"] == row["timeouts"] == row["unanswered"] == 0
        assert row["rows_per_step"] >= 1  # read from the server's /metrics
    table = table_rows(completed.stdout)
    assert set(table) == {"4.0", "8.0"}
    assert all(cells[5:8] == ["0", "0", "0"] for cells in table.values())  # 429, other failures, timeouts
    assert completed.stdout.count("\nCPU: ") == 1  # lscpu's model heads the table
