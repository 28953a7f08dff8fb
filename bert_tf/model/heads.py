"""Task heads of the original code and the models that put them on a BertModel.

Heads (Keras layers; TF1 names in `bert_tf.checkpoints.mapping`):
  MaskedLMHead      cls/predictions: dense -> act -> LayerNorm -> logits with the TIED word
                    embedding table + output_bias, only at the gathered masked positions.
  NextSentenceHead  cls/seq_relationship: 2-way logits on the pooled output.
  ClassifierHead    output_weights [num_labels, H], output_bias (run_classifier).
  SpanHead          cls/squad/output_weights [2, H], output_bias (run_squad start/end logits).
Models:
  BertPretrainingModel(config)            -> masked_lm_* and next_sentence_* logits/log-probs
  BertClassifierModel(config, num_labels) -> logits, probabilities, log_probs
  BertSpanModel(config)                   -> start_logits, end_logits
Losses (float32, the original's formulas): masked_lm_loss, next_sentence_loss,
pretraining_loss, classifier_loss, span_loss.
Logits, log-softmax and losses are float32 under mixed precision.
"""
from __future__ import annotations

from typing import Any, Mapping

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.activations import get_activation
from bert_tf.model.configs import BertConfig
from bert_tf.model.layers import Dropout, LayerNorm, truncated_normal
from bert_tf.model.bert import BertModel, as_config

_PACKAGE = "bert_tf"


def gather_positions(sequence_output: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
    """[B, T, H] at [B, P] positions -> [B*P, H] (the original's gather_indexes)."""
    gathered = tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)
    return tf.reshape(gathered, [-1, sequence_output.shape[-1]])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMHead(keras.layers.Layer):
    """cls/predictions: transform, then logits against the tied word embedding table."""

    def __init__(self, vocab_size: int, hidden_size: int, hidden_act: str = "gelu",
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.activation = get_activation(hidden_act)
        self.initializer_range = initializer_range
        self.layer_norm = LayerNorm(hidden_size, name="LayerNorm", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        h = self.hidden_size
        self.transform_kernel = self.add_weight(
            name="transform_kernel", shape=(h, h),
            initializer=truncated_normal(self.initializer_range))
        self.transform_bias = self.add_weight(name="transform_bias", shape=(h,),
                                              initializer="zeros")
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros", dtype=self.variable_dtype,
                                           autocast=False)
        self.layer_norm.build()
        self.built = True

    def call(self, sequence_output, positions, embedding_table):
        """-> float32 logits [B, P, vocab] at `positions` [B, P]."""
        x = gather_positions(sequence_output, positions)
        x = self.activation(tf.nn.bias_add(tf.matmul(x, self.transform_kernel),
                                           self.transform_bias))
        x = self.layer_norm(x)
        logits = tf.matmul(x, tf.cast(embedding_table, x.dtype), transpose_b=True)
        logits = tf.cast(logits, self.variable_dtype) + self.output_bias
        return tf.reshape(logits, [tf.shape(positions)[0], -1, self.vocab_size])

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class OutputProjection(keras.layers.Layer):
    """logits = x @ output_weights^T + output_bias, float32 out.

    `output_weights` is [num_outputs, hidden] (transposed, like the original's
    cls/seq_relationship, classifier and cls/squad variables). Used for NSP, classification
    and SQuAD spans.
    """

    def __init__(self, num_outputs: int, hidden_size: int, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_outputs, self.hidden_size),
            initializer=truncated_normal(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,),
                                           initializer="zeros", dtype=self.variable_dtype,
                                           autocast=False)
        self.built = True

    def call(self, x):
        logits = tf.matmul(x, self.output_weights, transpose_b=True)
        return tf.cast(logits, self.variable_dtype) + self.output_bias

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "hidden_size": self.hidden_size, "initializer_range": self.initializer_range}


def _model_config(model, extra: dict) -> dict:
    return {"config": model.bert_config.to_dict(), "name": model.name,
            "trainable": model.trainable,
            "dtype": keras.dtype_policies.serialize(model.dtype_policy), **extra}


def _from_config(cls, config):
    config = dict(config)
    if isinstance(config.get("dtype"), Mapping):
        config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return cls(config.pop("config"), **config)


