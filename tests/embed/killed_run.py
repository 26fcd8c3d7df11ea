"""`elmo-embed` killed (SIGKILL) mid-run, as a crash or the out-of-memory killer stops it: the resume tests of both
outputs (HDF5, Parquet) read what such a run leaves."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def embed_killed_after(arguments: list[str], parts: Path, pattern: str, count: int, log: Path) -> None:
    """Run `python -m modeling_elmo.embed ARGUMENTS --no-progress` and kill it once the folder `parts` holds `count`
    files matching `pattern` (or after 300 s); fail where it ended by itself before (its stderr's tail said)."""
    command = [sys.executable, "-m", "modeling_elmo.embed", *arguments, "--no-progress"]
    with open(log, "w+") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 300
        while len(list(parts.glob(pattern))) < count and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert process.poll() is None, (process.returncode, log.read_text()[-3000:])
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
