"""BertModel: the BERT encoder of the original modeling.py as a Keras 3 model.

    model = BertModel(BertConfig.from_json_file("bert_config.json"))
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    out["sequence_output"], out["pooled_output"], out["encoder_outputs"], out["embedding_output"]

`input_mask` and `segment_ids` are optional (all ones / all zeros, like the original).
A config with `causal_attention` makes the left-to-right encoder of the paper's "LTR & No NSP"
ablation: each position attends only to itself and earlier real tokens, and `pooled_output` is read
from each row's last real token (under that mask [CLS] sees only itself).
`model.export(path)` writes a SavedModel and `model.save("m.keras")` / `keras.models.load_model`
round-trip (bert_tf.model.keras_native).
Weights are created in the constructor, so a model can be loaded right after it is made
(`bert_tf.checkpoints.load_tf1_checkpoint`). Pass `dtype="mixed_float16"` or
`"mixed_bfloat16"` for mixed precision.
"""
from __future__ import annotations

from typing import Any, Mapping

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.checkpoint_tracking import ListsInCheckpoints
from bert_tf.model.configs import BertConfig
from bert_tf.model.keras_native import KerasNative
from bert_tf.model.layers import (BertEmbeddings, Pooler, TransformerLayer, attended_length,
                                  attention_mask_adder, trims_keys)


def as_config(config: BertConfig | Mapping[str, Any]) -> BertConfig:
    """Accepts a BertConfig or its dict form (as stored by get_config)."""
    if isinstance(config, BertConfig):
        return config
    return BertConfig.from_dict(config, source="model config")


def unpack_inputs(inputs) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """dict (or bare input_ids) -> int32 (input_ids, input_mask, segment_ids)."""
    if isinstance(inputs, Mapping):
        if "input_ids" not in inputs:
            raise ValueError(f"model inputs need 'input_ids'; got keys {sorted(inputs)}")
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        segment_ids = inputs.get("segment_ids")
    else:
        input_ids, input_mask, segment_ids = inputs, None, None
    input_ids = tf.cast(input_ids, tf.int32)
    input_mask = (tf.ones_like(input_ids) if input_mask is None
                  else tf.cast(input_mask, tf.int32))
    segment_ids = (tf.zeros_like(input_ids) if segment_ids is None
                   else tf.cast(segment_ids, tf.int32))
    return input_ids, input_mask, segment_ids


def last_real_token(sequence_output: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
    """[B, T, H] -> [B, 1, H]: each row's last real token (rows padded on the right, as all of ours).

    A causal model's pooler reads it instead of [CLS]: under the left-to-right mask the first
    position sees nothing but itself, the last real one ([SEP]) sees the whole input (OpenAI GPT's
    choice for classification, the model the paper's LTR ablation compares with).
    """
    return tf.gather(sequence_output, last_real_positions(input_mask)[:, tf.newaxis], batch_dims=1)


def encoder_of(model: keras.Model) -> "BertModel | None":
    """The BertModel of `model`: itself, or the `.bert` every head model keeps; None for another model."""
    return model if isinstance(model, BertModel) else getattr(model, "bert", None)


def last_real_positions(input_mask: tf.Tensor) -> tf.Tensor:
    """[B, T] mask -> int32 [B]: the index of each row's last real token (0 for an all-padding row)."""
    return tf.maximum(tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=1) - 1, 0)


def attention_bias(input_mask: tf.Tensor, causal: bool, training) -> tuple[tf.Tensor, tf.Tensor | None]:
    """The additive attention bias of `attention_mask_adder` and the number of keys attention reads: at
    inference (`trims_keys`) the bias is cut to `attended_length` keys, which that length comes with; else
    every key (None)."""
    adder = attention_mask_adder(input_mask, causal=causal)
    if not trims_keys(training):
        return adder, None
    key_length = attended_length(input_mask)
    return adder[..., :key_length], key_length


