"""The end-to-end SQuAD SavedModel: question and context strings in, the original's answer out.

    squad = tf.saved_model.load("served/squad")                   # import tensorflow_text first
    out = squad.signatures["serving_default"](question=tf.constant(["Who won?"]),
                                              context=tf.constant(["The Broncos won the game."]))
    out["answer"]        # string [batch]: predictions.json's text ("" for a v2.0 null answer)
    out["start"], out["end"]  # int32 [batch]: code-point offsets of the answer in the context, end
                              # exclusive (SQuAD's answer_start); -1 for "" and the "empty" nonce
    out["score"], out["probability"]  # float32: start + end logit, and the n-best softmax probability
    out["null_score_diff"]            # float32, v2.0 only: score_null - best_non_null (null_odds.json)
    squad(questions, contexts)        # the same dict from Python
    squad.window_logits(questions, contexts)  # each window's start/end logits and its example
    squad.doc_stride, squad.max_query_length, ...  # the settings, variables of the loaded object

What `run_squad.py --do_predict` computes for each question, in one graph: the original's document
windows (bert_tf.export.squad_windows), the fine-tuned span model without dropout on every window,
and `write_predictions`' choice of answer (bert_tf.export.squad_answers). Windows are padded to
max_seq_length as the original pads them (padding positions rank among the top n_best logits).
`features` and `answers_from_logits` expose the two halves, so that each can be checked against the
original's features and predictions on their own.
"""
from __future__ import annotations

import os

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.errors import BertTfError
from bert_tf.export.serving import TextModule, call_in_chunks
from bert_tf.export.squad_answers import AnswerSettings, Answers, answers
from bert_tf.export.squad_windows import WindowSettings, Windows, query_pieces, split_context, windows
from bert_tf.model.heads import BertSpanModel
from bert_tf.text import tokenization
from bert_tf.text.fast_tokenization import library_vocab

_STRINGS = [tf.TensorSpec([None], tf.string, name="question"), tf.TensorSpec([None], tf.string, name="context")]
_LOGITS = [tf.TensorSpec([None, None], tf.float32, name="start_logits"),
           tf.TensorSpec([None, None], tf.float32, name="end_logits")]


class SquadSettingsError(BertTfError, ValueError):
    """Window or answer settings the original could not run with."""


def _check(seq_length: int, doc_stride: int, max_query_length: int, n_best_size: int,
           max_answer_length: int) -> None:
    if seq_length <= max_query_length + 3:
        raise SquadSettingsError(f"seq_length ({seq_length}) must be greater than max_query_length "
                                 f"({max_query_length}) + 3")
    for name, value in (("doc_stride", doc_stride), ("max_query_length", max_query_length),
                        ("n_best_size", n_best_size), ("max_answer_length", max_answer_length)):
        if value < 1:
            raise SquadSettingsError(f"{name} must be at least 1, got {value}")


