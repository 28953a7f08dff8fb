"""The paper's "LTR & No NSP" ablation (Table 5): a left-to-right language model trained from the
masked-LM records that create_pretraining_data writes.

The records hold the input with 15% of its tokens masked (static masks) and the originals at
masked_lm_positions. A left-to-right model must read the original text, so the original tokens are
put back (masked_lm_ids at masked_lm_positions, where masked_lm_weights is 1); then every position i
predicts token i + 1 through the masked-LM output layer (its transform and the tied word embeddings),
under the causal attention mask the config's `causal_attention` switches on (bert_tf.model.layers).
Every position whose next token is real is predicted, [CLS] included (it predicts the first word);
the last real token, whose next is padding, is not. The loss is the mean NLL over the predicted
positions, as a Term (sum / count), so it is exact over replicas and micro-batches. segment_ids stay
as the records have them; next_sentence_labels are not used.
"""
from __future__ import annotations

from typing import Mapping

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.training.objectives import Objective, Term, softmax_terms


def restore_original_tokens(input_ids: tf.Tensor, positions: tf.Tensor, ids: tf.Tensor,
                            weights: tf.Tensor) -> tf.Tensor:
    """[B, T] input_ids with masked_lm_ids [B, P] put back at masked_lm_positions [B, P] where the
    masked_lm_weights are non-zero (padding predictions, position 0 and weight 0, change nothing).

    Written with one-hot sums rather than a scatter, so it has static shapes (XLA, TPUs); a record's
    masked positions are distinct, so each sum holds at most one id.
    """
    input_ids = tf.cast(input_ids, tf.int32)
    chosen = tf.one_hot(tf.cast(positions, tf.int32), tf.shape(input_ids)[1], dtype=tf.int32)  # [B, P, T]
    chosen *= tf.cast(tf.cast(weights, tf.float32) > 0, tf.int32)[:, :, tf.newaxis]
    masked = tf.reduce_max(chosen, axis=1) > 0  # [B, T]
    originals = tf.reduce_sum(chosen * tf.cast(ids, tf.int32)[:, :, tf.newaxis], axis=1)
    return tf.where(masked, originals, input_ids)


def next_token_inputs(batch: Mapping[str, tf.Tensor]) -> tuple[dict[str, tf.Tensor], tf.Tensor, tf.Tensor]:
    """(model inputs, targets [B, T-1], weights [B, T-1]) of one batch of pre-training records.

    The inputs are the original tokens with the records' input_mask and segment_ids, and positions
    0..T-2 of every row to predict at; the target at position i is original token i + 1, weighted 1
    where that token is real.
    """
    tokens = restore_original_tokens(batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"],
                                     batch["masked_lm_weights"])
    batch_size, seq_length = tf.shape(tokens)[0], tf.shape(tokens)[1]
    positions = tf.tile(tf.range(seq_length - 1)[tf.newaxis, :], [batch_size, 1])
    inputs = {"input_ids": tokens, "input_mask": batch["input_mask"], "segment_ids": batch["segment_ids"],
              "masked_lm_positions": positions}
    return inputs, tokens[:, 1:], _next_token_weights(batch)


def _next_token_weights(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return tf.cast(batch["input_mask"], tf.float32)[:, 1:]


def next_token_terms(model, batch: Mapping[str, tf.Tensor], training: bool
                     ) -> tuple[dict[str, Term], dict[str, Term]]:
    """(loss terms, metric terms) of the left-to-right LM: next_token_loss, the mean NLL of each
    real next token, and next_token_accuracy (the model must have causal attention)."""
    inputs, targets, weights = next_token_inputs(batch)
    outputs = model(inputs, training=training)
    loss, accuracy = softmax_terms(outputs["masked_lm_logits"], targets, weights)
    return {"next_token_loss": loss}, {"next_token_accuracy": accuracy}


def next_token_denominators(batch: Mapping[str, tf.Tensor]) -> list[tf.Tensor]:
    """The denominator of next_token_loss: the number of predicted positions."""
    return [tf.reduce_sum(_next_token_weights(batch))]


LEFT_TO_RIGHT = Objective(next_token_terms, next_token_denominators, ("next_token_loss",),
                          ("next_token_accuracy",))