class _BertWithHeads(keras.Model):
    """Shared constructor bits: a BertModel named "bert" plus heads, built at once."""

    def _make_bert(self, config: BertConfig | Mapping[str, Any]) -> BertConfig:
        config = as_config(config)
        self.bert_config = config
        self.bert = BertModel(config, name="bert", dtype=self.dtype_policy)
        return config

    @classmethod
    def from_config(cls, config):
        return _from_config(cls, config)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertPretrainingModel(_BertWithHeads):
    """BertModel + masked-LM and next-sentence heads (run_pretraining.py).

    inputs: the BertModel dict plus "masked_lm_positions" int [B, P].
    returns: masked_lm_logits / masked_lm_log_probs [B, P, vocab], next_sentence_logits /
    next_sentence_log_probs [B, 2] (all float32), and the encoder's outputs.
    """

    def __init__(self, config: BertConfig | Mapping[str, Any], name: str = "bert_pretraining",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        policy = self.dtype_policy
        self.masked_lm = MaskedLMHead(config.vocab_size, config.hidden_size, config.hidden_act,
                                      config.initializer_range, name="predictions",
                                      dtype=policy)
        self.next_sentence = OutputProjection(2, config.hidden_size, config.initializer_range,
                                              name="seq_relationship", dtype=policy)
        self.masked_lm.build()
        self.next_sentence.build()
        self.built = True

    def call(self, inputs, training=False):
        outputs = dict(self.bert(inputs, training=training))
        mlm_logits = self.masked_lm(outputs["sequence_output"], inputs["masked_lm_positions"],
                                    self.bert.word_embeddings)
        nsp_logits = self.next_sentence(outputs["pooled_output"])
        outputs.update(masked_lm_logits=mlm_logits,
                       masked_lm_log_probs=tf.nn.log_softmax(mlm_logits),
                       next_sentence_logits=nsp_logits,
                       next_sentence_log_probs=tf.nn.log_softmax(nsp_logits))
        return outputs

    def get_config(self):
        return _model_config(self, {})


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertClassifierModel(_BertWithHeads):
    """BertModel + dropout + `output_weights`/`output_bias` on the pooled output (run_classifier).

    The original applies dropout 0.1 (fixed, not from the config) before the projection.
    returns: logits, probabilities, log_probs [B, num_labels], float32.
    """

    def __init__(self, config: BertConfig | Mapping[str, Any], num_labels: int,
                 dropout_rate: float = 0.1, name: str = "bert_classifier", **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        self.num_labels = int(num_labels)
        self.dropout_rate = dropout_rate
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.classifier = OutputProjection(self.num_labels, config.hidden_size,
                                           config.initializer_range, name="classifier",
                                           dtype=self.dtype_policy)
        self.classifier.build()
        self.built = True

    def call(self, inputs, training=False):
        pooled = self.bert(inputs, training=training)["pooled_output"]
        logits = self.classifier(self.dropout(pooled, training=training))
        return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                "log_probs": tf.nn.log_softmax(logits)}

    def get_config(self):
        return _model_config(self, {"num_labels": self.num_labels,
                                    "dropout_rate": self.dropout_rate})


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertSpanModel(_BertWithHeads):
    """BertModel + cls/squad start/end projection on every token (run_squad).

    returns: start_logits, end_logits [B, T], float32.
    """

    def __init__(self, config: BertConfig | Mapping[str, Any], name: str = "bert_span",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        self.span = OutputProjection(2, config.hidden_size, config.initializer_range,
                                     name="squad", dtype=self.dtype_policy)
        self.span.build()
        self.built = True

    def call(self, inputs, training=False):
        sequence_output = self.bert(inputs, training=training)["sequence_output"]
        logits = self.span(sequence_output)  # [B, T, 2]
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def get_config(self):
        return _model_config(self, {})


def cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """-log softmax(logits)[label] per row, with TensorFlow's fused kernel (forward and gradient).

    Equal to the original's -sum(one_hot * log_softmax(logits)); log-probs may be passed as logits
    too (log_softmax leaves them unchanged).
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels, tf.reshape(logits, [-1, logits.shape[-1]]))


def masked_lm_loss(logits: tf.Tensor, label_ids: tf.Tensor,
                   label_weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """-> (loss, per-example loss [B*P]): sum(w * nll) / (sum(w) + 1e-5), as the original."""
    per_example = cross_entropy(logits, label_ids)
    weights = tf.reshape(tf.cast(label_weights, tf.float32), [-1])
    loss = tf.reduce_sum(weights * per_example) / (tf.reduce_sum(weights) + 1e-5)
    return loss, per_example


def next_sentence_loss(logits: tf.Tensor,
                       labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """-> (mean loss, per-example loss [B]) of the 2-way next-sentence prediction."""
    per_example = cross_entropy(logits, labels)
    return tf.reduce_mean(per_example), per_example


def pretraining_loss(outputs: Mapping[str, tf.Tensor],
                     features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The original's total_loss = masked_lm_loss + next_sentence_loss, with the parts."""
    mlm, mlm_example = masked_lm_loss(outputs["masked_lm_logits"],
                                      features["masked_lm_ids"], features["masked_lm_weights"])
    nsp, nsp_example = next_sentence_loss(outputs["next_sentence_logits"],
                                          features["next_sentence_labels"])
    return {"total_loss": mlm + nsp, "masked_lm_loss": mlm,
            "masked_lm_example_loss": mlm_example, "next_sentence_loss": nsp,
            "next_sentence_example_loss": nsp_example}


def classifier_loss(logits: tf.Tensor, label_ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """-> (mean loss, per-example loss [B]) as run_classifier.create_model."""
    per_example = cross_entropy(logits, label_ids)
    return tf.reduce_mean(per_example), per_example


def span_loss(start_logits: tf.Tensor, end_logits: tf.Tensor, start_positions: tf.Tensor,
              end_positions: tf.Tensor) -> tf.Tensor:
    """(start_loss + end_loss) / 2, each a mean NLL over the batch, as run_squad."""
    start_loss = tf.reduce_mean(cross_entropy(start_logits, start_positions))
    end_loss = tf.reduce_mean(cross_entropy(end_logits, end_positions))
    return (start_loss + end_loss) / 2.0
