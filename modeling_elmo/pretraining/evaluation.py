"""Perplexity of an `ElmoForPreTraining` on held-out text, in the sentence-level protocol.

Each sentence `<S> w1 .. wn </S>` is run alone from zero LSTM states with the full softmax: the forward LM's top layer
at `<S> w1 .. wn` predicts `w1 .. wn </S>`, the backward LM's at `</S> wn .. w1` predicts `wn .. w1 <S>`;
out-of-vocabulary targets count as `<UNK>`. With `H_f` and `H_b` the mean cross-entropies of each direction over all
predictions of the corpus, `perplexity = exp((H_f + H_b) / 2)`, `perplexity_forward = exp(H_f)`,
`perplexity_backward = exp(H_b)`.

bilm-tf's own `test()` instead streams the sentences through windows with states carried from sentence to sentence
(`<S>` of one sentence follows the words of the previous one); its figures are lower than these, since every
sentence here starts from nothing.
"""

import math
from collections.abc import Iterator, Sequence
from itertools import islice
from os import PathLike

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from ..formats.corpus import iter_sentences
from ..formats.vocab import LmVocabulary
from ..modeling_elmo import ElmoForPreTraining
from ..tokenization_elmo import cached_char_ids, char_ids_tensor


def _batches(sentences: Iterator[list[str]], batch_size: int) -> Iterator[list[list[str]]]:
    """Consecutive groups of `batch_size` sentences, sorted by length within each group of 16 batches (less padding,
    the same result: every sentence runs alone)."""
    while block := list(islice(sentences, 16 * batch_size)):
        block.sort(key=len)
        for start in range(0, len(block), batch_size):
            yield block[start : start + batch_size]


def _encode(sentences: list[list[str]], vocab: LmVocabulary, width: int) -> dict[str, torch.Tensor]:
    """Character ids (batch, words, width), mask (batch, words) and vocabulary ids (batch, words) of a batch."""
    input_ids = char_ids_tensor(sentences, width, lambda word: cached_char_ids(word, width))
    mask = torch.zeros(input_ids.shape[:2], dtype=torch.long)
    labels = torch.zeros(input_ids.shape[:2], dtype=torch.long)
    for row, words in enumerate(sentences):
        mask[row, : len(words)] = 1
        labels[row, : len(words)] = torch.tensor(vocab.encode(words))
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


@torch.no_grad()
def evaluate_perplexity(
    model: ElmoForPreTraining,
    files: Sequence[PathLike],
    vocab: LmVocabulary,
    batch_size: int = 32,
    rank: int = 0,
    world_size: int = 1,
    progress: bool = True,
) -> dict[str, float]:
    """
    Sentence-level perplexities of `model` on `files` (see the module docstring). With `world_size > 1` each rank
    takes its share of the sentences and the sums are added over the initialised process group. Returns `perplexity`,
    `perplexity_forward`, `perplexity_backward`, `loss` (the mean of both cross-entropies), `num_sentences` and
    `num_predictions` (per direction).
    """
    if len(vocab) != model.config.lm_vocab_size:
        raise ValueError(f"The vocabulary has {len(vocab)} words, the model's softmax {model.config.lm_vocab_size}.")
    device = next(model.parameters()).device
    totals = torch.zeros(4, dtype=torch.float64)  # forward sum, backward sum, predictions, sentences
    was_training = model.training
    model.eval()
    try:
        sentences = iter_sentences(files, rank, world_size)
        for batch in tqdm(_batches(sentences, batch_size), desc="Perplexity", unit="batch", disable=not progress):
            inputs = {
                name: value.to(device)
                for name, value in _encode(batch, vocab, model.config.max_characters_per_token).items()
            }
            losses = model.sentence_negative_log_likelihoods(**inputs, bos=vocab.bos, eos=vocab.eos).double().cpu()
            totals += torch.tensor(
                [losses[0].sum(), losses[1].sum(), losses.shape[1], len(batch)], dtype=torch.float64
            )
    finally:
        model.train(was_training)
    if world_size > 1 and dist.is_available() and dist.is_initialized():
        reduced = totals.to(device)
        dist.all_reduce(reduced)
        totals = reduced.cpu()
    forward, backward = (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()
    return {
        "perplexity": math.exp(0.5 * (forward + backward)),
        "perplexity_forward": math.exp(forward),
        "perplexity_backward": math.exp(backward),
        "loss": 0.5 * (forward + backward),
        "num_sentences": int(totals[3]),
        "num_predictions": int(totals[2]),
    }
