"""LinearChainCrf against brute-force enumeration of every tag path on tiny cases."""

import itertools

import pytest
import torch

from modeling_elmo.crf import LinearChainCrf, bio_constraints

NUM_TAGS = 3


def _random_crf(seed: int, constraints=None) -> LinearChainCrf:
    torch.manual_seed(seed)
    crf = LinearChainCrf(NUM_TAGS, constraints)
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.normal_()
    return crf


def _brute_force_score(crf: LinearChainCrf, emissions: torch.Tensor, path: tuple[int, ...]) -> torch.Tensor:
    """Score of one path over the unmasked emissions (seq, tags), written from the definition."""
    score = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
    for position, tag in enumerate(path):
        score = score + emissions[position, tag]
        if position:
            score = score + crf.transitions[path[position - 1], tag]
    return score


def _all_paths(length: int, allowed=None):
    for path in itertools.product(range(NUM_TAGS), repeat=length):
        if allowed is None or allowed(path):
            yield path


# masks with right padding, left padding and a gap; the last row is empty
MASKS = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize("seed", [0, 1])
def test_log_partition_equals_enumeration(seed):
    crf = _random_crf(seed)
    emissions = torch.randn(len(MASKS), MASKS.shape[1], NUM_TAGS)
    log_z = crf.log_partition(emissions, MASKS)
    for row, mask in enumerate(MASKS):
        kept = emissions[row, mask]
        if len(kept) == 0:
            assert log_z[row].item() == 0.0
            continue
        scores = torch.stack([_brute_force_score(crf, kept, path) for path in _all_paths(len(kept))])
        torch.testing.assert_close(log_z[row], torch.logsumexp(scores, dim=0), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_viterbi_equals_brute_force_argmax(seed):
    crf = _random_crf(seed)
    emissions = torch.randn(len(MASKS), MASKS.shape[1], NUM_TAGS)
    decoded = crf.viterbi_decode(emissions, MASKS)
    for row, mask in enumerate(MASKS):
        kept = emissions[row, mask]
        assert decoded[row, ~mask].eq(0).all()
        if len(kept) == 0:
            continue
        best = max(_all_paths(len(kept)), key=lambda path: _brute_force_score(crf, kept, path).item())
        assert tuple(decoded[row, mask].tolist()) == best


def test_nll_of_full_and_partial_labels():
    crf = _random_crf(3)
    emissions = torch.randn(2, 4, NUM_TAGS)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    tags = torch.tensor([[2, 0, 1, -100], [1, -100, 0, 2]])
    nll = crf.neg_log_likelihood(emissions, tags, mask)

    full = torch.stack([_brute_force_score(crf, emissions[0, :3], path) for path in _all_paths(3)])
    expected_full = torch.logsumexp(full, 0) - _brute_force_score(crf, emissions[0, :3], (2, 0, 1))
    torch.testing.assert_close(nll[0], expected_full, atol=1e-5, rtol=1e-5)

    # an unlabelled (-100) word inside a sentence is marginalised: numerator sums over its tags
    every = torch.stack([_brute_force_score(crf, emissions[1], path) for path in _all_paths(4)])
    consistent = torch.stack(
        [
            _brute_force_score(crf, emissions[1], path)
            for path in _all_paths(4, lambda p: p[::2] == (1, 0) and p[3] == 2)
        ]
    )
    expected_partial = torch.logsumexp(every, 0) - torch.logsumexp(consistent, 0)
    torch.testing.assert_close(nll[1], expected_partial, atol=1e-5, rtol=1e-5)
    assert (nll > 0).all()


def test_bio_constraints_forbid_invalid_paths():
    labels = ["O", "B-PER", "I-PER"]
    allowed, allowed_start, allowed_end = bio_constraints(labels)
    assert allowed[0][2] is False and allowed[1][2] and allowed[2][2] and allowed_start == [True, True, False]
    crf = _random_crf(4, (allowed, allowed_start, allowed_end))
    emissions = torch.zeros(1, 4, NUM_TAGS)
    emissions[0, :, 2] = 5.0  # I-PER everywhere is the unconstrained favourite
    mask = torch.ones(1, 4, dtype=torch.bool)

    def valid(path):
        return path[0] != 2 and all(not (b == 2 and a == 0) for a, b in itertools.pairwise(path))

    best = max(_all_paths(4, valid), key=lambda path: _brute_force_score(crf, emissions[0], path).item())
    assert tuple(crf.viterbi_decode(emissions, mask)[0].tolist()) == best
    valid_scores = torch.stack([_brute_force_score(crf, emissions[0], path) for path in _all_paths(4, valid)])
    torch.testing.assert_close(
        crf.log_partition(emissions, mask)[0], torch.logsumexp(valid_scores, 0), atol=1e-3, rtol=0
    )


def test_nll_gradient_is_finite_and_training_lowers_it():
    crf = _random_crf(5)
    emissions = torch.randn(3, 5, NUM_TAGS, requires_grad=True)
    tags = torch.randint(0, NUM_TAGS, (3, 5))
    mask = torch.ones(3, 5, dtype=torch.bool)
    optimizer = torch.optim.SGD([emissions, *crf.parameters()], lr=0.5)
    first = crf.neg_log_likelihood(emissions, tags, mask).sum()
    for _ in range(20):
        optimizer.zero_grad()
        loss = crf.neg_log_likelihood(emissions, tags, mask).sum()
        loss.backward()
        assert torch.isfinite(emissions.grad).all()
        optimizer.step()
    assert loss.item() < 0.5 * first.item()
    assert torch.equal(crf.viterbi_decode(emissions, mask), tags)
