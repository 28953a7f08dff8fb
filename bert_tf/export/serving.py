"""What every end-to-end task SavedModel shares: the exact in-graph tokenizer, packing to the batch's
longest row, the model's inputs, and the settings a server may want to read back.

A task SavedModel (classifier, tagger, fill-mask; SQuAD in bert_tf.export.squad) takes strings and
gives the task's answer: the preprocessor's tokenization (`FullTokenizer`'s ids) and the original's
packing and truncation run in the graph, then the fine-tuned model. Rows are packed to the longest
row of the batch, up to the exported `seq_length`, not always to `seq_length`: the model's outputs
for a row do not depend on its padding (attention masks it), and a short request then costs what it
is, not what the longest possible one costs. The model runs MODEL_ROWS rows at a time within a request
(`call_in_chunks`), so that a request's memory is bounded whatever its number of rows or SQuAD windows.
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.export.encoder import INPUT_NAMES
from bert_tf.export.preprocessor import Tokenize, kept_lengths, pack_rows, special_token_ids
from bert_tf.text import tokenization


MODEL_ROWS = 64  # rows (SQuAD windows, choices' examples) per model call within one request


def call_in_chunks(model, inputs: Mapping[str, tf.Tensor], ranks: Mapping[str, int],
                   rows: int = MODEL_ROWS) -> dict[str, tf.Tensor]:
    """model(inputs)[name] as float32 for each output `name` of `ranks` (its rank), computed `rows` rows at a
    time, one after the other, and concatenated: 10,000 rows or a 1 MB document's thousands of SQuAD windows
    need the memory of `rows` rows (attention's [rows, heads, seq, seq] the largest), not of all at once.
    A row's outputs do not depend on the rows beside it, so chunks change nothing but the memory."""
    total = tf.shape(inputs["input_ids"])[0]
    count = tf.maximum((total + rows - 1) // rows, 1)  # an empty request still makes one (empty) call
    arrays = tuple(tf.TensorArray(tf.float32, size=count, infer_shape=False,
                                  element_shape=tf.TensorShape([None] * rank)) for rank in ranks.values())

    def body(i, arrays):
        out = model({name: value[i * rows:(i + 1) * rows] for name, value in inputs.items()}, training=False)
        return i + 1, tuple(a.write(i, tf.cast(out[name], tf.float32)) for a, name in zip(arrays, ranks))

    _, arrays = tf.while_loop(lambda i, _: i < count, body, (tf.constant(0), arrays), parallel_iterations=1)
    return {name: a.concat() for name, a in zip(ranks, arrays)}


class TextModule(tf.Module):
    """Base of the task SavedModels: `tokenize` (the preprocessor's), the packing ids, and the settings
    `vocab_file` (an asset), `do_lower_case`, `seq_length` (variables) readable from the loaded object."""

    def __init__(self, vocab_file: str, do_lower_case: bool, seq_length: int):
        super().__init__()
        vocab = tokenization.load_vocab(vocab_file)
        self.special_ids = special_token_ids(vocab)
        self.unknown_id = vocab["[UNK]"]
        self.tokenize = Tokenize(vocab, do_lower_case)
        self.vocab_file = tf.saved_model.Asset(os.fspath(vocab_file))
        self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
        self.seq_length = tf.Variable(seq_length, trainable=False, name="seq_length")
        self._max_length = seq_length

    def pieces(self, text: tf.Tensor) -> tf.RaggedTensor:
        """Strings [batch] -> int32 wordpiece ids [batch, (pieces)], those of FullTokenizer."""
        return self.tokenize(text).merge_dims(1, -1)

    def pack(self, a: tf.RaggedTensor, b: tf.RaggedTensor | None = None) -> dict[str, tf.Tensor]:
        """Our model's int32 inputs for `[CLS] A [SEP] (B [SEP])`, truncated as the original, padded to
        the batch's longest packed row (at most seq_length)."""
        budget = tf.constant(self._max_length - 2, tf.int64)
        len_a = a.row_lengths()
        len_b = tf.zeros_like(len_a) if b is None else b.row_lengths()
        has_b = len_b > 0
        keep_a, keep_b = kept_lengths(len_a, len_b, budget - tf.cast(has_b, tf.int64))
        longest = tf.reduce_max(tf.concat([keep_a + keep_b + 2 + tf.cast(has_b, tf.int64), [2]], 0))
        packed = pack_rows(a, b, longest, self.special_ids["start_of_sequence_id"],
                           self.special_ids["end_of_segment_id"])
        return {ours: packed[hub] for hub, ours in INPUT_NAMES.items()}

    def pack_text(self, segments: Sequence[tf.Tensor]) -> dict[str, tf.Tensor]:
        """One or two string tensors [batch] -> the model's inputs."""
        return self.pack(*[self.pieces(s) for s in segments])


def string_table(values: Sequence[str], name: str) -> tf.Variable:
    """Strings stored in the SavedModel (e.g. label names), readable from the loaded object."""
    return tf.Variable(tf.constant(list(values), tf.string), trainable=False, name=name)
