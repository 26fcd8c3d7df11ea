"""Sentence-classification scores in NumPy, for `Trainer(compute_metrics=...)`: accuracy, plus F1 of the positive
class (id 1) for two classes or macro-F1 (unweighted mean over classes) for more; MSE and MAE for regression."""

from collections.abc import Callable

import numpy as np
from transformers import EvalPrediction


def f1_per_class(predicted: np.ndarray, gold: np.ndarray, num_labels: int) -> np.ndarray:
    """(num_labels,) F1 of each class from (n,) predicted and gold class ids; 0 for a class never predicted nor
    present (no division by zero)."""
    scores = np.zeros(num_labels)
    for label in range(num_labels):
        true_positives = np.sum((predicted == label) & (gold == label))
        predicted_or_gold = np.sum(predicted == label) + np.sum(gold == label)
        scores[label] = 2 * true_positives / predicted_or_gold if predicted_or_gold else 0.0
    return scores


def classification_scores(predicted: np.ndarray, gold: np.ndarray, num_labels: int) -> dict[str, float]:
    """`accuracy`, and `f1` (class 1 positive) for `num_labels == 2` or `macro_f1` for more."""
    scores = {"accuracy": float(np.mean(predicted == gold))}
    per_class = f1_per_class(predicted, gold, num_labels)
    if num_labels == 2:
        scores["f1"] = float(per_class[1])
    elif num_labels > 2:
        scores["macro_f1"] = float(per_class.mean())
    return scores


def regression_scores(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Mean squared and mean absolute error of (n,) predictions."""
    error = predicted.astype(np.float64) - gold.astype(np.float64)
    return {"mse": float(np.mean(error**2)), "mae": float(np.mean(np.abs(error)))}


def build_compute_metrics(num_labels: int) -> Callable[[EvalPrediction], dict[str, float]]:
    """A `compute_metrics` over the logits (n, num_labels); `num_labels == 1` scores a regression."""

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        logits, gold = np.asarray(logits), np.asarray(prediction.label_ids)
        if num_labels == 1:
            return regression_scores(logits.reshape(-1), gold.reshape(-1))
        return classification_scores(logits.argmax(axis=-1), gold, num_labels)

    return compute_metrics


__all__ = ["build_compute_metrics", "classification_scores", "f1_per_class", "regression_scores"]