class SquadModule(TextModule):
    """The SavedModel's root. `model` may be None for a module that only builds features and answers
    from given logits (not saved)."""

    def __init__(self, model: BertSpanModel | None, vocab_file: str, do_lower_case: bool, *, seq_length: int,
                 doc_stride: int, max_query_length: int, n_best_size: int, max_answer_length: int,
                 version_2_with_negative: bool, null_score_diff_threshold: float):
        _check(seq_length, doc_stride, max_query_length, n_best_size, max_answer_length)
        super().__init__(vocab_file, do_lower_case, seq_length)
        self._model = model
        if model is not None:
            self.model_variables = list(model.variables)
        self._window_settings = WindowSettings(seq_length, doc_stride, max_query_length,
                                       self.special_ids["start_of_sequence_id"], self.special_ids["end_of_segment_id"])
        self._answer_settings = AnswerSettings(n_best_size, max_answer_length, version_2_with_negative,
                                       null_score_diff_threshold)
        self._piece_text = tf.constant(library_vocab(tokenization.load_vocab(vocab_file)))
        for name, value in (("doc_stride", doc_stride), ("max_query_length", max_query_length),
                            ("n_best_size", n_best_size), ("max_answer_length", max_answer_length),
                            ("version_2_with_negative", version_2_with_negative)):
            setattr(self, name, tf.Variable(value, trainable=False, name=name))
        self.null_score_diff_threshold = tf.Variable(null_score_diff_threshold, trainable=False, dtype=tf.float64,
                                                     name="null_score_diff_threshold")

    def _prepare(self, question: tf.Tensor, context: tf.Tensor):
        ctx = split_context(context, self.tokenize)
        query = query_pieces(question, self.tokenize, self._window_settings.max_query_length)
        return ctx, windows(query, ctx, self._window_settings)

    def _logits(self, win: Windows) -> tuple[tf.Tensor, tf.Tensor]:
        inputs = {"input_ids": win.input_ids, "input_mask": win.input_mask, "segment_ids": win.segment_ids}
        out = call_in_chunks(self._model, inputs, {"start_logits": 2, "end_logits": 2})
        return out["start_logits"], out["end_logits"]

    def _answers(self, question, context, ctx, win, start_logits, end_logits) -> Answers:
        with tf.control_dependencies([tf.debugging.assert_equal(tf.size(question), tf.size(context),
                                                                "question and context differ in length")]):
            examples = tf.size(context, tf.int64)
        return answers(win, ctx, start_logits, end_logits, examples, self._piece_text, self._answer_settings)

    @tf.function(autograph=False, input_signature=_STRINGS)
    def features(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        """Every window's features (the original's InputFeatures, as [windows, seq_length] tensors)."""
        return self._prepare(question, context)[1]._asdict()

    @tf.function(autograph=False, input_signature=_STRINGS + _LOGITS)
    def answers_from_logits(self, question, context, start_logits, end_logits) -> dict[str, tf.Tensor]:
        """The answers for given window logits [windows, seq_length] (float64 scores)."""
        ctx, win = self._prepare(question, context)
        return self._answers(question, context, ctx, win, start_logits, end_logits)._asdict()

    @tf.function(autograph=False, input_signature=_STRINGS)
    def window_logits(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        """The model's start/end logits of every window [windows, seq_length] and each window's example."""
        _, win = self._prepare(question, context)
        start_logits, end_logits = self._logits(win)
        return {"example_index": win.example, "start_logits": start_logits, "end_logits": end_logits}

    @tf.function(autograph=False, input_signature=_STRINGS)
    def __call__(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        ctx, win = self._prepare(question, context)
        found = self._answers(question, context, ctx, win, *self._logits(win))
        out = {"answer": found.text, "start": tf.cast(found.start, tf.int32), "end": tf.cast(found.end, tf.int32),
               "score": tf.cast(found.score, tf.float32), "probability": tf.cast(found.probability, tf.float32)}
        if self._answer_settings.version_2_with_negative:
            out["null_score_diff"] = tf.cast(found.null_score_diff, tf.float32)
        return out


def save_squad(folder: str, model: BertSpanModel, vocab_file: str, do_lower_case: bool, *, seq_length: int = 384,
               doc_stride: int = 128, max_query_length: int = 64, n_best_size: int = 20, max_answer_length: int = 30,
               version_2_with_negative: bool = False, null_score_diff_threshold: float = 0.0) -> None:
    """Writes the SQuAD SavedModel into `folder` (made atomic by the caller); settings as run_squad.py's flags."""
    module = SquadModule(model, vocab_file, do_lower_case, seq_length=seq_length, doc_stride=doc_stride,
                         max_query_length=max_query_length, n_best_size=n_best_size,
                         max_answer_length=max_answer_length, version_2_with_negative=version_2_with_negative,
                         null_score_diff_threshold=null_score_diff_threshold)
    signatures = {"serving_default": module.__call__.get_concrete_function()}
    module.window_logits.get_concrete_function()
    module.features.get_concrete_function()
    tf.saved_model.save(module, os.fspath(folder), signatures=signatures)
