"""
ELMoForManyLangs' (HIT-SCIR, `elmoformanylangs`) API on this project's `ElmoModel`: change the import line and keep
the code and its numbers.

    from modeling_elmo.elmoformanylangs import Embedder   # was: from elmoformanylangs import Embedder

    embedder = Embedder("zhs.model")                      # an ELMoForManyLangs folder, a converted one or a Hub id
    vectors = embedder.sents2elmo([["今天", "天气", "真好"]])  # one float32 (3, 1024) array per sentence

Every sentence starts from zero LSTM states unless `Embedder(..., stateful=True)`. See
docs/migrate-elmoformanylangs.md.
"""

from .embedder import Embedder, EmbedderModel, SentenceInputError, efml_batches

__all__ = ["Embedder", "EmbedderModel", "SentenceInputError", "efml_batches"]
