"""Task heads of the original code and the models that put them on a BertModel.

Heads (Keras layers). Each declares its own original TF1 variable names: a `tf1_scope` and
`tf1_variables()`, which `bert_tf.checkpoints` reads, so a new task model names its head's
checkpoint variables without editing the checkpoint code:
  MaskedLMHead      cls/predictions: dense -> act -> LayerNorm -> logits with the TIED word
                    embedding table + output_bias, only at the gathered masked positions.
  OutputProjection  {scope}/output_weights [N, H], {scope}/output_bias: cls/seq_relationship
                    (NSP), the classifier's bare output_weights/output_bias, cls/squad (spans),
                    cls/token_classification (token tagging; our name, the original has no such head),
                    cls/multiple_choice (one score per choice; ours too).
Models:
  BertPretrainingModel(config)            -> masked_lm_* and next_sentence_* logits/log-probs
  BertClassifierModel(config, num_labels) -> logits, probabilities, log_probs
  BertSpanModel(config)                   -> start_logits, end_logits
  BertTokenClassifierModel(config, num_labels) -> logits per token
  BertMultipleChoiceModel(config)         -> logits per choice
Losses are written once, as terms, in `bert_tf.training.objectives`; for Keras' own `fit`, each task
model also computes the same loss from the labels in its features (`fit_loss`, bert_tf.model.keras_native).
Logits and log-softmax are float32 under mixed precision.
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
from bert_tf.model.keras_native import TEXT_INPUTS, KerasNative, nll, squared_error

_PACKAGE = "bert_tf"


def gather_positions(sequence_output: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
    """[B, T, H] at [B, P] positions -> [B*P, H] (the original's gather_indexes)."""
    gathered = tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)
    return tf.reshape(gathered, [-1, sequence_output.shape[-1]])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMHead(keras.layers.Layer):
    """cls/predictions: transform, then logits against the tied word embedding table."""

    def __init__(self, vocab_size: int, hidden_size: int, hidden_act: str = "gelu",
                 initializer_range: float = 0.02, tf1_scope: str = "cls/predictions", **kwargs):
        super().__init__(**kwargs)
        self.tf1_scope = tf1_scope
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

    def tf1_variables(self) -> list[tuple[str, keras.Variable]]:
        """(original TF1 name, variable) pairs; the output weights are the tied embedding table."""
        return _scoped(self.tf1_scope, [
            ("transform/dense/kernel", self.transform_kernel), ("transform/dense/bias", self.transform_bias),
            ("transform/LayerNorm/gamma", self.layer_norm.gamma),
            ("transform/LayerNorm/beta", self.layer_norm.beta), ("output_bias", self.output_bias)])

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range, "tf1_scope": self.tf1_scope}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class OutputProjection(keras.layers.Layer):
    """logits = x @ output_weights^T + output_bias, float32 out.

    `output_weights` is [num_outputs, hidden] (transposed, like the original's
    cls/seq_relationship, classifier and cls/squad variables). Used for NSP, classification
    and SQuAD spans; `tf1_scope` names its variables in original checkpoints ("" for the
    classifier's bare `output_weights`).
    """

    def __init__(self, num_outputs: int, hidden_size: int, initializer_range: float = 0.02,
                 tf1_scope: str = "", **kwargs):
        super().__init__(**kwargs)
        self.tf1_scope = tf1_scope
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

    def tf1_variables(self) -> list[tuple[str, keras.Variable]]:
        """(original TF1 name, variable) pairs."""
        return _scoped(self.tf1_scope, [("output_weights", self.output_weights),
                                        ("output_bias", self.output_bias)])

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "hidden_size": self.hidden_size, "initializer_range": self.initializer_range,
                "tf1_scope": self.tf1_scope}


def _scoped(scope: str, pairs: list[tuple[str, keras.Variable]]) -> list[tuple[str, keras.Variable]]:
    return [(f"{scope}/{name}" if scope else name, variable) for name, variable in pairs]


def _model_config(model, extra: dict) -> dict:
    return {"config": model.bert_config.to_dict(), "name": model.name,
            "trainable": model.trainable,
            "dtype": keras.dtype_policies.serialize(model.dtype_policy), **extra}


