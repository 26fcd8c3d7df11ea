"""
The model side of the server: one `ModelRunner` per process (or Ray Serve replica) loads an ELMo folder or Hub id,
warms it, and computes batches of jobs on the one thread that owns the model (the batcher's executor).

A job is one input's words and what it is asked for: its sentence vector (`SENTENCE`: the mean of the top layer over
its words, what `SentenceTransformer(folder).encode` gives, L2-normalised), or its words' vectors of every layer
(`WORDS`: (num_layers, words, width), the character CNN first). A batch runs as one forward pass through the
inference core's `embed_batch` (`elmo-embed`'s too, with its thread choice, `engine.tuned_call`), with every layer
asked for only where a job of the batch needs them; the model keeps a word cache of its character CNN
(`--word-cache`). A sentence's values in a batch differ from the same sentence alone by a float32 step or two
(docs/serving.md).

A batch that fails is run again request by request, so that a failure (an exception, or values that are not finite)
fails only the request whose input caused it.
"""

from __future__ import annotations  # numpy and torch types in annotations: imported when the model loads

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    An ELMo model and its tokenizer, loaded by `load` (on the model's thread), and `compute`, which runs a batch.

    Args:
        model: a model folder or Hub id (the inference core's loader, `inference.pretrained`).
        device: a torch device name ("cpu", "cuda", "cuda:1").
        word_cache: words kept in the character CNN's cache (0: none).
        quantization: the biLM's weights quantized on loading (`quantization.methods.METHODS`; None: as saved).
    """

    def __init__(self, model: str, device: str = "cpu", word_cache: int = 20_000, quantization: str | None = None):
        self.model_id, self.device, self.word_cache = model, device, word_cache
        self.quantization = quantization
        self.tokenizer: Any = None
        self.model: Any = None

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
        """Load the model and tokenizer, set up the word cache, and run the warm-up texts (the first calls choose
        the engine's thread counts and products)."""
        import torch

        from ..inference.loading import load_model
        from ..word_embedding_store import WordEmbeddingCache

        self.tokenizer, self.model = load_model(
            self.model_id, torch.float32, torch.device(self.device), progress=False, quantization=self.quantization
        )
        if self.word_cache:
            self.model.char_encoder.word_cache = WordEmbeddingCache(self.word_cache)
        warm_up = [
            Job([word for word, _, _ in self.split_words(text)], kind, 0)
            for text in WARM_UP_TEXTS
            for kind in (SENTENCE, WORDS)
        ]
        for count in (1, len(warm_up)):
            self.compute(warm_up[:count])

    def compute(self, jobs: Sequence[Job]) -> list[np.ndarray | ModelFailure]:
        """Each job's result, in order: a (width,) unit vector for `SENTENCE`, a (num_layers, words, width) array
        for `WORDS`; where the batch fails, each request's jobs again on their own, a failing request's jobs getting
        its `ModelFailure`."""
        try:
            return self._forward(jobs)
        except Exception as error:  # the model's failure: anything can go wrong in a user's model
            requests = sorted({job.request for job in jobs})
            if len(requests) == 1:
                LOG.error("model failure on request %d: %s", requests[0], _one_line(error))
                return [ModelFailure(f"the model failed on this request ({type(error).__name__})")] * len(jobs)
        results: list[np.ndarray | ModelFailure | None] = [None] * len(jobs)
        for request in requests:
            positions = [position for position, job in enumerate(jobs) if job.request == request]
            for position, result in zip(positions, self.compute([jobs[p] for p in positions]), strict=True):
                results[position] = result
        return results

    def _forward(self, jobs: Sequence[Job]) -> list[np.ndarray]:
        import numpy as np

        from ..inference.batches import Batch, Sentence, embed_batch

        layers = "all" if any(job.kind == WORDS for job in jobs) else "top"
        batch = Batch(0, [Sentence(index, "", job.words) for index, job in enumerate(jobs)])
        arrays = embed_batch(self.model, self.tokenizer, batch, layers)  # index -> ([layers,] words, width)
        results = []
        for index, job in enumerate(jobs):
            values = arrays[index]
            if not np.isfinite(values).all():
                raise FloatingPointError("the model gave NaN or infinite values")
            if job.kind == WORDS:
                results.append(values)
            else:
                results.append(unit_vector((values[-1] if layers == "all" else values).mean(axis=0)))
        return results


def unit_vector(vector: np.ndarray) -> np.ndarray:
    """`vector` / its L2 norm (`torch.nn.functional.normalize`'s rule: a norm below 1e-12 counts as 1e-12)."""
    import numpy as np

    return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)


def _one_line(error: BaseException) -> str:
    from ..foundation.errors import one_line

    return f"{type(error).__name__}: {one_line(error, first=True)}"
