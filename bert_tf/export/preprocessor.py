"""The preprocessor SavedModel: strings in, BERT's three int inputs out, with `FullTokenizer`'s ids, in the graph.

TF Hub's preprocessor convention (tensorflow.org/hub/common_saved_model_apis/text), loaded with
`import tensorflow_text` (it registers the WordPiece op) and `tf.saved_model.load(folder)`:

* `tokenize(text)`: strings [batch] -> int32 RaggedTensor [batch, (words), (wordpieces)];
  `tokenize.get_special_tokens_dict()`: vocab_size, start_of_sequence_id, end_of_segment_id,
  padding_id and (if the vocab has it) mask_id;
* `bert_pack_inputs(segments, seq_length=...)`: a list of 1 or 2 tokenized segments (ragged, 2 or 3
  dimensions) -> dict of int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq_length];
  seq_length defaults to the exported one;
* `__call__(text)` or `__call__([text_a, text_b])`, and the signatures `serving_default` (input `text`)
  and `serving_pair` (inputs `text_a`, `text_b`): strings packed to the exported seq_length.

Tokenization is `normalization.basic_tokenize` (the original BasicTokenizer as TF ops on tables built
from the exact tokenizer's own rules) and then tensorflow-text's `FastWordpieceTokenizer` word by word
(no pre-tokenization, so its ICU normalisation never runs), with the original's limit of 200
characters (not bytes) per word applied before it. Chosen over shipping our C engine as a custom op:
a custom op's shared library must sit beside the SavedModel and match the reader's TensorFlow build,
while these ops load wherever tensorflow and tensorflow-text do.

Packing is the original's, row by row: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, type ids 0 then 1,
padding with 0; a pair loses tokens from the end of its longer segment, B on ties (`_truncate_seq_pair`).
TF Hub's `BertPackInputs` trims round-robin instead; for two segments that keeps the same counts (checked
with tensorflow-text 2.21 on every pair of lengths up to 15 and budgets up to 13), but it packs a B
without tokens as `[CLS] A [SEP] [SEP]`, where the original (`if tokens_b:`) and this packer pack that
row as a single segment.
"""
from __future__ import annotations

import os

from bert_tf._env import tf  # TensorFlow, imported quietly
import tensorflow_text as tf_text

from bert_tf.errors import BertTfError
from bert_tf.export import normalization
from bert_tf.text import tokenization
from bert_tf.text.fast_tokenization import library_vocab

_MAX_BYTES_PER_WORD = 4 * tokenization.MAX_INPUT_CHARS_PER_WORD  # never reached: longer words are cut first
_UNKNOWN_WORD = "\x00"  # NUL is in no vocab (load_vocab refuses it), so WordPiece makes it [UNK]


class PreprocessorError(BertTfError, ValueError):
    """The preprocessor cannot be built from these settings or this vocab."""


def special_token_ids(vocab: dict[str, int]) -> dict[str, int]:
    """TF Hub's special-token dict; padding_id is 0, what the original pads with."""
    missing = [t for t in ("[CLS]", "[SEP]", "[UNK]") if t not in vocab]
    if missing:
        raise PreprocessorError(f"vocab has no {', '.join(missing)} token")
    ids = {"vocab_size": max(vocab.values()) + 1, "start_of_sequence_id": vocab["[CLS]"],
           "end_of_segment_id": vocab["[SEP]"], "padding_id": 0}
    if "[MASK]" in vocab:
        ids["mask_id"] = vocab["[MASK]"]
    return ids


class SpecialTokens(tf.Module):
    """`tokenize.get_special_tokens_dict()`: int32 scalars."""

    def __init__(self, ids: dict[str, int]):
        super().__init__()
        self._ids = tuple(ids.items())

    @tf.function(autograph=False, input_signature=[])
    def __call__(self) -> dict[str, tf.Tensor]:
        return {name: tf.constant(value, tf.int32) for name, value in self._ids}


