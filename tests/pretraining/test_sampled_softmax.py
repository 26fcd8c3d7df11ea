"""Sampled softmax against an independent NumPy transcription of TensorFlow's `sampled_softmax_loss`, the full
softmax, statistics of the log-uniform sampler, gradients and argument checks."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from modeling_elmo.sampled_softmax import LogUniformSampler, sampled_softmax_loss

FLT_MAX = float(np.finfo(np.float32).max)


def tf_log_uniform_probability(ids: np.ndarray, range_max: int) -> np.ndarray:
    """`LogUniformSampler::Probability` (tensorflow/core/kernels/range_sampler.cc)."""
    return (np.log(ids + 2.0) - np.log(ids + 1.0)) / np.log(range_max + 1.0)


def tf_expected_count(ids: np.ndarray, range_max: int, num_sampled: int, num_tries: int) -> np.ndarray:
    """`ExpectedCountHelper` (range_sampler.cc), with its shortcut when no draw was repeated."""
    p = tf_log_uniform_probability(ids, range_max)
    if num_tries == num_sampled:
        return p * num_sampled
    return 1.0 - (1.0 - p) ** num_tries


def tf_sampled_softmax_loss(w, b, x, labels, sampled, num_tries) -> np.ndarray:
    """`_compute_sampled_logits(subtract_log_q=True, remove_accidental_hits=True)` + softmax cross-entropy, float64."""
    num_classes, num_sampled = w.shape[0], len(sampled)
    true_logits = (x * w[labels]).sum(axis=1, keepdims=True) + b[labels][:, None]  # (N, 1)
    sampled_logits = x @ w[sampled].T + b[sampled]  # (N, S)
    sampled_logits = sampled_logits + np.where(labels[:, None] == sampled[None, :], -FLT_MAX, 0.0)
    true_logits = true_logits - np.log(tf_expected_count(labels, num_classes, num_sampled, num_tries))[:, None]
    sampled_logits = sampled_logits - np.log(tf_expected_count(sampled, num_classes, num_sampled, num_tries))
    logits = np.concatenate([true_logits, sampled_logits], axis=1)
    targets = np.zeros_like(logits)
    targets[:, 0] = 1.0
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -(targets * log_softmax).sum(axis=1)


def random_problem(seed: int, num_classes: int = 50, dim: int = 8, batch: int = 16, num_sampled: int = 12):
    """Weights, inputs, labels and distinct sampled ids that contain several labels (accidental hits)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0.0, 0.5, (num_classes, dim))
    b = rng.normal(0.0, 0.5, num_classes)
    x = rng.normal(0.0, 1.0, (batch, dim))
    labels = rng.integers(0, num_classes, batch)
    others = rng.permutation(np.setdiff1d(np.arange(num_classes), labels[:4]))[: num_sampled - 4]
    sampled = rng.permutation(np.concatenate([labels[:4], others]))
    return w, b, x, labels, sampled


def torch_loss(w, b, x, labels, sampled, num_tries, dtype):
    sampler = LogUniformSampler(w.shape[0])
    labels, sampled = torch.from_numpy(labels), torch.from_numpy(sampled)
    true_count = sampler.expected_count(labels, num_tries, num_sampled=len(sampled))
    sampled_count = sampler.expected_count(sampled, num_tries, num_sampled=len(sampled))
    tensors = [torch.tensor(a, dtype=dtype) for a in (w, b, x)]
    return sampled_softmax_loss(*tensors, labels, sampled, true_count, sampled_count)


@pytest.mark.parametrize("num_tries", [12, 40])  # 12 == num_sampled: TensorFlow's p * num_sampled shortcut
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_numpy_transcription_of_tensorflow(seed, num_tries):
    w, b, x, labels, sampled = random_problem(seed)
    hits = labels[:, None] == sampled[None, :]
    assert hits.any() and not hits.all(axis=1).any()
    expected = tf_sampled_softmax_loss(w, b, x, labels, sampled, num_tries)
    # float32 model against float64 reference: losses are ~3, float32 round-off ~3e-7 per operation
    np.testing.assert_allclose(
        torch_loss(w, b, x, labels, sampled, num_tries, torch.float32).numpy(), expected, atol=1e-6
    )
    # the float64 path differs only by the expected counts, which are float32 as in TensorFlow
    loss64 = torch_loss(w, b, x, labels, sampled, num_tries, torch.float64).numpy()
    np.testing.assert_allclose(loss64, expected, rtol=0, atol=1e-6)