def _from_config(cls, config):
    config = dict(config)
    if isinstance(config.get("dtype"), Mapping):
        config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return cls(config.pop("config"), **config)


class _BertWithHeads(KerasNative, keras.Model):
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
    fit: masked_lm_ids, masked_lm_weights and next_sentence_labels in the features.
    """

    extra_inputs = ("masked_lm_positions",)
    label_keys = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")

    def __init__(self, config: BertConfig | Mapping[str, Any], name: str = "bert_pretraining",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        policy = self.dtype_policy
        self.masked_lm = MaskedLMHead(config.vocab_size, config.hidden_size, config.hidden_act,
                                      config.initializer_range, tf1_scope="cls/predictions",
                                      name="predictions", dtype=policy)
        self.next_sentence = OutputProjection(2, config.hidden_size, config.initializer_range,
                                              tf1_scope="cls/seq_relationship",
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

    def fit_loss(self, features, outputs):
        """masked LM sum(w * nll) / (sum(w) + 1e-5) plus the mean NSP loss, as the original."""
        return (nll(outputs["masked_lm_logits"], features["masked_lm_ids"], features["masked_lm_weights"], 1e-5)
                + nll(outputs["next_sentence_logits"], features["next_sentence_labels"]))

    def get_config(self):
        return _model_config(self, {})


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertClassifierModel(_BertWithHeads):
    """BertModel + dropout + `output_weights`/`output_bias` on the pooled output (run_classifier).

    The original applies dropout 0.1 (fixed, not from the config) before the projection.
    returns: logits, probabilities, log_probs [B, num_labels], float32.
    fit: label_ids in the features; mean NLL, or squared error with num_labels=1 (regression, as
    the classifier program builds it for STS-B).
    """

    head_scope, head_name = "", "classifier"
    label_keys = ("label_ids",)

    def __init__(self, config: BertConfig | Mapping[str, Any], num_labels: int,
                 dropout_rate: float = 0.1, name: str = "bert_classifier", **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        self.num_labels = int(num_labels)
        self.dropout_rate = dropout_rate
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.classifier = OutputProjection(self.num_labels, config.hidden_size,
                                           config.initializer_range, tf1_scope=self.head_scope,
                                           name=self.head_name, dtype=self.dtype_policy)
        self.classifier.build()
        self.built = True

    def call(self, inputs, training=False):
        pooled = self.bert.pooled_output(inputs, training=training)
        logits = self.classifier(self.dropout(pooled, training=training))
        return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                "log_probs": tf.nn.log_softmax(logits)}

    def fit_loss(self, features, outputs):
        """run_classifier's loss: the mean NLL (squared error for one output)."""
        if self.num_labels == 1:
            return squared_error(outputs["logits"], features["label_ids"])
        return nll(outputs["logits"], features["label_ids"])

    def metric_targets(self, features, outputs):
        logits = outputs["logits"]
        return features["label_ids"], (logits[:, 0] if self.num_labels == 1 else logits), None

    def get_config(self):
        return _model_config(self, {"num_labels": self.num_labels,
                                    "dropout_rate": self.dropout_rate})


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertSpanModel(_BertWithHeads):
    """BertModel + cls/squad start/end projection on every token (run_squad).

    returns: start_logits, end_logits [B, T], float32.
    fit: start_positions and end_positions in the features.
    """

    label_keys = ("start_positions", "end_positions")

    def __init__(self, config: BertConfig | Mapping[str, Any], name: str = "bert_span",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        self.span = OutputProjection(2, config.hidden_size, config.initializer_range,
                                     tf1_scope="cls/squad", name="squad", dtype=self.dtype_policy)
        self.span.build()
        self.built = True

    def call(self, inputs, training=False):
        sequence_output = self.bert(inputs, training=training)["sequence_output"]
        logits = self.span(sequence_output)  # [B, T, 2]
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def fit_loss(self, features, outputs):
        """run_squad's loss: (mean start NLL + mean end NLL) / 2."""
        return (nll(outputs["start_logits"], features["start_positions"])
                + nll(outputs["end_logits"], features["end_positions"])) / 2.0

    def get_config(self):
        return _model_config(self, {})


TOKEN_CLASSIFICATION_SCOPE = "cls/token_classification"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertTokenClassifierModel(BertClassifierModel):
    """BertModel + dropout + a softmax layer on every token (token tagging: run_ner).

    The original release has no tagging head; its variables are ours, named in its style:
    `cls/token_classification/output_weights` [num_labels, hidden] and `.../output_bias`
    (Hugging Face's BertForTokenClassification `classifier.weight` / `classifier.bias`).
    Dropout 0.1 before the projection, as the classifier (and Hugging Face's hidden_dropout_prob).
    returns: logits [B, T, num_labels], float32.
    fit: label_ids and label_weights [B, T] in the features (the mean NLL over the scored words).
    """

    head_scope, head_name = TOKEN_CLASSIFICATION_SCOPE, "token_classifier"
    label_keys = ("label_ids", "label_weights")

    def __init__(self, config: BertConfig | Mapping[str, Any], num_labels: int,
                 dropout_rate: float = 0.1, name: str = "bert_token_classifier", **kwargs):
        super().__init__(config, num_labels, dropout_rate, name=name, **kwargs)

    def call(self, inputs, training=False):
        sequence_output = self.bert(inputs, training=training)["sequence_output"]
        return {"logits": self.classifier(self.dropout(sequence_output, training=training))}

    def fit_loss(self, features, outputs):
        """run_ner's loss: sum(w * nll) / sum(w) over the tokens, label_weights marking the scored words."""
        return nll(outputs["logits"], features["label_ids"], features["label_weights"])

    def metric_targets(self, features, outputs):
        return features["label_ids"], outputs["logits"], features["label_weights"]


MULTIPLE_CHOICE_SCOPE = "cls/multiple_choice"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertMultipleChoiceModel(_BertWithHeads):
    """BertModel + dropout + one learned vector scoring each choice's pooled output (SWAG: run_swag).

    The paper's SWAG setup (section 4.4): each choice is its own packed row, `[CLS] context [SEP]
    question + ending [SEP]`; the pooled vector of each is scored by one vector and a softmax runs
    over the choices. The original release has no such head; its variables are ours, named in its
    style: `cls/multiple_choice/output_weights` [1, hidden] and `.../output_bias` [1] (Hugging
    Face's BertForMultipleChoice `classifier.weight` / `classifier.bias`). Dropout 0.1 before the
    projection, as the classifier.
    inputs: input_ids, input_mask, segment_ids [B, num_choices, T].
    returns: logits, probabilities, log_probs [B, num_choices], float32.
    fit: label_ids [B] (the right choice) in the features; the mean NLL over the choices' softmax.
    """

    label_keys = ("label_ids",)

    def __init__(self, config: BertConfig | Mapping[str, Any], dropout_rate: float = 0.1,
                 name: str = "bert_multiple_choice", **kwargs):
        super().__init__(name=name, **kwargs)
        config = self._make_bert(config)
        self.dropout_rate = dropout_rate
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.classifier = OutputProjection(1, config.hidden_size, config.initializer_range,
                                           tf1_scope=MULTIPLE_CHOICE_SCOPE, name="multiple_choice",
                                           dtype=self.dtype_policy)
        self.classifier.build()
        self.built = True

    def call(self, inputs, training=False):
        shape = tf.shape(inputs["input_ids"])  # [B, N, T]: BERT reads the B*N choices as rows
        rows = {key: tf.reshape(inputs[key], [-1, shape[-1]]) for key in TEXT_INPUTS if key in inputs}
        pooled = self.bert.pooled_output(rows, training=training)
        logits = tf.reshape(self.classifier(self.dropout(pooled, training=training)), shape[:2])
        return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                "log_probs": tf.nn.log_softmax(logits)}

    def serving_input_spec(self) -> dict[str, keras.InputSpec]:
        """int32 [batch, choices, seq] inputs (all three dynamic)."""
        return {name: keras.InputSpec(shape=(None, None, None), dtype="int32", name=name)
                for name in TEXT_INPUTS}

    def fit_loss(self, features, outputs):
        """The mean NLL of the right choice."""
        return nll(outputs["logits"], features["label_ids"])

    def metric_targets(self, features, outputs):
        return features["label_ids"], outputs["logits"], None

    def get_config(self):
        return _model_config(self, {"dropout_rate": self.dropout_rate})
