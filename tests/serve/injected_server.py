"""`elmo serve` with the model's trouble injected, as a broken or busy model would have it: admitting a sentence that
holds the word `FAIL` raises (the server must fail that request only and keep serving), and admitting one that holds
`SLOW` takes 3 s more (so that the requests sent meanwhile stay queued while a test looks at them).
tests/serve/test_serve_process.py."""

import sys
import time

from modeling_elmo.commands.elmo import main
from modeling_elmo.inference.step_scheduler import StepScheduler

FAILING_WORD, SLOW_WORD, SLOW_SECONDS = "FAIL", "SLOW", 3.0
token_embeddings = StepScheduler._token_embeddings


def injected_token_embeddings(self, sentences):
    words = {word for sentence in sentences for word in sentence.words}
    if FAILING_WORD in words:
        raise RuntimeError("injected model failure")
    if SLOW_WORD in words:
        time.sleep(SLOW_SECONDS)
    return token_embeddings(self, sentences)


StepScheduler._token_embeddings = injected_token_embeddings
sys.exit(main(["serve", *sys.argv[1:]]))
