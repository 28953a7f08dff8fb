"""The original pre-training objective: masked LM + next sentence prediction, as `Term`s."""
from __future__ import annotations

from typing import Mapping

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.training.objectives import Objective, Term, count_denominator, softmax_terms


def pretraining_terms(model, batch: Mapping[str, tf.Tensor], training: bool
                      ) -> tuple[dict[str, Term], dict[str, Term]]:
    """(loss terms, metric terms) of the original MLM + NSP objective for one batch.

    Loss terms: masked_lm_loss = sum(w * nll) / (sum(w) + 1e-5) and the mean next_sentence_loss
    (the total loss is their sum). Metric terms: masked_lm_accuracy (weighted by
    masked_lm_weights) and next_sentence_accuracy.
    """
    outputs = model(batch, training=training)
    mlm_loss, mlm_accuracy = softmax_terms(outputs["masked_lm_logits"], batch["masked_lm_ids"],
                                           batch["masked_lm_weights"], epsilon=1e-5)
    nsp_loss, nsp_accuracy = softmax_terms(outputs["next_sentence_logits"], batch["next_sentence_labels"])
    return ({"masked_lm_loss": mlm_loss, "next_sentence_loss": nsp_loss},
            {"masked_lm_accuracy": mlm_accuracy, "next_sentence_accuracy": nsp_accuracy})


def pretraining_denominators(batch: Mapping[str, tf.Tensor]) -> list[tf.Tensor]:
    """Denominators of pretraining_terms' losses from the inputs: sum of masked_lm_weights, batch size."""
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    return [tf.reduce_sum(weights), count_denominator(batch, "next_sentence_labels")]


PRETRAINING = Objective(pretraining_terms, pretraining_denominators,
                        ("masked_lm_loss", "next_sentence_loss"),
                        ("masked_lm_accuracy", "next_sentence_accuracy"))
