"""
The model side of the server: one `ModelRunner` per process (or Ray Serve replica) loads an ELMo folder or Hub id,
warms it, and runs its inputs batched at the time step (`inference.step_scheduler.StepScheduler`) on the one thread
that owns the model (the batcher's loop, `batcher.StepModel`).

A job is one input's words and what it is asked for: its sentence vector (`SENTENCE`: the mean of the top layer over
its words, what `SentenceTransformer(folder).encode` gives, L2-normalised), or its words' vectors of every layer
(`WORDS`: (num_layers, words, width), the character CNN first). Each input runs as its own rows, joining and leaving
the running ones at any time step, and its values equal that input alone within float32 rounding (docs/serving.md);
the model keeps a word cache of its character CNN (`--word-cache`).

An input that fails (an exception the scheduler saw it cause alone, or values that are not finite) gets a
`ModelFailure`; the rest of its request is dropped by the batcher.
"""

from __future__ import annotations  # numpy and torch types in annotations: imported when the model loads

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .batcher import StepReport

if TYPE_CHECKING:
    import numpy as np

SENTENCE, WORDS = "sentence", "words"
WARM_UP_TEXTS = ("The bank closed its doors .", "ELMo reads every word with a character CNN , then a biLM .")
LOG = logging.getLogger("modeling_elmo.serve")


@dataclass(frozen=True)
class Job:
    """One input of one request: its `words`, what is asked (`SENTENCE` or `WORDS`) and the request it belongs to."""

    words: list[str]
    kind: str
    request: int


class ModelFailure(RuntimeError):
    """The model failed on a request's inputs (its message is one line, without the inputs' text)."""


class ModelRunner:
    """
    An ELMo model, its tokenizer and its `StepScheduler`, loaded by `load`, and the batcher's `StepModel` over them
    (`add`, `cancel`, `step`, `reset`), all on the model's thread.

    Args:
        model: a model folder or Hub id (the inference core's loader, `inference.pretrained`).
        device: a torch device name ("cpu", "cuda", "cuda:1").
        word_cache: words kept in the character CNN's cache (0: none).
        quantization: the biLM's weights quantized on loading (`quantization.methods.METHODS`; None: as saved).
        max_rows, max_words: the scheduler's budget, inputs and words running at once (`StepScheduler`).
    """

    def __init__(
        self,
        model: str,
        device: str = "cpu",
        word_cache: int = 20_000,
        quantization: str | None = None,
        max_rows: int = 64,
        max_words: int = 4096,
    ):
        self.model_id, self.device, self.word_cache = model, device, word_cache
        self.quantization, self.max_rows, self.max_words = quantization, max_rows, max_words
        self.tokenizer: Any = None
        self.model: Any = None
        self.scheduler: Any = None
        self._jobs: dict[Hashable, Job] = {}  # the jobs on the scheduler, by key

    @property
    def num_layers(self) -> int:
        """Layers of a word's vectors: the character CNN's, then each biLM layer's."""
        return self.model.config.num_hidden_layers + 1

    @property
    def width(self) -> int:
        return self.model.config.hidden_size

    def split_words(self, text: str) -> list[tuple[str, int, int]]:
        """`text`'s words with their character offsets, as the tokenizer splits raw text."""
        return self.tokenizer.split_words(text)

    def load(self) -> None:
        """Load the model and tokenizer, set up the word cache and the scheduler, and run the warm-up texts alone
        and together (the first steps choose the engine's products)."""
        import torch

        from ..inference.loading import load_model
        from ..inference.step_scheduler import StepScheduler
        from ..word_embedding_store import WordEmbeddingCache

        self.tokenizer, self.model = load_model(
            self.model_id, torch.float32, torch.device(self.device), progress=False, quantization=self.quantization
        )
        if self.word_cache:
            self.model.char_encoder.word_cache = WordEmbeddingCache(self.word_cache)
        self.scheduler = StepScheduler(self.model, self.tokenizer, self.max_rows, self.max_words)
        warm_up = [
            Job([word for word, _, _ in self.split_words(text)], kind, 0)
            for text in WARM_UP_TEXTS
            for kind in (SENTENCE, WORDS)
        ]
        for count in (1, len(warm_up)):
            for key, job in enumerate(warm_up[:count]):
                self.add(key, job)
            while self.busy:
                for key, result in self.step().finished:
                    if isinstance(result, ModelFailure):
                        raise RuntimeError(f"the model failed on the warm-up text {key}: {result}")

    @property
    def busy(self) -> bool:
        return self.scheduler.busy

    def add(self, key: Hashable, job: Job) -> None:
        """Queue `job`; its result comes back from `step` under `key`."""
        self._jobs[key] = job
        self.scheduler.add(key, job.words, job.request, "all" if job.kind == WORDS else "top")

    def cancel(self, request: int) -> None:
        """Drop `request`'s jobs (no result comes back for them)."""
        self.scheduler.cancel(request)
        for key in [key for key, job in self._jobs.items() if job.request == request]:
            del self._jobs[key]

    def reset(self) -> list[Hashable]:
        """Drop every job; their keys."""
        self._jobs.clear()
        return self.scheduler.reset()

    def step(self) -> StepReport:
        """One time step of the scheduler; each finished job's result: a (width,) unit vector for `SENTENCE`, a
        (num_layers, words, width) array for `WORDS`, or its `ModelFailure`."""
        finished = [(key, self._result(self._jobs.pop(key), values)) for key, values in self.scheduler.step()]
        return StepReport(self.scheduler.rows, finished)

    def _result(self, job: Job, values: np.ndarray | Exception) -> np.ndarray | ModelFailure:
        import numpy as np

        if isinstance(values, Exception):
            LOG.error("model failure on request %d: %s", job.request, _one_line(values))
            return ModelFailure(f"the model failed on this request ({type(values).__name__})")
        if not np.isfinite(values).all():
            LOG.error("model failure on request %d: the model gave NaN or infinite values", job.request)
            return ModelFailure("the model failed on this request (FloatingPointError)")
        return values if job.kind == WORDS else unit_vector(values.mean(axis=0))


def unit_vector(vector: np.ndarray) -> np.ndarray:
    """`vector` / its L2 norm (`torch.nn.functional.normalize`'s rule: a norm below 1e-12 counts as 1e-12)."""
    import numpy as np

    return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)


def _one_line(error: BaseException) -> str:
    from ..foundation.errors import one_line

    return f"{type(error).__name__}: {one_line(error, first=True)}"
