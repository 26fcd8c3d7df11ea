"""`elmo serve` with an injected model failure: any batch holding the word `FAIL` raises, as a broken model would;
the server must fail that request only and keep serving (tests/serve/test_serve_process.py)."""

import sys

from modeling_elmo.commands.elmo import main
from modeling_elmo.serve.runner import ModelRunner

FAILING_WORD = "FAIL"
forward = ModelRunner._forward


def failing_forward(self, jobs):
    if any(FAILING_WORD in job.words for job in jobs):
        raise RuntimeError("injected model failure")
    return forward(self, jobs)


ModelRunner._forward = failing_forward
sys.exit(main(["serve", *sys.argv[1:]]))
