"""The end-to-end classifier SavedModel: sentences (or pairs) in, probabilities and label out.

    classifier = tf.saved_model.load("served/classifier")        # import tensorflow_text first
    out = classifier.signatures["serving_default"](text=tf.constant(["a fine film"]))
    out["probabilities"]  # float32 [batch, labels]; out["label"]: the names, out["label_id"]: the index
    classifier.signatures["serving_pair"](text_a=..., text_b=...)  # MRPC, MNLI, ...: sentence pairs
    classifier(["a fine film"]) / classifier([questions, sentences])  # the same from Python
    classifier.labels                                              # the label names, in output order

What `run_classifier.py --do_predict` computes, as strings in and answers out: FullTokenizer's ids and
the original's truncation in the graph (bert_tf.export.serving), the fine-tuned model without
dropout, softmax. The label names are those the run trained with (its export's label_list.txt, or a
Hugging Face folder's id2label; LABEL_0, ... otherwise). A one-output (regression, STS-B) model
gives `score` instead of probabilities and labels.
"""
from __future__ import annotations

import os
from typing import Sequence

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.export.preprocessor import OneOrTwoTexts
from bert_tf.export.serving import TextModule, call_in_chunks, string_table
from bert_tf.model.heads import BertClassifierModel

_TEXT = tf.TensorSpec([None], tf.string)


class TextClassifier(OneOrTwoTexts, TextModule):
    """The SavedModel's root: `__call__`, `serve`, `serve_pair`, `labels` and the text settings."""

    def __init__(self, model: BertClassifierModel, vocab_file: str, do_lower_case: bool, seq_length: int,
                 labels: Sequence[str] | None):
        super().__init__(vocab_file, do_lower_case, seq_length)
        self.regression = model.num_labels == 1
        if not self.regression and (labels is None or len(labels) != model.num_labels):
            raise ValueError(f"the classifier has {model.num_labels} outputs, got labels {labels!r}")
        self._model = model
        self.model_variables = list(model.variables)
        if not self.regression:
            self.labels = string_table(labels, "labels")

    @tf.function(autograph=False)
    def __call__(self, text) -> dict[str, tf.Tensor]:
        segments = list(text) if isinstance(text, (list, tuple)) else [text]
        logits = call_in_chunks(self._model, self.pack_text(segments), {"logits": 2})["logits"]
        if self.regression:
            return {"logits": logits, "score": logits[:, 0]}
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits), "label_id": label_id,
                "label": tf.gather(self.labels, label_id)}


def save_classifier(folder: str, model: BertClassifierModel, vocab_file: str, do_lower_case: bool,
                    seq_length: int, labels: Sequence[str] | None) -> None:
    """Writes the classifier SavedModel into `folder` (made atomic by the caller)."""
    module = TextClassifier(model, vocab_file, do_lower_case, seq_length, labels)
    module.__call__.get_concrete_function(_TEXT)
    module.__call__.get_concrete_function([_TEXT, _TEXT])
    signatures = {"serving_default": module.serve.get_concrete_function(),
                  "serving_pair": module.serve_pair.get_concrete_function()}
    tf.saved_model.save(module, os.fspath(folder), signatures=signatures)
