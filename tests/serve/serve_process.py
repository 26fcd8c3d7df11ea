"""A real `elmo serve` process for the tests: started on 127.0.0.1 at a free port, waited for until `/health` says
ready, talked to over HTTP, and stopped with SIGTERM (its exit status and log kept)."""

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path

START_SECONDS = 180  # loading torch and the model on a busy machine
INJECTED_SERVER = Path(__file__).with_name("injected_server.py")
ELMO_SERVE = Path(sysconfig.get_path("scripts")) / "elmo-serve"  # the console script, as users start it
CHECKOUT = Path(__file__).resolve().parents[2]
# the server runs this checkout's package, as the tests import it (not whichever checkout the console script was
# installed from)
PYTHONPATH = os.pathsep.join([str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServeProcess:
    """`elmo serve MODEL --port PORT ARGS` (or, `injected=True`, `injected_server.py`: the same with a model that
    fails or is slow on a word)."""

    def __init__(self, model: Path, *args: str, log: Path, injected: bool = False):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        script = [sys.executable, str(INJECTED_SERVER)] if injected else [str(ELMO_SERVE)]
        command = [*script, str(model), "--port", str(self.port), *args]
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": PYTHONPATH}
        self._log = open(log, "w")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=environment)
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"elmo serve exited with {self.process.returncode}: {self.log()}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"elmo serve was not ready after {START_SECONDS} s: {self.log()}")

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 120
    ):
        """(status, body bytes) of one HTTP request (`timeout`: seconds the answer may keep the socket silent)."""
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def get(self, path: str):
        return self.request("GET", path)

    def post(self, path: str, document) -> tuple[int, dict]:
        """(status, JSON body) of a POST of `document` (a dict, encoded as JSON, or bytes as they are)."""
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        status, answer = self.request("POST", path, body, {"Content-Type": "application/json"})
        return status, json.loads(answer)

    def metric(self, name: str) -> float:
        """The value of one sample of /metrics, `name` with its labels as the text shows them (0 where absent)."""
        status, text = self.get("/metrics")
        assert status == 200
        for line in text.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return 0.0

    def wait_for_metric(self, name: str, value: float, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while self.metric(name) != value:
            assert time.monotonic() < deadline, f"{name} never reached {value}: {self.metric(name)}"
            time.sleep(0.05)

    def terminate(self, seconds: float = 120) -> int:
        """SIGTERM, then its exit status once it has exited."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait(seconds)

    def wait(self, seconds: float = 120) -> int:
        try:
            return self.process.wait(seconds)
        finally:
            self._log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.terminate()
        self._log.close()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()
