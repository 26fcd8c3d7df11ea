"""`elmo serve` with the model's trouble injected, as a broken or busy model would have it: a batch holding the word
`FAIL` raises (the server must fail that request only and keep serving), and one holding `SLOW` takes 3 s more (so
that the requests sent meanwhile stay queued while a test looks at them). tests/serve/test_serve_process.py."""

import sys
import time

from modeling_elmo.commands.elmo import main
from modeling_elmo.serve.runner import ModelRunner

FAILING_WORD, SLOW_WORD, SLOW_SECONDS = "FAIL", "SLOW", 3.0
forward = ModelRunner._forward


def injected_forward(self, jobs):
    if any(FAILING_WORD in job.words for job in jobs):
        raise RuntimeError("injected model failure")
    if any(SLOW_WORD in job.words for job in jobs):
        time.sleep(SLOW_SECONDS)
    return forward(self, jobs)


ModelRunner._forward = injected_forward
sys.exit(main(["serve", *sys.argv[1:]]))
