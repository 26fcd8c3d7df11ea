"""The L-BFGS fit of `elmo-train-classifier --head_fit lbfgs` against independent computations: the closed-form
gradient of the penalised objective vanishes at the solution, scikit-learn's `LogisticRegression` finds the same
model, and the pick of C on held-out training rows refits on all of them."""

import numpy as np
import pytest
import torch

from modeling_elmo.classification.head_fit import (
    STRENGTHS,
    fit_head,
    fit_logistic_regression,
    standardise,
)


def _blobs(num_labels: int, rows: int = 150, size: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Overlapping Gaussian classes (not separable: the penalty matters), float64 features (rows, size)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(rows) % num_labels
    centres = torch.randn(num_labels, size, generator=generator, dtype=torch.float64)
    return centres[labels] + 1.5 * torch.randn(rows, size, generator=generator, dtype=torch.float64), labels


@pytest.mark.parametrize("strength", [0.01, 1.0])
def test_the_binary_fit_zeroes_the_closed_form_gradient(strength):
    """Binary logistic regression: gradient (1/n) sum (sigmoid(s) - y) z + w / (C n), and the sum of the residuals
    for the bias, written out in NumPy."""
    features, labels = _blobs(2)
    parameters = fit_logistic_regression(features, labels, 2, strength).numpy()
    assert parameters.shape == (1, features.shape[1] + 1)
    z, y, n = features.numpy(), labels.numpy(), len(labels)
    residual = 1 / (1 + np.exp(-(z @ parameters[0, :-1] + parameters[0, -1]))) - y
    gradient = z.T @ residual / n + parameters[0, :-1] / (strength * n)
    assert np.abs(gradient).max() < 1e-6 and abs(residual.mean()) < 1e-6
    assert np.abs(parameters).max() > 0.1  # not the zero start


@pytest.mark.parametrize(("num_labels", "strength"), [(2, 0.01), (2, 1.0), (3, 0.1)])
def test_the_fit_is_scikit_learns_logistic_regression(num_labels, strength):
    linear_model = pytest.importorskip("sklearn.linear_model")
    features, labels = _blobs(num_labels)
    parameters = fit_logistic_regression(features, labels, num_labels, strength)
    reference = linear_model.LogisticRegression(C=strength, tol=1e-10, max_iter=10_000)
    reference.fit(features.numpy(), labels.numpy())
    weights = parameters[:, :-1].numpy()
    if num_labels == 2:
        np.testing.assert_allclose(weights, reference.coef_, atol=1e-5)
        np.testing.assert_allclose(parameters[:, -1].numpy(), reference.intercept_, atol=1e-5)
    else:  # the biases are unpenalised: only the probabilities (and the penalised weights) are unique
        np.testing.assert_allclose(weights, reference.coef_, atol=1e-5)
        probabilities = torch.softmax(features @ parameters[:, :-1].T + parameters[:, -1], dim=-1)
        np.testing.assert_allclose(probabilities.numpy(), reference.predict_proba(features.numpy()), atol=1e-6)


def test_the_head_standardises_as_the_batch_norm_and_writes_two_rows_for_two_classes():
    features, labels = _blobs(2)
    features = 3 * features + 5
    result = fit_head(features, labels, 2, eps=1e-5, pick=_blobs(2, seed=1))
    norm = torch.nn.BatchNorm1d(features.shape[1], affine=False, dtype=torch.float64).eval()
    norm.running_mean.copy_(result.head.mean)
    norm.running_var.copy_(result.head.variance)
    linear = torch.nn.functional.linear(norm(features), result.head.weight, result.head.bias)
    torch.testing.assert_close(result.head.logits(features), linear)
    assert result.head.weight.shape == (2, features.shape[1])
    torch.testing.assert_close(result.head.weight[0], -result.head.weight[1])
    assert result.picked_on == "the validation split" and list(result.accuracies) == list(STRENGTHS)


def test_without_a_validation_split_c_is_picked_on_held_out_rows_then_refitted_on_all():
    features, labels = _blobs(3, rows=200)
    result = fit_head(features, labels, 3, eps=1e-5, seed=7)
    assert result.picked_on == "20 training texts held out (seed 7)"
    assert result.strength == max(STRENGTHS, key=lambda strength: (result.accuracies[strength], -strength))
    mean, variance = features.mean(dim=0), features.var(dim=0, unbiased=False)
    refitted = fit_logistic_regression(standardise(features, mean, variance, 1e-5), labels, 3, result.strength)
    torch.testing.assert_close(result.head.weight, refitted[:, :-1], atol=1e-5, rtol=0)
    torch.testing.assert_close(result.head.mean, mean)
    again = fit_head(features, labels, 3, eps=1e-5, seed=8)
    assert again.picked_on.endswith("(seed 8)") and again.accuracies != result.accuracies  # another held-out part
