"""Losses and metrics written once, as sums and counts, so a loss over replicas is the loss of the global batch.

The original's losses are ratios: masked_lm_loss = sum(w * nll) / (sum(w) + 1e-5), the NSP,
classifier and SQuAD losses means. Split over replicas (or micro-batches), a mean of per-replica
ratios is not the ratio of the whole batch. So every loss and metric here is a `Term` (numerator,
denominator, epsilon); the training loop sums the denominators over replicas and each replica
contributes numerator / (global denominator + epsilon). The gradients, summed over replicas, are
then exactly those of the single-device loss on the global batch. On one batch, `Term.value()` is
the original's number.

An `Objective` bundles a model's terms: every program (pre-training, classification, spans,
tagging, multiple choice) is one objective for the one training loop.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import bert_tf._env  # noqa: F401
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Term:
    """numerator / (denominator + epsilon), with the denominator summed over the global batch."""

    numerator: tf.Tensor
    denominator: tf.Tensor
    epsilon: float = 0.0

    def value(self) -> tf.Tensor:
        """The ratio on this batch alone (the original's loss or metric for one batch)."""
        return self.numerator / (self.denominator + self.epsilon)


@dataclasses.dataclass(frozen=True)
class Objective:
    """What to minimise and what to report.

    `terms_fn(model, batch, training)` -> (loss terms, metric terms), by name;
    `denominators_fn(batch)` -> the loss terms' denominators (from the inputs alone), in
    `loss_names` order, so they can be summed over replicas before the (compiled) gradient step.
    The loss is the sum of the loss terms.
    """

    terms_fn: Callable
    denominators_fn: Callable
    loss_names: Sequence[str]
    metric_names: Sequence[str] = ()


def total_loss(terms: Sequence[Term], denominators: Sequence[tf.Tensor] | None = None) -> tf.Tensor:
    """Sum of numerator / (denominator + epsilon); `denominators` replace the terms' own (global sums)."""
    if denominators is None:
        denominators = [t.denominator for t in terms]
    return tf.add_n([t.numerator / (d + t.epsilon) for t, d in zip(terms, denominators)])


def cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """-log softmax(logits)[label] per row (float32), with TensorFlow's fused kernel (forward and gradient).

    Equal to the original's -sum(one_hot * log_softmax(logits)); log-probs may be passed as logits
    too (log_softmax leaves them unchanged).
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels, tf.reshape(logits, [-1, logits.shape[-1]]))


def hits(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """1.0 where argmax(logits) == label, per row."""
    predictions = tf.argmax(tf.reshape(logits, [-1, logits.shape[-1]]), axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predictions, tf.reshape(tf.cast(labels, tf.int32), [-1])), tf.float32)


def _weights(labels: tf.Tensor, weights: tf.Tensor | None) -> tf.Tensor:
    if weights is None:
        return tf.ones([tf.size(labels)], tf.float32)
    return tf.reshape(tf.cast(weights, tf.float32), [-1])


def softmax_terms(logits: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor | None = None,
                  epsilon: float = 0.0) -> tuple[Term, Term]:
    """(loss, accuracy) of a softmax classifier: sum(w * nll) / (sum(w) + epsilon), and the weighted hit rate.

    Without weights the loss is the mean NLL (NSP, run_classifier); the masked LM passes
    masked_lm_weights and epsilon 1e-5, as the original.
    """
    w = _weights(labels, weights)
    count = tf.reduce_sum(w)
    return (Term(tf.reduce_sum(w * cross_entropy(logits, labels)), count, epsilon),
            Term(tf.reduce_sum(w * hits(logits, labels)), count))


def span_terms(start_logits: tf.Tensor, end_logits: tf.Tensor, start_positions: tf.Tensor,
               end_positions: tf.Tensor) -> Term:
    """run_squad's loss: (mean start NLL + mean end NLL) / 2 over the batch."""
    nll = cross_entropy(start_logits, start_positions) + cross_entropy(end_logits, end_positions)
    return Term(tf.reduce_sum(nll) / 2.0, tf.cast(tf.size(nll), tf.float32))


def squared_error_term(predictions: tf.Tensor, targets: tf.Tensor) -> Term:
    """Mean squared error (regression tasks such as STS-B)."""
    predictions = tf.reshape(tf.cast(predictions, tf.float32), [-1])
    targets = tf.reshape(tf.cast(targets, tf.float32), [-1])
    return Term(tf.reduce_sum(tf.square(predictions - targets)), tf.cast(tf.size(targets), tf.float32))


def count_denominator(batch: Mapping[str, tf.Tensor], key: str) -> tf.Tensor:
    """Number of rows of batch[key]: the denominator of a mean over the batch."""
    return tf.cast(tf.shape(batch[key])[0], tf.float32)


def sum_keys(names: Sequence[str]) -> list[str]:
    """Keys of the summed numerators and denominators of the named terms ("name/num", "name/den")."""
    return [f"{name}/{part}" for name in names for part in ("num", "den")]


def term_sums(terms: Mapping[str, Term]) -> dict[str, tf.Tensor]:
    """Each term's numerator and denominator under its sum_keys, ready to be summed over batches."""
    sums = {}
    for name, term in terms.items():
        sums[f"{name}/num"], sums[f"{name}/den"] = term.numerator, term.denominator
    return sums


def pooled_ratios(sums: Mapping[str, float], names: Sequence[str]) -> dict[str, float]:
    """Each named term pooled over everything summed: sum of numerators / sum of denominators."""
    return {name: sums[f"{name}/num"] / max(sums[f"{name}/den"], 1e-12) for name in names}
