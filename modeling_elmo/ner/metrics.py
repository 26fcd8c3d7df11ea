"""Entity-level NER scores with seqeval (CoNLL `conlleval` semantics), for `Trainer(compute_metrics=...)`."""

from collections.abc import Callable, Mapping

import numpy as np
from seqeval.metrics import accuracy_score, classification_report
from transformers import EvalPrediction


def decode_tags(
    predictions: np.ndarray, label_ids: np.ndarray, id2label: Mapping[int, str]
) -> tuple[list[list[str]], list[list[str]]]:
    """
    `predictions` (num_sentences, num_words, num_labels) logits or (num_sentences, num_words) ids, and `label_ids`
    (num_sentences, num_words) with -100 for padding -> (gold, predicted) tag sequences over the labelled words.
    Raises `ValueError` for a label id that `id2label` does not know.
    """
    if predictions.ndim == 3:
        predictions = predictions.argmax(axis=-1)
    known = set(id2label)
    unknown = sorted({int(i) for i in np.unique(label_ids) if i != -100} - known)
    if unknown:
        raise ValueError(f"Label ids {unknown} are not in id2label (known: {sorted(known)}).")
    gold, predicted = [], []
    for sentence_predictions, sentence_labels in zip(predictions, label_ids, strict=True):
        keep = sentence_labels != -100
        gold.append([id2label[int(i)] for i in sentence_labels[keep]])
        predicted.append([id2label[int(i)] for i in sentence_predictions[keep]])
    return gold, predicted


def ner_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Micro precision/recall/F1 over entities, word accuracy, and per-type `{TYPE}_precision/_recall/_f1/_number`."""
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    micro = report["micro avg"]
    scores = {
        "precision": float(micro["precision"]),
        "recall": float(micro["recall"]),
        "f1": float(micro["f1-score"]),
        "accuracy": float(accuracy_score(gold, predicted)),
    }
    for entity_type, values in report.items():
        if entity_type.endswith(" avg"):
            continue
        scores[f"{entity_type}_precision"] = float(values["precision"])
        scores[f"{entity_type}_recall"] = float(values["recall"])
        scores[f"{entity_type}_f1"] = float(values["f1-score"])
        scores[f"{entity_type}_number"] = int(values["support"])
    return scores


def build_compute_metrics(id2label: Mapping[int, str]) -> Callable[[EvalPrediction], dict[str, float]]:
    """A `compute_metrics` for the Trainer: entity-level scores of `EvalPrediction.predictions` (logits)."""

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        return ner_scores(*decode_tags(np.asarray(logits), np.asarray(prediction.label_ids), id2label))

    return compute_metrics


__all__ = ["build_compute_metrics", "decode_tags", "ner_scores"]
