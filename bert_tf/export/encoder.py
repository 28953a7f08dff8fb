"""The encoder SavedModel in TF Hub's BERT convention, loadable with TensorFlow alone (no bert_tf).

    encoder = tf.saved_model.load("out/encoder")
    outputs = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments})
    outputs["pooled_output"]     # [batch, hidden]; "default" is the same tensor
    outputs["sequence_output"]   # [batch, seq, hidden]
    outputs["encoder_outputs"]   # a list: each Transformer layer's [batch, seq, hidden], the last one
                                 # equal to sequence_output
    encoder(inputs, training=True)             # with dropout, for fine-tuning the restored weights
    encoder.signatures["serving_default"](input_word_ids=..., input_mask=..., input_type_ids=...)

What TF Hub's encoders (tensorflow/models `official/nlp/tools/export_tfhub_lib.py`) offer, kept: the
three int32 [batch, seq] inputs by those names, batch and length both dynamic (up to the config's
max_position_embeddings); the callable object with `training` and the outputs above, `encoder_outputs`
a list; `variables`, `trainable_variables` and an empty `regularization_losses` (the Reusable
SavedModel API, so `hub.KerasLayer` can fine-tune it); `vocab_file` (an asset) and `do_lower_case`
(a variable) beside it, as their encoders carry for users who tokenize themselves.

With the masked-LM head (a pre-trained checkpoint), `encoder.mlm` is TF Hub's masked-LM sub-object:
`encoder.mlm({...the three inputs..., "masked_lm_positions": int32 [batch, predictions]})` returns the
outputs above plus `mlm_logits` [batch, predictions, vocab_size] (the original's `cls/predictions`
head: transform, LayerNorm, the tied word embeddings, output_bias).

The serving signature must be a flat dict of tensors, so there the list is spread into
`encoder_outputs_0` ... `encoder_outputs_{L-1}` (the list's indexes; TF Hub's Keras 2 exports named
them after Keras layers, e.g. `transformer_layer_1`, which says nothing about their order), beside
`default`, `pooled_output` and `sequence_output`.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.model.bert import BertModel
from bert_tf.model.keras_native import flat_outputs

# TF Hub's input names and ours (bert_tf.model.bert.unpack_inputs), in order.
INPUT_NAMES = {"input_word_ids": "input_ids", "input_mask": "input_mask", "input_type_ids": "segment_ids"}


def input_signature() -> dict[str, tf.TensorSpec]:
    """The encoder's inputs: int32 [batch, seq] by TF Hub's names, both dimensions dynamic."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}


def hub_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """BertModel outputs -> TF Hub's: default (= pooled_output), pooled_output, sequence_output,
    encoder_outputs (a list, one per layer); float32 whatever the model computes in (the signature's dtype)."""
    pooled = tf.cast(outputs["pooled_output"], tf.float32)
    return {"default": pooled, "pooled_output": pooled, "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
            "encoder_outputs": [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]]}


class MaskedLM(tf.Module):
    """TF Hub's `mlm` sub-object: the encoder's outputs plus `mlm_logits` at `masked_lm_positions`."""

    def __init__(self, model):
        super().__init__()
        self._model = model

    @tf.function(autograph=False, input_signature=[
        input_signature() | {"masked_lm_positions": tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")}])
    def __call__(self, inputs):
        ours = {name: inputs[hub_name] for hub_name, name in INPUT_NAMES.items()}
        outputs = self._model(ours | {"masked_lm_positions": inputs["masked_lm_positions"]}, training=False)
        return hub_outputs(outputs) | {"mlm_logits": tf.cast(outputs["masked_lm_logits"], tf.float32)}


def encoder_module(model: BertModel, vocab_file: str | None = None,
                   do_lower_case: bool | None = None, mlm=None) -> tf.train.Checkpoint:
    """The object `save_encoder` saves: callable (TF Hub's call), with the model's variables.

    A tf.train.Checkpoint as the root (as Model Garden's export wrappers), so that the attributes
    `variables` etc. are saved as they are (tf.Module would compute them instead).
    """

    def run(inputs, training):
        ours = {name: inputs[hub_name] for hub_name, name in INPUT_NAMES.items()}
        return hub_outputs(model(ours, training=training))

    @tf.function(autograph=False)
    def call(inputs, training=False):
        return run(inputs, training)

    @tf.function(input_signature=list(input_signature().values()), autograph=False)
    def serve(input_word_ids, input_mask, input_type_ids):
        inputs = {"input_word_ids": input_word_ids, "input_mask": input_mask, "input_type_ids": input_type_ids}
        return flat_outputs(call(inputs, training=False))  # the traced call, not a second trace of the model

    for training in (False, True):  # the two traces a restored object can be called with
        call.get_concrete_function(input_signature(), training=training)
    root = tf.train.Checkpoint()
    root.__call__ = call
    root.serve = serve
    root.variables = list(model.variables)
    root.trainable_variables = list(model.trainable_variables)
    root.regularization_losses = []
    if vocab_file:
        root.vocab_file = tf.saved_model.Asset(vocab_file)
    if do_lower_case is not None:
        root.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    if mlm is not None:
        root.mlm = MaskedLM(mlm)
    return root


def save_encoder(folder: str | os.PathLike, model: BertModel, vocab_file: str | None = None,
                 do_lower_case: bool | None = None, mlm=None) -> None:
    """Writes the encoder SavedModel into `folder` (the caller makes it atomic: bert_tf.export.program);
    `mlm`: the BertPretrainingModel around `model`, for the `mlm` sub-object."""
    root = encoder_module(model, vocab_file, do_lower_case, mlm)
    tf.saved_model.save(root, os.fspath(folder), signatures={"serving_default": root.serve})
