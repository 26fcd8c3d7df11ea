"""ELMo for flair users: `ELMoEmbeddings`, a drop-in replacement for flair's `flair.embeddings.ELMoEmbeddings` (which
needs AllenNLP, no longer installable). Needs the `flair` extra: `pip install -e '.[flair]'` in a checkout, or see
docs/install.md."""

from .embeddings import EMBEDDING_MODES, ELMoEmbeddings

__all__ = ["EMBEDDING_MODES", "ELMoEmbeddings"]