class Tokenize(tf.Module):
    """Strings [batch] -> wordpiece ids [batch, (words), (pieces)], those of the original FullTokenizer."""

    def __init__(self, vocab: dict[str, int], do_lower_case: bool):
        super().__init__()
        self._tables = normalization.tables(do_lower_case)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            library_vocab(vocab), token_out_type=tf.int32, unknown_token="[UNK]", no_pretokenization=True,
            max_bytes_per_word=_MAX_BYTES_PER_WORD)
        self.get_special_tokens_dict = SpecialTokens(special_token_ids(vocab))

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text: tf.Tensor) -> tf.RaggedTensor:
        return self.words_and_pieces(text)[1]

    def words_and_pieces(self, text: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        """(BasicTokenizer words as strings [batch, (words)], their wordpiece ids [batch, (words), (pieces)]).

        Plain graph code (no tf.function of its own), for callers that also need the words' text,
        e.g. the SQuAD model's `get_final_text`.
        """
        words = normalization.basic_tokenize(text, self._tables)  # [batch, (words)]
        too_long = tf.strings.length(words.values, "UTF8_CHAR") > tokenization.MAX_INPUT_CHARS_PER_WORD
        return words, words.with_values(self._wordpiece.tokenize(tf.where(too_long, _UNKNOWN_WORD, words.values)))


def kept_lengths(len_a: tf.Tensor, len_b: tf.Tensor, budget: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Tokens of A and B that `_truncate_seq_pair` keeps, in closed form, per row.

    Popping one token at a time from the longer side (B on ties) until A + B fits leaves B with
    min(len_b, max(budget - len_a, budget // 2)) and A with the rest of the budget.
    """
    keep_b = tf.minimum(len_b, tf.maximum(budget - len_a, budget // 2))
    over = len_a + len_b > budget
    return tf.where(over, budget - keep_b, len_a), tf.where(over, keep_b, len_b)


def _placed(segment: tf.RaggedTensor, counts: tf.Tensor, offsets: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices [n, 2], ids [n]) putting the first counts[i] pieces of row i at columns offsets[i], ..."""
    rows = segment.value_rowids()
    position = tf.range(tf.size(rows, tf.int64), dtype=tf.int64) - tf.gather(segment.row_starts(), rows)
    keep = position < tf.gather(counts, rows)
    rows, position = tf.boolean_mask(rows, keep), tf.boolean_mask(position, keep)
    return tf.stack([rows, tf.gather(offsets, rows) + position], 1), tf.boolean_mask(segment.values, keep)


def _token_at(token: int, rows: tf.Tensor, columns: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices, ids) putting `token` at (rows[i], columns[i])."""
    return tf.stack([rows, columns], 1), tf.fill(tf.shape(rows), token)


def pack_rows(a: tf.RaggedTensor, b: tf.RaggedTensor | None, seq_length: tf.Tensor, cls_id: int,
              sep_id: int) -> dict[str, tf.Tensor]:
    """`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` per row, truncated and padded to seq_length (int64 scalar).

    Written with scatters into the dense output rather than ragged concatenation, whose shape checks
    cost several seconds of tracing per signature.
    """
    len_a = a.row_lengths()
    len_b = tf.zeros_like(len_a) if b is None else b.row_lengths()
    has_b = len_b > 0
    keep_a, keep_b = kept_lengths(len_a, len_b, seq_length - 2 - tf.cast(has_b, tf.int64))
    rows = tf.range(tf.size(len_a, tf.int64), dtype=tf.int64)
    first = [_token_at(cls_id, rows, tf.zeros_like(rows)), _placed(a, keep_a, tf.ones_like(rows)),
             _token_at(sep_id, rows, keep_a + 1)]
    second = []
    if b is not None:
        rows_b = tf.boolean_mask(rows, has_b)
        second = [_placed(b, keep_b, keep_a + 2),
                  _token_at(sep_id, rows_b, tf.gather(keep_a + keep_b + 2, rows_b))]
    shape = tf.stack([tf.size(len_a, tf.int64), seq_length])
    ids = tf.scatter_nd(tf.concat([i for i, _ in first + second], 0), tf.concat([v for _, v in first + second], 0),
                        shape)
    second_indices = tf.concat([i for i, _ in second], 0) if second else tf.zeros([0, 2], tf.int64)
    types = tf.scatter_nd(second_indices, tf.ones(tf.shape(second_indices)[:1], tf.int32), shape)
    length = keep_a + 2 + tf.where(has_b, keep_b + 1, 0)
    return {"input_word_ids": ids, "input_mask": tf.sequence_mask(length, seq_length, tf.int32),
            "input_type_ids": types}


class BertPackInputs(tf.Module):
    """1 or 2 tokenized segments -> the model's int32 inputs, packed and truncated as the original."""

    def __init__(self, seq_length: int, cls_id: int, sep_id: int):
        super().__init__()
        self.seq_length = seq_length
        self._cls_id, self._sep_id = cls_id, sep_id

    @tf.function(autograph=False)
    def __call__(self, segments, seq_length=None) -> dict[str, tf.Tensor]:
        if not isinstance(segments, (list, tuple)) or len(segments) not in (1, 2):
            raise PreprocessorError("bert_pack_inputs takes a list of 1 or 2 tokenized segments")
        seq_length = tf.cast(self.seq_length if seq_length is None else seq_length, tf.int64)
        tf.debugging.assert_greater_equal(seq_length, tf.constant(3, tf.int64), "seq_length must be at least 3")
        a, b = [_pieces(s) for s in segments] + [None] * (2 - len(segments))
        return pack_rows(a, b, seq_length, self._cls_id, self._sep_id)


def _pieces(segment: tf.RaggedTensor) -> tf.RaggedTensor:
    """A segment as int32 [batch, (pieces)] (words merged)."""
    if segment.ragged_rank > 1:
        segment = segment.merge_dims(1, -1)
    return tf.cast(segment, tf.int32)


class OneOrTwoTexts:
    """The signatures of a module called with one string tensor or a list of two: `serve(text)` and
    `serve_pair(text_a, text_b)` (the preprocessor's and the classifier's)."""

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        return self(text)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                                   tf.TensorSpec([None], tf.string, name="text_b")])
    def serve_pair(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        return self([text_a, text_b])


class BertPreprocessor(OneOrTwoTexts, tf.Module):
    """The root object: `tokenize`, `bert_pack_inputs`, `__call__` and the two signatures."""

    def __init__(self, vocab_file: str, do_lower_case: bool, seq_length: int):
        super().__init__()
        if not isinstance(seq_length, int) or seq_length < 3:
            raise PreprocessorError(f"seq_length must be an integer of at least 3, got {seq_length!r}")
        vocab = tokenization.load_vocab(vocab_file)
        special = special_token_ids(vocab)
        self.tokenize = Tokenize(vocab, do_lower_case)
        self.bert_pack_inputs = BertPackInputs(seq_length, special["start_of_sequence_id"],
                                               special["end_of_segment_id"])
        self.vocab_file = tf.saved_model.Asset(os.fspath(vocab_file))
        self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
        self.seq_length = tf.Variable(seq_length, trainable=False, name="seq_length")

    @tf.function(autograph=False)
    def __call__(self, text) -> dict[str, tf.Tensor]:
        segments = list(text) if isinstance(text, (list, tuple)) else [text]
        return self.bert_pack_inputs([self.tokenize(s) for s in segments])



def _trace(module: BertPreprocessor) -> None:
    """Traces every call form the SavedModel offers (TF Hub's set for bert_pack_inputs)."""
    text = tf.TensorSpec([None], tf.string)
    module.__call__.get_concrete_function(text)
    module.__call__.get_concrete_function([text, text])
    for rank in (2, 3):
        for count in (1, 2):
            specs = [tf.RaggedTensorSpec([None] * rank, tf.int32) for _ in range(count)]
            module.bert_pack_inputs.__call__.get_concrete_function(specs)
            module.bert_pack_inputs.__call__.get_concrete_function(specs, tf.TensorSpec([], tf.int32))


def save_preprocessor(folder: str, vocab_file: str, do_lower_case: bool, seq_length: int) -> None:
    """Writes the preprocessor SavedModel into `folder` (made atomic by the caller)."""
    module = BertPreprocessor(vocab_file, do_lower_case, seq_length)
    _trace(module)
    signatures = {"serving_default": module.serve.get_concrete_function(),
                  "serving_pair": module.serve_pair.get_concrete_function()}
    tf.saved_model.save(module, os.fspath(folder), signatures=signatures)
