"""The tagger of the paper's feature-based study (section 5.3): frozen BERT features into a two-layer
bidirectional LSTM and a softmax classifier per word.

The paper: "a randomly initialized two-layer 768-dimensional BiLSTM before the classification
layer"; the features of several layers are concatenated or summed. The weighted sums use ELMo's
scalar mix (gamma * sum_j softmax(s)_j h_j, learned), as the issue asks.
"""
from __future__ import annotations

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.checkpoint_tracking import ListsInCheckpoints

_PACKAGE = "bert_tf"
COMBINE = ("single", "sum", "concat")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ScalarMix(keras.layers.Layer):
    """ELMo's scalar mix over the layer axis: [B, W, K, H] -> [B, W, H]."""

    def __init__(self, num_layers: int, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers

    def build(self, input_shape=None):
        self.scalars = self.add_weight(name="scalars", shape=(self.num_layers,), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def call(self, x):
        weights = tf.cast(tf.nn.softmax(self.scalars), x.dtype)
        return tf.cast(self.gamma, x.dtype) * tf.einsum("bwkh,k->bwh", x, weights)

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BiLstmTagger(ListsInCheckpoints, keras.Model):
    """inputs: word_features [B, W, K, H] (K frozen layers per word), input_mask [B, W];
    returns: logits [B, W, num_labels], float32."""

    def __init__(self, num_labels: int, num_layers: int, hidden_size: int, combine: str = "single",
                 lstm_units: int = 768, lstm_layers: int = 2, dropout_rate: float = 0.1, name: str = "bilstm_tagger",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        self.num_labels, self.num_layers, self.hidden_size = num_labels, num_layers, hidden_size
        self.combine, self.lstm_units, self.lstm_layers, self.dropout_rate = combine, lstm_units, lstm_layers, dropout_rate
        policy = self.dtype_policy
        self.mix = ScalarMix(num_layers, name="scalar_mix", dtype=policy) if combine == "sum" else None
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=policy)
        self.lstms = [keras.layers.Bidirectional(keras.layers.LSTM(lstm_units, return_sequences=True, dtype=policy),
                                                 name=f"bilstm_{i}", dtype=policy) for i in range(lstm_layers)]
        self.classifier = keras.layers.Dense(num_labels, name="classifier", dtype=policy)
        # Built at once (one word), so that its variables exist before a checkpoint is restored.
        self({"word_features": tf.zeros([1, 1, num_layers, hidden_size]), "input_mask": tf.ones([1, 1], tf.int32)})

    def call(self, inputs, training=False):
        x = inputs["word_features"]
        if self.combine == "sum":
            x = self.mix(x)
        else:
            shape = tf.shape(x)
            x = tf.reshape(x, [shape[0], shape[1], self.num_layers * self.hidden_size])
        mask = tf.cast(inputs["input_mask"], tf.bool)
        for lstm in self.lstms:
            x = lstm(self.dropout(x, training=training), mask=mask, training=training)
        return {"logits": tf.cast(self.classifier(self.dropout(x, training=training)), tf.float32)}

    def get_config(self):
        return {"num_labels": self.num_labels, "num_layers": self.num_layers, "hidden_size": self.hidden_size,
                "combine": self.combine, "lstm_units": self.lstm_units, "lstm_layers": self.lstm_layers,
                "dropout_rate": self.dropout_rate, "name": self.name,
                "dtype": keras.dtype_policies.serialize(self.dtype_policy)}
