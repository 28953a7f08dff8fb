"""The Keras (TensorFlow) side of the model benchmark: the original's loss, tf.function steps, and KerasHub's BERT."""
from __future__ import annotations

from typing import Callable

import numpy as np

from bert_tf._env import tf  # TensorFlow, imported quietly

import keras

from bench._shapes import LEARNING_RATE, WEIGHT_DECAY, Dims, Runner, Shape, forward_flops_per_seq


def keras_pretraining_loss(mlm_logits, nsp_logits, batch) -> tf.Tensor:
    """The original BERT loss: weighted mean MLM cross-entropy (+1e-5 in the denominator) + mean NSP loss."""
    mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["masked_lm_ids"], tf.cast(mlm_logits, tf.float32))
    weights = batch["masked_lm_weights"]
    mlm_loss = tf.reduce_sum(mlm_ce * weights) / (tf.reduce_sum(weights) + 1e-5)
    nsp_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["next_sentence_labels"],
                                                            tf.cast(nsp_logits, tf.float32))
    return mlm_loss + tf.reduce_mean(nsp_ce)


def make_keras_adamw() -> keras.optimizers.AdamW:
    """AdamW with the original's decay exclusions (LayerNorm and biases)."""
    optimizer = keras.optimizers.AdamW(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=1e-6)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "layer_norm", "LayerNorm"])
    return optimizer


def keras_runner_steps(model: keras.Model, logits_fn: Callable[[dict, bool], tuple], batch: dict[str, np.ndarray],
                       jit_compile: bool, loss_fn: Callable[[dict, bool], tf.Tensor] | None = None,
                       optimizer: keras.optimizers.Optimizer | None = None) -> tuple[Callable, Callable]:
    """tf.function forward and train step of a Keras pre-training model.

    `logits_fn(batch, training)` runs the model and returns (mlm_logits [B, P, V], nsp_logits [B, 2]);
    `loss_fn(batch, training)`, if given, returns the scalar loss instead of our copy of the original's formula;
    `optimizer` defaults to Keras' AdamW with the original's decay exclusions.
    """
    tensors = {k: tf.constant(v) for k, v in batch.items()}
    optimizer = optimizer or make_keras_adamw()
    optimizer.build(model.trainable_variables)

    def default_loss(batch_tensors, training):
        return keras_pretraining_loss(*logits_fn(batch_tensors, training), batch_tensors)

    compute_loss = loss_fn or default_loss

    @tf.function(jit_compile=jit_compile)
    def forward(batch_tensors):
        mlm_logits, nsp_logits = logits_fn(batch_tensors, False)
        return tf.reduce_sum(nsp_logits) + tf.reduce_sum(mlm_logits[:, 0, :1])

    @tf.function(jit_compile=jit_compile)
    def train_step(batch_tensors):
        with tf.GradientTape() as tape:
            loss = compute_loss(batch_tensors, True)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return (lambda: forward(tensors).numpy()), (lambda: train_step(tensors).numpy())


def build_keras_hub(dims: Dims, shape: Shape, batch: dict[str, np.ndarray], jit_compile: bool) -> Runner:
    """KerasHub BertBackbone + MaskedLMHead (tied, gathered positions) + a Dense(2) NSP head on the pooled output."""
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=dims.vocab_size, num_layers=dims.num_layers, num_heads=dims.num_heads,
        hidden_dim=dims.hidden_size, intermediate_dim=dims.intermediate_size, dropout=0.1,
        max_sequence_length=dims.max_position, num_segments=dims.type_vocab_size)
    mlm_head = keras_hub.layers.MaskedLMHead(token_embedding=backbone.token_embedding,
                                             intermediate_activation="gelu", name="mlm_head")
    nsp_head = keras.layers.Dense(2, name="nsp_head")
    inputs = {"token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
              "segment_ids": keras.Input((None,), dtype="int32", name="segment_ids"),
              "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask"),
              "mask_positions": keras.Input((None,), dtype="int32", name="mask_positions")}
    features = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    outputs = (mlm_head(features["sequence_output"], mask_positions=inputs["mask_positions"]),
               nsp_head(features["pooled_output"]))
    model = keras.Model(inputs, outputs)

    def to_inputs(b):
        return {"token_ids": b["input_ids"], "segment_ids": b["segment_ids"], "padding_mask": b["input_mask"],
                "mask_positions": b["masked_lm_positions"]}

    forward, train_step = keras_runner_steps(model, lambda b, training: model(to_inputs(b), training=training),
                                             batch, jit_compile)
    return Runner("KerasHub BertBackbone + MaskedLMHead" + (" (XLA)" if jit_compile else ""), forward, train_step,
                  forward_flops_per_seq(dims, shape))