@keras.saving.register_keras_serializable(package="bert_tf")
class BertModel(ListsInCheckpoints, KerasNative, keras.Model):
    """The BERT encoder: embeddings, `num_hidden_layers` transformer layers, pooler."""

    def __init__(self, config: BertConfig | Mapping[str, Any], name: str = "bert", **kwargs):
        super().__init__(name=name, **kwargs)
        config = as_config(config)
        self.bert_config = config
        policy = self.dtype_policy
        self.embeddings = BertEmbeddings(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            type_vocab_size=config.type_vocab_size,
            max_position_embeddings=config.max_position_embeddings,
            initializer_range=config.initializer_range,
            dropout_rate=config.hidden_dropout_prob, name="embeddings", dtype=policy)
        self.encoder_layers = [
            TransformerLayer(
                hidden_size=config.hidden_size, num_attention_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
                hidden_dropout_prob=config.hidden_dropout_prob,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range, name=f"layer_{i}", dtype=policy)
            for i in range(config.num_hidden_layers)]
        self.pooler = Pooler(config.hidden_size, config.initializer_range, name="pooler",
                             dtype=policy)
        self.build()

    def build(self, input_shape=None):
        self.embeddings.build()
        for layer in self.encoder_layers:
            layer.build()
        self.pooler.build()
        self.built = True

    @property
    def word_embeddings(self) -> keras.Variable:
        """The [vocab, hidden] table the masked-LM head ties its output weights to."""
        return self.embeddings.word_embeddings

    def call(self, inputs, training=False):
        _, input_mask, encoder_outputs = self._run_layers(inputs, self.encoder_layers, training)
        embedding_output, encoder_outputs = encoder_outputs[0], encoder_outputs[1:]
        sequence_output = encoder_outputs[-1]
        causal = self.bert_config.causal_attention
        pooled_from = last_real_token(sequence_output, input_mask) if causal else sequence_output
        return {"sequence_output": sequence_output,
                "pooled_output": self.pooler(pooled_from),
                "encoder_outputs": encoder_outputs,
                "embedding_output": embedding_output}

    def pooled_output(self, inputs, training=False) -> tf.Tensor:
        """`self(inputs)["pooled_output"]` for less work: the pooler reads one position per row ([CLS], or
        the last real token of a causal model), so the last layer runs its feed-forward on those rows only
        (what the classifier and multiple-choice heads need; 1/L fewer FLOPs, same values)."""
        if not self.encoder_layers:
            return self(inputs, training=training)["pooled_output"]
        x, input_mask, _ = self._run_layers(inputs, self.encoder_layers[:-1], training)
        batch_size, seq_length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
        if self.bert_config.causal_attention:
            positions = last_real_positions(input_mask)
        else:
            positions = tf.zeros([batch_size], tf.int32)
        # The pooled row's own attention bias: padding only ([CLS] sees every real token; under the causal
        # mask the last real token sees every real token before it, i.e. all of them).
        row_adder, key_length = attention_bias(input_mask, False, training)
        pooled_rows = self.encoder_layers[-1](x, row_adder, batch_size, seq_length, training=training,
                                              positions=positions, key_length=key_length)
        return self.pooler(pooled_rows[:, tf.newaxis, :])

    def _run_layers(self, inputs, layers, training):
        """Embeddings, then `layers` on [B*T, H]: (their last output, input_mask, [embedding_output, each
        layer's output as [B, T, H]])."""
        input_ids, input_mask, segment_ids = unpack_inputs(inputs)
        batch_size, seq_length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
        hidden = self.bert_config.hidden_size
        embedding_output = self.embeddings(input_ids, segment_ids, training=training)
        adder, key_length = attention_bias(input_mask, self.bert_config.causal_attention, training)
        x = tf.reshape(embedding_output, [-1, hidden])
        outputs = [embedding_output]
        for layer in layers:
            x = layer(x, adder, batch_size, seq_length, training=training, key_length=key_length)
            outputs.append(tf.reshape(x, [batch_size, seq_length, hidden]))
        return x, input_mask, outputs

    def get_config(self):
        return {"config": self.bert_config.to_dict(), "name": self.name,
                "trainable": self.trainable, "dtype": keras.dtype_policies.serialize(
                    self.dtype_policy)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), Mapping):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(config.pop("config"), **config)
