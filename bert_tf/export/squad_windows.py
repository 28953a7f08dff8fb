"""SQuAD's document windows in the graph: the original `read_squad_examples` (eval side) and
`convert_examples_to_features(is_training=False)` as TensorFlow ops, for a batch of questions.

What the original does, and how it is done here (`bert_tf.tasks.squad.data` is the Python twin):

* the context is split on space, tab, CR, LF and U+202F into "doc tokens" (`tf_text.regex_split`,
  with the code-point offset of each word in its context, which SQuAD's answer_start counts in);
* each doc token is tokenized on its own by `FullTokenizer` (`Tokenize.words_and_pieces` on the flat
  list of doc tokens: every line of the in-graph tokenizer is one doc token, as in the original);
* the question's wordpieces are cut to max_query_length; windows of max_seq_length - len(query) - 3
  doc pieces start 0, s, 2s, ... with s = min(doc_stride, window size), the last one reaching the
  end of the document (the closed form of the original's `while` loop); a context without pieces
  gets no window, as in the original;
* each window is packed `[CLS] query [SEP] window [SEP]` and padded to max_seq_length (always to
  max_seq_length, never to the batch's longest row: the original's `_get_best_indexes` ranks the
  logits of every position, padding included, so padding positions take top-n_best slots);
* `token_is_max_context`: the first window with the highest min(left, right) + 0.01 * length
  score, computed in float64 as Python does (ties decide between windows).
"""
from __future__ import annotations

from typing import NamedTuple

from bert_tf._env import tf  # TensorFlow, imported quietly
import tensorflow_text as tf_text

from bert_tf.export.preprocessor import Tokenize

SQUAD_WHITESPACE = "[ \t\r\n\u202f]+"  # read_squad_examples' is_whitespace


class WindowSettings(NamedTuple):
    """The original's flags for windows, and the packing ids."""
    seq_length: int
    doc_stride: int
    max_query_length: int
    cls_id: int
    sep_id: int


class Context(NamedTuple):
    """A batch of contexts as doc tokens and wordpieces; "flat" = over all doc tokens of the batch."""
    words: tf.RaggedTensor  # [batch, (doc tokens)] strings
    char_start: tf.Tensor  # flat int64: code-point offset of each doc token in its context
    char_end: tf.Tensor  # flat int64, exclusive
    basic_words: tf.RaggedTensor  # [flat doc tokens, (BasicTokenizer words)] strings
    doc_ids: tf.RaggedTensor  # [batch, (pieces)] int32: the original's all_doc_tokens, as ids
    tok_to_orig: tf.Tensor  # [all pieces] int64: flat doc token of each piece


class Windows(NamedTuple):
    """The features of every window of the batch, in the original's order (example, then window)."""
    example: tf.Tensor  # [W] int64: example (row of the batch) of each window
    span_index: tf.Tensor  # [W] int64: doc_span_index
    span_start: tf.Tensor  # [W] int64: first doc piece of the window
    span_length: tf.Tensor  # [W] int64
    query_length: tf.Tensor  # [W] int64: the window's doc pieces start at query_length + 2
    input_ids: tf.Tensor  # [W, seq_length] int32
    input_mask: tf.Tensor
    segment_ids: tf.Tensor
    max_context: tf.Tensor  # [W, seq_length] bool: token_is_max_context (False outside the document)
    token_to_orig: tf.Tensor  # [W, seq_length] int64: doc token index in its example, -1 outside


def _char_offsets(context: tf.Tensor, byte_offsets: tf.RaggedTensor) -> tf.Tensor:
    """Byte offsets into each context [batch, (n)] -> code-point offsets, flat."""
    _, char_bytes = tf.strings.unicode_decode_with_offsets(context, "UTF-8")
    base = tf.cumsum(tf.cast(tf.strings.length(context), tf.int64), exclusive=True)
    starts = char_bytes + tf.expand_dims(base, 1)  # increasing over the whole batch
    at = tf.searchsorted(starts.flat_values, (byte_offsets + tf.expand_dims(base, 1)).flat_values, side="left",
                         out_type=tf.int64)
    return at - tf.gather(starts.row_splits, byte_offsets.value_rowids())


def split_context(context: tf.Tensor, tokenize: Tokenize) -> Context:
    """read_squad_examples' doc tokens of each context and their wordpieces (FullTokenizer, token by token)."""
    words, begin, end = tf_text.regex_split_with_offsets(context, SQUAD_WHITESPACE, "")
    basic, pieces = tokenize.words_and_pieces(words.flat_values)
    by_word = pieces.merge_dims(1, 2)  # [flat doc tokens, (pieces)]
    doc = tf.RaggedTensor.from_row_splits(by_word.values, tf.gather(by_word.row_splits, words.row_splits),
                                          validate=False)
    return Context(words, _char_offsets(context, begin), _char_offsets(context, end), basic, doc,
                   by_word.value_rowids())


def query_pieces(question: tf.Tensor, tokenize: Tokenize, max_query_length: int) -> tf.RaggedTensor:
    """The question's wordpiece ids [batch, (pieces)], cut to max_query_length."""
    return tokenize(question).merge_dims(1, -1)[:, :max_query_length]


