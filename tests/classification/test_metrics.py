"""Classification scores against values worked out by hand."""

import numpy as np
import pytest
from transformers import EvalPrediction

from modeling_elmo.classification.metrics import build_compute_metrics, classification_scores


def test_binary_f1_is_that_of_class_one():
    gold = np.array([1, 1, 1, 0, 0])
    predicted = np.array([1, 0, 0, 0, 1])
    # class 1: tp 1, predicted 2, gold 3 -> F1 = 2 * 1 / (2 + 3)
    assert classification_scores(predicted, gold, 2) == pytest.approx({"accuracy": 0.4, "f1": 0.4})


def test_macro_f1_averages_classes_including_unpredicted_ones():
    gold = np.array([0, 1, 2, 2])
    predicted = np.array([0, 2, 2, 2])
    # F1: class 0 = 1, class 1 = 0 (never predicted), class 2 = 2 * 2 / (3 + 2) = 0.8
    assert classification_scores(predicted, gold, 3) == pytest.approx({"accuracy": 0.75, "macro_f1": 0.6})


def test_compute_metrics_takes_logits_and_scores_regression():
    classify = build_compute_metrics(3)
    logits = np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 3.0]])
    assert classify(EvalPrediction(logits, np.array([0, 1])))["accuracy"] == 0.5
    regress = build_compute_metrics(1)
    scores = regress(EvalPrediction(np.array([[1.0], [3.0]]), np.array([2.0, 2.0])))
    assert scores == pytest.approx({"mse": 1.0, "mae": 1.0})
