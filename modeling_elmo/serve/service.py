"""
`EmbeddingService`: what one server process (or Ray Serve replica) holds: the model (`ModelRunner`) on its own
thread, the batcher whose loop runs it there, the metrics, and whether the model is ready. The HTTP app
(`app.build_app`) is its only caller.
"""

from __future__ import annotations

import asyncio
import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from .batcher import Batcher
from .metrics import ServeMetrics
from .protocol import EmbeddingsRequest
from .runner import Job, ModelRunner
from .settings import ServeSettings

if TYPE_CHECKING:
    import numpy as np


class EmbeddingService:
    """The model, its thread, the batcher and the metrics of one server (`runner`: one made from `settings` when
    None)."""

    def __init__(self, settings: ServeSettings, runner: ModelRunner | None = None):
        self.settings = settings
        self.runner = runner or ModelRunner(
            settings.model,
            settings.device,
            settings.word_cache,
            settings.quantization,
            settings.max_batch_rows,
            settings.max_batch_words,
        )
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="elmo-model")
        self.batcher = Batcher(
            self.runner,
            self.executor,
            words_of=lambda job: len(job.words),
            request_of=lambda job: job.request,
            max_queued_inputs=settings.max_queue,
        )
        self.metrics = ServeMetrics(queued=lambda: self.batcher.queued, unanswered=lambda: self.batcher.unanswered)
        self.batcher.on_step = self.metrics.count_step
        self.ready = False
        self._requests = itertools.count()

    async def load(self) -> None:
        """Load and warm the model on its thread; ready after."""
        await asyncio.get_running_loop().run_in_executor(self.executor, self.runner.load)
        self.ready = True
        self.metrics.ready.set(1)

    async def embed(self, request: EmbeddingsRequest, kind: str) -> list[np.ndarray]:
        """Each input's result (`runner.SENTENCE` or `runner.WORDS`), through the batcher."""
        number = next(self._requests)
        return await self.batcher.submit([Job(words, kind, number) for words in request.words])

    async def close(self) -> None:
        """Stop the batcher and the model's thread (once every accepted request is answered)."""
        await self.batcher.close()
        self.executor.shutdown(wait=True)
