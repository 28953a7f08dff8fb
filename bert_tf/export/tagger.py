"""The tagger SavedModel (run_ner.py's model): sentences in, one tag per word out.

    tagger = tf.saved_model.load("served/tagger")                 # import tensorflow_text first
    out = tagger.signatures["serving_default"](text=tf.constant(["EU rejects German call ."]))
    out["words"], out["tags"]   # string [batch, words]: the sentence's words (split on whitespace, as
                                # CoNLL files hold them) and their tags; padded with ""
    out["tag_ids"]              # int32 [batch, words]; -1 on padding and on words cut off by seq_length
    out["probabilities"]        # float32 [batch, words, labels]
    out["word_count"], out["tagged_count"]   # int32 [batch]: words, and words that fitted and were tagged

As run_ner.py labels a word: on its first sub-token (FullTokenizer's pieces of the word; a word that
gives none is [UNK]), no CRF. Each sentence is encoded alone (run_ner's --context=sentence): a server
gets sentences, not documents. Words whose first sub-token falls beyond --seq_length get no tag.
"""
from __future__ import annotations

import os
from typing import Sequence

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.export.serving import TextModule, call_in_chunks, string_table
from bert_tf.model.heads import BertTokenClassifierModel


class Tagger(TextModule):
    """The SavedModel's root: `__call__` / `serve`, `labels` and the text settings."""

    def __init__(self, model: BertTokenClassifierModel, vocab_file: str, do_lower_case: bool, seq_length: int,
                 labels: Sequence[str]):
        super().__init__(vocab_file, do_lower_case, seq_length)
        if len(labels) != model.num_labels:
            raise ValueError(f"the tagger has {model.num_labels} outputs, got labels {labels!r}")
        self._model = model
        self.model_variables = list(model.variables)
        self.labels = string_table(labels, "labels")

    def word_pieces(self, words: tf.Tensor) -> tf.RaggedTensor:
        """Words [n] -> ids [n, (pieces)]; a word that gives no piece is [UNK], as run_ner."""
        pieces = self.pieces(words)
        empty = tf.equal(pieces.row_lengths(), 0)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(empty, tf.int64))], self.unknown_id), tf.cast(empty, tf.int64))
        return tf.concat([pieces, unknown], 1)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        words = tf.strings.split(text)  # [batch, (words)]
        per_word = self.word_pieces(words.values)  # [words, (pieces)]
        inputs = self.pack(words.with_values(per_word).merge_dims(1, 2))
        # each word's first piece: 1 ([CLS]) + the pieces of the words before it in its sentence
        counts = words.with_values(per_word.row_lengths())
        first = 1 + tf.cumsum(counts, axis=1, exclusive=True)
        tagged = first < tf.cast(tf.reduce_sum(inputs["input_mask"], 1, keepdims=True), tf.int64) - 1
        logits = call_in_chunks(self._model, inputs, {"logits": 3})["logits"]  # [batch, seq, labels]
        dense_first = tf.minimum(first.to_tensor(), tf.cast(tf.shape(logits)[1] - 1, tf.int64))
        word_logits = tf.gather(logits, dense_first, batch_dims=1)
        real = tagged.to_tensor(False)
        tag_ids = tf.where(real, tf.argmax(word_logits, -1, output_type=tf.int32), -1)
        return {"words": words.to_tensor(""), "tags": tf.where(real, tf.gather(self.labels, tf.maximum(tag_ids, 0)), ""),
                "tag_ids": tag_ids, "probabilities": tf.where(real[..., tf.newaxis], tf.nn.softmax(word_logits), 0.0),
                "word_count": tf.cast(words.row_lengths(), tf.int32),
                "tagged_count": tf.reduce_sum(tf.cast(real, tf.int32), 1)}

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        return self(text)


def save_tagger(folder: str, model: BertTokenClassifierModel, vocab_file: str, do_lower_case: bool,
                seq_length: int, labels: Sequence[str]) -> None:
    """Writes the tagger SavedModel into `folder` (made atomic by the caller)."""
    module = Tagger(model, vocab_file, do_lower_case, seq_length, labels)
    tf.saved_model.save(module, os.fspath(folder), signatures={"serving_default": module.serve.get_concrete_function()})