def _spans(query_length: tf.Tensor, doc_length: tf.Tensor, s: WindowSettings) -> tuple[tf.Tensor, ...]:
    """(example, span_index, span_start, span_length) of every window, the window count of each example (the
    original's `doc_spans`), and the reach: how many windows away a window can still share a piece with
    another, over the batch (floor((window size - 1) / stride))."""
    max_doc = s.seq_length - 3 - query_length
    step = tf.minimum(tf.constant(s.doc_stride, tf.int64), max_doc)
    beyond = tf.maximum(doc_length - max_doc, 0)
    count = tf.where(doc_length > 0, 1 + (beyond + step - 1) // step, 0)
    example = tf.repeat(tf.range(tf.size(count, tf.int64)), count)
    index = tf.range(tf.size(example, tf.int64)) - tf.gather(tf.cumsum(count, exclusive=True), example)
    start = index * tf.gather(step, example)
    length = tf.minimum(tf.gather(doc_length, example) - start, tf.gather(max_doc, example))
    reach = tf.reduce_max(tf.concat([(max_doc - 1) // step, [0]], 0))
    return example, index, start, length, count, reach


def _gather_or_zero(values: tf.Tensor, index: tf.Tensor, use: tf.Tensor) -> tf.Tensor:
    """values[index] where `use`, else 0 (index clipped, so it may be anything where not used)."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], 0)
    return tf.where(use, tf.gather(padded, tf.clip_by_value(index, 0, tf.size(values, tf.int64))),
                    tf.zeros([], values.dtype))


def _is_max_context(example: tf.Tensor, index: tf.Tensor, start: tf.Tensor, length: tf.Tensor, count: tf.Tensor,
                    reach: tf.Tensor, position: tf.Tensor, in_doc: tf.Tensor) -> tf.Tensor:
    """token_is_max_context of each (window, column): [W, seq]; position = doc piece at the column.

    Compares each window with the windows of its example within `reach` of it, the only ones that can hold the
    same piece (so a document of thousands of windows costs [W, seq, 2 * reach + 1], not [W, seq, W]), in
    float64 as Python.
    """
    offset = tf.range(-reach, reach + 1)[None, :]  # [1, K]
    other_index = index[:, None] + offset  # [W, K]: the other window's span_index
    exists = (other_index >= 0) & (other_index < tf.gather(count, example)[:, None])
    first = tf.gather(tf.cumsum(count, exclusive=True), example)  # first window of each window's example
    other = tf.where(exists, first[:, None] + other_index, 0)
    o_start = tf.gather(start, other)[:, None, :]  # [W, 1, K]
    o_end = o_start + tf.gather(length, other)[:, None, :] - 1
    p = position[:, :, None]  # [W, seq, 1]
    score = (tf.cast(tf.minimum(p - o_start, o_end - p), tf.float64)
             + 0.01 * tf.cast(tf.gather(length, other)[:, None, :], tf.float64))
    contains = exists[:, None, :] & (p >= o_start) & (p <= o_end)
    k = offset[:, None, :]  # [1, 1, K]: before (< 0), itself (0) or after (> 0)
    own = tf.reduce_max(tf.where(k == 0, score, -1.0), axis=2, keepdims=True)
    beaten = contains & (((k < 0) & (score >= own)) | ((k > 0) & (score > own)))
    return in_doc & ~tf.reduce_any(beaten, axis=2)


def windows(query: tf.RaggedTensor, ctx: Context, s: WindowSettings) -> Windows:
    """Every window's model inputs and bookkeeping, built on a [W, seq_length] grid of columns."""
    qlen = query.row_lengths()
    example, index, start, length, count, reach = _spans(qlen, ctx.doc_ids.row_lengths(), s)
    q = tf.gather(qlen, example)[:, None]
    col = tf.range(s.seq_length, dtype=tf.int64)[None, :]
    in_query = (col >= 1) & (col <= q)
    in_doc = (col >= q + 2) & (col < q + 2 + length[:, None])
    position = start[:, None] + col - q - 2  # doc piece at the column
    doc_at = tf.gather(ctx.doc_ids.row_splits, example)[:, None] + position
    ids = (_gather_or_zero(query.values, tf.gather(query.row_splits, example)[:, None] + col - 1, in_query)
           + _gather_or_zero(ctx.doc_ids.values, doc_at, in_doc)
           + tf.where(col == 0, s.cls_id, 0)
           + tf.where((col == q + 1) | (col == q + 2 + length[:, None]), s.sep_id, 0))
    words_before = tf.gather(ctx.words.row_splits, example)[:, None]
    orig = tf.where(in_doc, _gather_or_zero(ctx.tok_to_orig, doc_at, in_doc) - words_before, -1)
    segment = (col >= q + 2) & (col <= q + 2 + length[:, None])
    return Windows(example, index, start, length, tf.squeeze(q, 1), tf.cast(ids, tf.int32),
                   tf.cast(col < q + 3 + length[:, None], tf.int32), tf.cast(segment, tf.int32),
                   _is_max_context(example, index, start, length, count, reach, position, in_doc), orig)
