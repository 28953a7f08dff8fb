"""Training objectives as sums and counts, so that a loss over replicas is the loss of the global batch.

The original's losses are ratios: masked_lm_loss = sum(w * nll) / (sum(w) + 1e-5), the NSP loss a
mean. Split over replicas (or micro-batches), a mean of per-replica ratios is not the ratio of
the whole batch. So each objective returns `Term`s (numerator, denominator, epsilon); the training
loop sums the denominators over replicas and each replica contributes numerator / (global
denominator + epsilon). The gradients, summed over replicas by the optimizer, are then exactly
those of the single-device loss on the global batch.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.model.heads import cross_entropy


@dataclasses.dataclass(frozen=True)
class Term:
    """numerator / (denominator + epsilon), with the denominator summed over the global batch."""

    numerator: tf.Tensor
    denominator: tf.Tensor
    epsilon: float = 0.0


def pretraining_terms(model, batch: Mapping[str, tf.Tensor], training: bool
                      ) -> tuple[dict[str, Term], dict[str, Term]]:
    """(loss terms, metric terms) of the original MLM + NSP objective for one batch.

    Loss terms: masked_lm_loss, next_sentence_loss (the total loss is their sum). Metric terms:
    masked_lm_accuracy (weighted by masked_lm_weights) and next_sentence_accuracy.
    """
    outputs = model(batch, training=training)
    mlm_logits = tf.cast(outputs["masked_lm_logits"], tf.float32)
    mlm_ids = tf.reshape(tf.cast(batch["masked_lm_ids"], tf.int32), [-1])
    weights = tf.reshape(tf.cast(batch["masked_lm_weights"], tf.float32), [-1])
    mlm_nll = cross_entropy(mlm_logits, mlm_ids)
    mlm_hit = _hits(mlm_logits, mlm_ids)
    nsp_logits = tf.cast(outputs["next_sentence_logits"], tf.float32)
    nsp_labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])
    nsp_nll = cross_entropy(nsp_logits, nsp_labels)
    count = tf.cast(tf.size(nsp_labels), tf.float32)
    weight_sum = tf.reduce_sum(weights)
    losses = {"masked_lm_loss": Term(tf.reduce_sum(weights * mlm_nll), weight_sum, 1e-5),
              "next_sentence_loss": Term(tf.reduce_sum(nsp_nll), count)}
    metrics = {"masked_lm_accuracy": Term(tf.reduce_sum(weights * mlm_hit), weight_sum),
               "next_sentence_accuracy": Term(tf.reduce_sum(_hits(nsp_logits, nsp_labels)), count)}
    return losses, metrics


def pretraining_denominators(batch: Mapping[str, tf.Tensor]) -> list[tf.Tensor]:
    """Denominators of pretraining_terms' losses from the inputs: sum of masked_lm_weights, batch size."""
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    return [tf.reduce_sum(weights), tf.cast(tf.shape(batch["next_sentence_labels"])[0], tf.float32)]


def _hits(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """1.0 where argmax(logits) == label, per row."""
    predictions = tf.argmax(tf.reshape(logits, [-1, logits.shape[-1]]), axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predictions, labels), tf.float32)
