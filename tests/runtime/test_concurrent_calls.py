"""Python threads calling one model at once get what they get one after the other (issue 41, item 4): `ElmoModel`'s
forward pass with the default implementation on the CPU, with the character-CNN word cache on and off, each output
compared bit for bit with the same batch's output computed alone."""

import pytest
import torch
from python_threads import at_once, caller_threads, frequent_thread_switches

from modeling_elmo import ElmoModel, ElmoTokenizer
from modeling_elmo.engine import tuned_call
from modeling_elmo.inference.batches import tuning_key
from modeling_elmo.word_embedding_store import WordEmbeddingStore, word_keys

THREADS = 4
CALLS = 3  # calls per thread and round, all at once
ROUNDS = 3  # each with a new, empty word cache
WORDS = ["the", "bank", "closed", "its", "doors", "river", "boats", "go", "by", "a", "café", "of", ","]


def thread_batches() -> list[list[list[str]]]:
    """Each thread's batch: the same sentences for every thread (issue 46: the threads share every word, so they
    meet in the word cache; a word's cached row is computed alongside the same words whichever thread computes it, so
    it is the same whatever order the threads run in; the sentence boundaries, which every batch has, come from a
    table, `boundaries_from_a_table`)."""
    sentences = [[f"{word}{copy}" for word in WORDS[start:] for copy in range(3)] for start in (0, 4, 9)]
    return [sentences for _ in range(THREADS)]


@pytest.fixture(scope="module")
def model_and_tokenizer(converted_fixture):
    return ElmoModel.from_pretrained(converted_fixture).eval(), ElmoTokenizer.from_pretrained(converted_fixture)


def _layers(model, encoded) -> torch.Tensor:
    with torch.inference_mode():
        return torch.stack(model(**encoded, output_hidden_states=True).hidden_states)


def boundaries_from_a_table(model) -> None:
    """The rows of `<S>` and `</S>` from a fixed token-embedding table, so that no batch's word cache computes them
    (alongside its own words: their last bits would depend on which thread came first)."""
    encoder = model.char_encoder
    boundaries = encoder.boundary_char_ids(torch.device("cpu"))
    encoder.token_embedding_table = table = WordEmbeddingStore()
    with torch.inference_mode():
        table.add(word_keys(boundaries), encoder(boundaries))


@pytest.fixture(autouse=True)
def thread_switches():
    with frequent_thread_switches():
        yield


@pytest.mark.parametrize("word_cache", [None, 256, 16], ids=["no-word-cache", "word-cache", "evicting-word-cache"])
def test_threads_calling_one_model_at_once_get_its_one_at_a_time_outputs(model_and_tokenizer, word_cache):
    model, tokenizer = model_and_tokenizer
    encoded = [
        tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt") for batch in thread_batches()
    ]
    encoded = [{key: batch[key] for key in ("input_ids", "attention_mask")} for batch in encoded]
    boundaries_from_a_table(model)
    model.set_word_cache(word_cache)
    alone = [_layers(model, batch) for batch in encoded]
    for _ in range(ROUNDS):
        model.set_word_cache(word_cache)  # new and empty: the threads fill it
        outputs = at_once(lambda index: [_layers(model, encoded[index]) for _ in range(CALLS)], THREADS)
        for thread, calls in enumerate(outputs):
            for output in calls:
                assert torch.equal(output, alone[thread]), f"thread {thread}"
    model.set_word_cache(None)
    model.char_encoder.token_embedding_table = None


@pytest.fixture
def two_caller_threads():
    with caller_threads(2) as count:
        yield count


def test_threads_through_the_thread_chooser_get_the_same_outputs_and_leave_the_count(
    model_and_tokenizer, two_caller_threads
):
    """`elmo-embed`'s way ("cpu_threads" and `tuned_call`, each setting torch's process-wide thread count for a
    call or a block of time steps) from several Python threads at once: the outputs of one call at a time, and the
    caller's count after (without one lock over setting, running and restoring, a thread restores the count another
    set)."""
    model, tokenizer = model_and_tokenizer
    encoded = [
        dict(tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt"))
        for batch in thread_batches()
    ]

    def tuned_layers(batch) -> torch.Tensor:
        with torch.inference_mode():
            compute = lambda: model(**batch, output_hidden_states=True)  # noqa: E731
            return torch.stack(tuned_call(compute, batch["attention_mask"], tuning_key(model)).hidden_states)

    model.set_implementation("cpu_threads")
    try:
        alone = [tuned_layers(batch) for batch in encoded]
        for _ in range(ROUNDS):
            outputs = at_once(lambda index: [tuned_layers(encoded[index]) for _ in range(CALLS)], THREADS)
            assert torch.get_num_threads() == two_caller_threads
            for thread, calls in enumerate(outputs):
                for output in calls:
                    assert torch.equal(output, alone[thread]), f"thread {thread}"
    finally:
        model.set_implementation(None)
