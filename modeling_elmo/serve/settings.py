"""What one server is set to serve and how (`elmo serve`'s flags; the Ray Serve deployment's arguments). Standard
library only: the command line is checked before torch is imported."""

from dataclasses import dataclass, field
from pathlib import Path, PurePath

from .protocol import Limits

# measured on the fixture and on 'original' shapes (benchmarks/bench_serve.py, docs/serving.md)
DEFAULT_MAX_BATCH_ROWS = 64
DEFAULT_MAX_BATCH_WORDS = 4096  # 'original': its inputs' gate products take 128 KiB per word, 0.5 GiB in all
DEFAULT_MAX_QUEUE = 4096
DEFAULT_WORD_CACHE = 20_000  # as elmo-embed's


@dataclass(frozen=True)
class ServeSettings:
    """
    model: the folder or Hub id served; served_model_name: the `model` of the responses (default: the folder's name
    or the Hub id); device: a torch device; word_cache: words in the character CNN's cache; max_batch_rows,
    max_batch_words: inputs and their words running on the model at once (`inference.step_scheduler`); max_queue:
    inputs queued or running before 429; limits: the per-request size limits (413); quantization: the biLM's weights
    quantized on loading (a method of `quantization.methods.METHODS`, CPU only; None: as the folder is saved).
    """

    model: str
    served_model_name: str | None = None
    device: str = "cpu"
    word_cache: int = DEFAULT_WORD_CACHE
    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS
    max_batch_words: int = DEFAULT_MAX_BATCH_WORDS
    max_queue: int = DEFAULT_MAX_QUEUE
    limits: Limits = field(default_factory=Limits)
    quantization: str | None = None

    @property
    def model_name(self) -> str:
        """The name the responses give (never a local path: a folder answers with its own name)."""
        if self.served_model_name:
            return self.served_model_name
        return self.model if _is_hub_id(self.model) else PurePath(self.model.rstrip("/")).name or self.model


def _is_hub_id(model: str) -> bool:
    return not Path(model).expanduser().exists() and model.count("/") == 1