def test_accidental_hits_change_the_loss():
    w, b, x, labels, sampled = random_problem(3)
    loss = torch_loss(w, b, x, labels, sampled, 40, torch.float64)
    hit_rows = torch.from_numpy((labels[:, None] == sampled[None, :]).any(axis=1))
    # the same problem with the sampled logits of the hits kept (TensorFlow's remove_accidental_hits=False)
    sampler = LogUniformSampler(len(w))
    w_t, b_t, x_t = (torch.from_numpy(a) for a in (w, b, x))
    lab, smp = torch.from_numpy(labels), torch.from_numpy(sampled)
    logits = torch.cat(
        [
            ((x_t * w_t[lab]).sum(1) + b_t[lab] - sampler.expected_count(lab, 40).double().log()).unsqueeze(1),
            x_t @ w_t[smp].T + b_t[smp] - sampler.expected_count(smp, 40).double().log(),
        ],
        dim=1,
    )
    kept = F.cross_entropy(logits, torch.zeros(len(labels), dtype=torch.long), reduction="none")
    assert torch.allclose(loss[~hit_rows], kept[~hit_rows], atol=1e-12)
    assert (kept[hit_rows] - loss[hit_rows]).min() > 1e-4 and (kept - loss).max() > 0.1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_classes_sampled_equals_full_softmax(dtype):
    generator = torch.Generator().manual_seed(0)
    num_classes, dim, batch = 30, 6, 40
    weight = torch.randn(num_classes, dim, generator=generator, dtype=dtype)
    bias = torch.randn(num_classes, generator=generator, dtype=dtype)
    inputs = torch.randn(batch, dim, generator=generator, dtype=dtype)
    labels = torch.randint(0, num_classes, (batch,), generator=generator)
    sampled = torch.randperm(num_classes, generator=generator)  # every label is an accidental hit
    ones_true, ones_sampled = torch.ones(batch), torch.ones(num_classes)
    loss = sampled_softmax_loss(weight, bias, inputs, labels, sampled, ones_true, ones_sampled)
    logits = inputs @ weight.T + bias
    full = F.cross_entropy(logits, labels, reduction="none")
    # float32: relative 1e-6 (~8 ulps; the losses reach 13, where one ulp is ~1e-6); float64: absolute 1e-12
    tolerance = dict(rtol=1e-6, atol=0.0) if dtype == torch.float32 else dict(rtol=0.0, atol=1e-12)
    torch.testing.assert_close(loss, full, **tolerance)
    # without removing the hits, the true class would be counted twice in the normaliser
    true_logits = logits.gather(1, labels.unsqueeze(1)).squeeze(1)
    doubled = torch.logaddexp(torch.logsumexp(logits, 1), true_logits) - true_logits
    assert (doubled - full).max() > 0.1


