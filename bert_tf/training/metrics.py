"""Metrics that need every prediction at once (NumPy; no TensorFlow): GLUE's and the like.

The GLUE scores: accuracy; F1 of the positive class (MRPC, QQP); Matthews correlation (CoLA);
Pearson and Spearman correlation (STS-B). Degenerate inputs (a constant column, no positive
prediction) give 0.0, as the GLUE scorer's scikit-learn/SciPy calls do for MCC and F1.
"""
from __future__ import annotations

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, stable for large logits."""
    top = logits.max(axis=-1, keepdims=True)
    return logits - (top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True)))


def accuracy(labels, predictions) -> float:
    """Share of predictions equal to their label."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1(labels, predictions, positive=1) -> float:
    """F1 of the `positive` class: 2 * precision * recall / (precision + recall)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    true_pos = np.sum((predictions == positive) & (labels == positive))
    predicted, actual = np.sum(predictions == positive), np.sum(labels == positive)
    if true_pos == 0:
        return 0.0
    precision, recall = true_pos / predicted, true_pos / actual
    return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation over any number of classes (Gorodkin's R_K, as scikit-learn computes it)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    confusion = np.array([[np.sum((labels == a) & (predictions == b)) for b in classes] for a in classes],
                         dtype=np.float64)
    true_sum, pred_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, total = np.trace(confusion), confusion.sum()
    cov_ypyp = total * total - np.dot(pred_sum, pred_sum)
    cov_ytyt = total * total - np.dot(true_sum, true_sum)
    if cov_ypyp == 0 or cov_ytyt == 0:
        return 0.0
    return float((correct * total - np.dot(true_sum, pred_sum)) / np.sqrt(cov_ytyt * cov_ypyp))


def pearson(x, y) -> float:
    """Pearson's r."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    return float(np.dot(dx, dy) / denominator) if denominator else 0.0


def ranks(values) -> np.ndarray:
    """1-based ranks, ties given their average rank."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    result = np.empty(len(values), np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        result[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return result


def spearman(x, y) -> float:
    """Spearman's rho: Pearson's r of the average ranks."""
    return pearson(ranks(x), ranks(y))
