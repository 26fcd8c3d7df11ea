"""The word stores of `word_embedding_store` on their own: the word cache empties itself when the weights it was
filled from change, and `stored_or_computed` takes rows from the table first, then the cache, and computes the rest."""

import torch

from modeling_elmo.word_embedding_store import WordEmbeddingCache, WordEmbeddingStore, stored_or_computed, word_keys


def test_word_cache_is_emptied_when_its_weights_change():
    weights = [torch.ones(3), torch.zeros(2, 2)]
    cache = WordEmbeddingCache(capacity=4)
    cache.forget_if_changed(weights)
    cache.add([b"a", b"b"], torch.ones(2, 5))
    cache.forget_if_changed(weights)
    assert len(cache) == 2  # the same values: kept
    weights[1].data[0, 0] = 1.0  # no trace in autograd's version counter
    cache.forget_if_changed(weights)
    assert len(cache) == 0
    cache.add([b"a"], torch.ones(1, 5))
    cache.forget_if_changed([weights[0], weights[1].clone()])  # new tensors of equal values
    assert len(cache) == 1


def test_stored_or_computed_looks_up_the_table_then_the_cache_then_computes():
    char_ids = torch.arange(12).view(4, 3)  # four distinct words
    keys = word_keys(char_ids)
    table = WordEmbeddingStore()
    table.add([keys[0]], torch.full((1, 2), 10.0, dtype=torch.float64))
    cache = WordEmbeddingCache(capacity=8)
    cache.add([keys[0], keys[2]], torch.tensor([[-1.0, -1.0], [20.0, 20.0]]))
    computed = []

    def compute(words: torch.Tensor) -> torch.Tensor:
        computed.append(words)
        return words[:, :2].float()

    like = torch.zeros(2)
    embeddings = stored_or_computed(char_ids, compute, like, table, cache)
    assert embeddings.dtype == torch.float32
    expected = torch.tensor([[10.0, 10.0], [3.0, 4.0], [20.0, 20.0], [9.0, 10.0]])
    torch.testing.assert_close(embeddings, expected, rtol=0, atol=0)
    assert torch.equal(torch.cat(computed), char_ids[[1, 3]])  # only the words found nowhere
    assert len(cache) == 4  # and the cache keeps them
    computed.clear()
    torch.testing.assert_close(stored_or_computed(char_ids, compute, like, table, cache), expected, rtol=0, atol=0)
    assert not computed
    assert torch.equal(stored_or_computed(char_ids, compute, like, None, None), char_ids[:, :2].float())