def test_gradcheck():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(10, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    bias = torch.randn(10, dtype=torch.float64, generator=generator, requires_grad=True)
    inputs = torch.randn(5, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    labels = torch.tensor([0, 3, 3, 7, 9])
    sampled = torch.tensor([3, 1, 0, 5, 8, 2])  # hits in rows 0, 1, 2
    sampler = LogUniformSampler(10)
    true_count, sampled_count = sampler.expected_count(labels, 9), sampler.expected_count(sampled, 9)

    def loss(w, b, x):
        return sampled_softmax_loss(w, b, x, labels, sampled, true_count, sampled_count)

    assert torch.autograd.gradcheck(loss, (weight, bias, inputs))
    loss(weight, bias, inputs).sum().backward()
    assert weight.grad[[4, 6]].abs().max() == 0  # neither a label nor sampled


@pytest.mark.parametrize(("range_max", "num_sampled"), [(100_000, 8192), (300, 250), (10, 10), (1, 1)])
def test_sample_matches_first_occurrences_of_the_draws(range_max, num_sampled):
    sampler = LogUniformSampler(range_max)
    ids, num_tries = sampler.sample(num_sampled, generator=torch.Generator().manual_seed(7))
    assert ids.dtype == torch.long and ids.shape == (num_sampled,)
    assert len(torch.unique(ids)) == num_sampled and 0 <= ids.min() and ids.max() < range_max
    assert num_tries >= num_sampled
    # Replay: the draws come from torch.rand float64 in chunks, and the CPU generator's stream does not depend on
    # the chunk sizes. Independent transcription of TensorFlow's Sample() and of its unique loop.
    uniform = torch.rand(1 << 20, dtype=torch.float64, generator=torch.Generator().manual_seed(7)).numpy()
    draws = (np.floor(np.exp(uniform * np.log(range_max + 1.0))).astype(np.int64) - 1) % range_max
    seen, expected = set(), []
    tries = 0
    for value in draws:
        tries += 1
        if value not in seen:
            seen.add(value)
            expected.append(value)
            if len(expected) == num_sampled:
                break
    assert ids.tolist() == expected and num_tries == tries


def test_sample_is_reproducible_and_checks_device():
    sampler = LogUniformSampler(1000)
    first = sampler.sample(100, generator=torch.Generator().manual_seed(1), device="cpu")
    second = sampler.sample(100, generator=torch.Generator().manual_seed(1))
    assert torch.equal(first[0], second[0]) and first[1] == second[1]
    assert not torch.equal(first[0], sampler.sample(100, generator=torch.Generator().manual_seed(2))[0])


def test_raw_draws_follow_log_uniform_distribution():
    range_max, num_draws = 100_000, 1_000_000
    sampler = LogUniformSampler(range_max)
    draws = sampler._draw(num_draws, torch.Generator().manual_seed(0), torch.device("cpu")).numpy()
    # bins [0], [1], [2, 4), [4, 8), ... : probability mass from the telescoping sum of P(k)
    edges = np.array([0, 1, 2] + [2**i for i in range(2, 17)] + [range_max])
    counts = np.histogram(draws, bins=edges)[0]
    mass = np.log((edges[1:] + 1.0) / (edges[:-1] + 1.0)) / np.log(range_max + 1.0)
    expected = mass * num_draws
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 17 degrees of freedom: mean 17, sd sqrt(34) ~ 5.8; 60 is beyond 7 sd (p < 1e-6). A uniform sampler gives ~1e7.
    assert chi2 < 60, chi2


def test_first_draws_and_inclusion_frequencies_follow_expected_counts():
    range_max, num_sampled, repetitions = 20, 5, 10_000
    sampler = LogUniformSampler(range_max)
    generator = torch.Generator().manual_seed(0)
    all_ids = np.arange(range_max)
    first_counts, included, mean_expected = np.zeros(range_max), np.zeros(range_max), np.zeros(range_max)
    for _ in range(repetitions):
        ids, num_tries = sampler.sample(num_sampled, generator=generator)
        first_counts[ids[0]] += 1
        included[ids.numpy()] += 1
        mean_expected += tf_expected_count(all_ids, range_max, num_sampled, num_tries)
    p = tf_log_uniform_probability(all_ids, range_max)
    # The first draw of every sample is a plain draw from P: chi-square with 19 degrees of freedom (mean 19,
    # sd ~6.2); 70 is beyond 8 sd.
    chi2 = ((first_counts - repetitions * p) ** 2 / (repetitions * p)).sum()
    assert chi2 < 70, chi2
    # TensorFlow's expected count assumes "(falsely)" that num_tries is fixed, so it is only an approximation of the
    # inclusion probability: measured with 10^6 samples, it overestimates by 0.16 for id 0, 0.05 for id 1, 0.02 for
    # id 2 and < 0.012 beyond. Monte-Carlo sd <= 0.005 here, so 0.045 for ids >= 2 is 5 sd beyond the bias.
    # (TensorFlow's p * num_sampled shortcut, used wrongly, would give 1.14 for id 0.)
    gap = mean_expected / repetitions - included / repetitions
    assert np.all(np.abs(gap[2:]) < 0.045), gap
    assert np.all(np.abs(gap[:2]) < 0.2), gap


def test_expected_count_formula():
    range_max, num_tries = 20, 9
    sampler = LogUniformSampler(range_max)
    ids = torch.arange(range_max)
    p = tf_log_uniform_probability(ids.numpy(), range_max)
    np.testing.assert_allclose(sampler.probabilities(ids).numpy(), p, rtol=1e-6)
    counts = sampler.expected_count(ids, num_tries)
    assert counts.dtype == torch.float32
    np.testing.assert_allclose(counts.numpy(), tf_expected_count(ids.numpy(), range_max, 5, num_tries), rtol=1e-6)
    shortcut = sampler.expected_count(ids, 5, num_sampled=5)
    np.testing.assert_allclose(shortcut.numpy(), p * 5, rtol=1e-6)
    # meaning: the probability that an id appears in num_tries independent draws from P (Monte Carlo, numpy)
    rng = np.random.default_rng(0)
    repetitions = 40_000
    draws = rng.choice(range_max, size=(repetitions, num_tries), p=p / p.sum())
    frequency = (draws[:, :, None] == ids.numpy()).any(axis=1).mean(axis=0)
    # sd <= 0.5 / sqrt(40000) = 0.0025; 0.0125 is 5 sd
    np.testing.assert_allclose(frequency, counts.numpy(), atol=0.0125)


def test_sampler_argument_errors():
    with pytest.raises(ValueError, match="range_max"):
        LogUniformSampler(0)
    with pytest.raises(TypeError, match="range_max"):
        LogUniformSampler(2.5)
    sampler = LogUniformSampler(10)
    with pytest.raises(ValueError, match="num_sampled"):
        sampler.sample(11)
    with pytest.raises(ValueError, match="num_sampled"):
        sampler.sample(0)
    with pytest.raises(TypeError, match="num_sampled"):
        sampler.sample(torch.tensor(3))
    with pytest.raises(TypeError, match="ids"):
        sampler.probabilities(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="num_tries"):
        sampler.expected_count(torch.tensor([1]), 0)


def test_loss_argument_errors():
    weight, bias, inputs = torch.zeros(10, 4), torch.zeros(10), torch.zeros(3, 4)
    labels, sampled = torch.tensor([1, 2, 3]), torch.tensor([4, 5])
    true_count, sampled_count = torch.ones(3), torch.ones(2)
    good = dict(
        weight=weight,
        bias=bias,
        inputs=inputs,
        labels=labels,
        sampled=sampled,
        true_expected_count=true_count,
        sampled_expected_count=sampled_count,
    )
    assert sampled_softmax_loss(**good).shape == (3,)
    bad = [
        ("weight", torch.zeros(10), ValueError),
        ("weight", torch.zeros(10, 4, dtype=torch.long), TypeError),
        ("bias", torch.zeros(9), ValueError),
        ("bias", torch.zeros(10, dtype=torch.float64), TypeError),
        ("inputs", torch.zeros(3, 5), ValueError),
        ("inputs", [[0.0] * 4] * 3, TypeError),
        ("labels", torch.tensor([1, 2]), ValueError),
        ("labels", torch.tensor([1.0, 2.0, 3.0]), TypeError),
        ("sampled", torch.tensor([[4, 5]]), ValueError),
        ("sampled", torch.tensor([True, False]), TypeError),
        ("true_expected_count", torch.ones(2), ValueError),
        ("sampled_expected_count", torch.ones(3), ValueError),
        ("sampled_expected_count", torch.ones(2, dtype=torch.long), TypeError),
    ]
    for name, value, error in bad:
        with pytest.raises(error, match=name):
            sampled_softmax_loss(**{**good, name: value})


def test_sample_is_fast_for_bilm_sizes():
    # bilm-tf's defaults: 8192 negatives from a 793,471 word vocabulary; must not take seconds (a few ms measured)
    sampler = LogUniformSampler(793_471)
    ids, num_tries = sampler.sample(8192, generator=torch.Generator().manual_seed(0))
    assert len(torch.unique(ids)) == 8192 and num_tries > 8192
    assert math.isfinite(sampler.expected_count(ids, num_tries).log().sum().item())
