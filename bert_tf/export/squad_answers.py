"""SQuAD's answer selection in the graph: the original `write_predictions` for a batch of questions,
from each window's start/end logits to the answer text and its character offsets in the context.

The steps and their order are the original's (`bert_tf.tasks.squad.predictions` is the Python twin):

1. per window, the top n_best start and end positions over all columns (`tf.math.top_k`: ties keep
   the lower index, as the original's stable sort); every start x end pair in that order that lies in
   the document, starts at a max-context token, does not end before it and is at most
   max_answer_length long is a candidate;
2. each candidate's text by `get_final_text`, vectorised over candidates: the wordpieces joined and
   "##" removed (`pred_text`), the BasicTokenizer words of its doc tokens joined (`tok_text`), the
   FIRST occurrence of pred_text in tok_text (a byte-wise search; UTF-8 makes byte and character
   matches the same), and the character alignment with spaces stripped, falling back to the whole
   doc tokens (`orig_text`) whenever the original does;
3. v2.0: the null answer of the window with the lowest start[0] + end[0] (the first, strictly below
   the original's starting 1000000), after the spans of its example;
4. stable sort by start_logit + end_logit (float64, as Python), the first n_best distinct texts (the
   null answer not checked), the null answer appended if it did not make it, the "empty" nonce when
   nothing else is there (v1.1) or no non-null text is (v2.0, where the original crashes; ours does
   what `bert_tf.tasks.squad.predictions` documents), the softmax over that n-best, and the answer:
   the best entry (v1.1), or "" when score_null - best_non_null > null_score_diff_threshold (v2.0).

Offsets: `get_final_text` returns a piece of `orig_text` = the doc tokens joined with single
spaces, so each of its characters is a known character of a known doc token, whose offset in the
context is known: start and end (exclusive) are code-point offsets into the context, as SQuAD's
answer_start. Where the answer spans doc tokens that the context separates by other whitespace
than one space, context[start:end] holds that whitespace and the answer text does not.
"""
from __future__ import annotations

from typing import NamedTuple

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.export.squad_windows import Context, Windows

NONCE_TEXT = "empty"
INITIAL_NULL_SCORE = 1000000.0  # the original's "large and positive" start for the minimum null score
_NOT_FOUND = tf.int64.max


class AnswerSettings(NamedTuple):
    """The original's write_predictions flags."""
    n_best_size: int
    max_answer_length: int
    version_2_with_negative: bool
    null_score_diff_threshold: float


class Candidates(NamedTuple):
    """Valid spans of every window, flat, in the original's order; text and offsets filled later."""
    example: tf.Tensor  # int64
    window: tf.Tensor  # int64
    start: tf.Tensor  # column of the start in its window, int64
    end: tf.Tensor
    start_logit: tf.Tensor  # float64
    end_logit: tf.Tensor


def span_candidates(win: Windows, start_logits: tf.Tensor, end_logits: tf.Tensor,
                    a: AnswerSettings) -> Candidates:
    """Step 1 of the module docstring: every valid top-n_best start x top-n_best end pair."""
    k = tf.minimum(a.n_best_size, tf.shape(start_logits)[1])
    top_start = tf.cast(tf.math.top_k(start_logits, k).indices, tf.int64)
    top_end = tf.cast(tf.math.top_k(end_logits, k).indices, tf.int64)
    start = tf.repeat(top_start, k, axis=1)  # [W, k * k]: start-major, as the original's loops
    end = tf.tile(top_end, [1, k])
    first = win.query_length[:, None] + 2
    after = first + win.span_length[:, None]

    def in_doc(x):
        return (x >= first) & (x < after)

    valid = (in_doc(start) & in_doc(end) & tf.gather(win.max_context, start, batch_dims=1)
             & (end >= start) & (end - start + 1 <= a.max_answer_length))
    window = tf.boolean_mask(tf.broadcast_to(tf.range(tf.size(win.example, tf.int64))[:, None], tf.shape(start)),
                             valid)
    start_logit = tf.boolean_mask(tf.gather(start_logits, start, batch_dims=1), valid)
    end_logit = tf.boolean_mask(tf.gather(end_logits, end, batch_dims=1), valid)
    return Candidates(tf.gather(win.example, window), window, tf.boolean_mask(start, valid),
                      tf.boolean_mask(end, valid), tf.cast(start_logit, tf.float64), tf.cast(end_logit, tf.float64))


def _joined(values: tf.Tensor, first: tf.Tensor, stop: tf.Tensor) -> tf.Tensor:
    """" ".join(values[first:stop]) for each row."""
    index = tf.ragged.range(first, stop)
    return tf.strings.reduce_join(index.with_values(tf.gather(values, index.values)), axis=1, separator=" ")


def _first_occurrence(needle: tf.Tensor, haystack: tf.Tensor) -> tf.Tensor:
    """Byte offset of the first occurrence of needle in haystack (str.find), _NOT_FOUND if none."""
    size = tf.cast(tf.strings.length(needle), tf.int64)
    tries = tf.ragged.range(tf.maximum(tf.cast(tf.strings.length(haystack), tf.int64) - size + 1, 0))
    row = tries.value_rowids()
    hit = tf.equal(tf.strings.substr(tf.gather(haystack, row), tries.values, tf.gather(size, row)),
                   tf.gather(needle, row))
    return tf.math.unsorted_segment_min(tf.where(hit, tries.values, _NOT_FOUND), row, tf.size(needle))


def _chars(text: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.strings.length(text, unit="UTF8_CHAR"), tf.int64)


def _spaces(text: tf.Tensor) -> tf.Tensor:
    """Number of " " characters in each string."""
    return tf.cast(tf.strings.length(text), tf.int64) - tf.cast(tf.strings.length(
        tf.strings.regex_replace(text, " ", "")), tf.int64)


def _prefix(text: tf.Tensor, chars: tf.Tensor) -> tf.Tensor:
    return tf.strings.substr(text, tf.zeros_like(chars), chars, unit="UTF8_CHAR")


class FinalTexts(NamedTuple):
    text: tf.Tensor
    char_start: tf.Tensor  # int64 code-point offsets in the context, end exclusive
    char_end: tf.Tensor


def final_texts(cand: Candidates, win: Windows, ctx: Context, piece_text: tf.Tensor) -> FinalTexts:
    """Step 2 of the module docstring: each candidate's `get_final_text` and its context offsets.

    piece_text: the vocab's tokens by id (FullTokenizer's `inv_vocab`).
    """
    offset = tf.gather(ctx.doc_ids.row_splits, cand.example) + tf.gather(win.span_start, cand.window) \
        - tf.gather(win.query_length, cand.window) - 2
    piece_first, piece_last = cand.start + offset, cand.end + offset  # flat doc pieces
    pred = _joined(tf.gather(piece_text, ctx.doc_ids.values), piece_first, piece_last + 1)
    pred = tf.strings.regex_replace(tf.strings.regex_replace(pred, " ##", "", replace_global=True), "##", "")
    first, last = tf.gather(ctx.tok_to_orig, piece_first), tf.gather(ctx.tok_to_orig, piece_last)
    orig = _joined(ctx.words.flat_values, first, last + 1)
    basic = ctx.basic_words
    tok = _joined(basic.values, tf.gather(basic.row_splits, first), tf.gather(basic.row_splits, last + 1))

    found_at = _first_occurrence(pred, tok)
    found = found_at != _NOT_FOUND
    start_pos = _chars(tf.strings.substr(tok, tf.zeros_like(found_at), tf.where(found, found_at, 0)))
    end_pos = tf.where(found, start_pos + _chars(pred) - 1, 0)
    length = ctx.char_end - ctx.char_start
    cum = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(length)], 0)  # chars before each doc token, batch-wide
    same_length = tf.gather(cum, last + 1) - tf.gather(cum, first) == _chars(tok) - _spaces(tok)

    def aligned(pos):
        """(is a non-space, doc token, context offset, orig_text offset) of tok_text character `pos`."""
        char_is_space = tf.equal(tf.strings.substr(tok, pos, tf.ones_like(pos), unit="UTF8_CHAR"), " ")
        ns = pos - _spaces(_prefix(tok, pos))
        target = tf.gather(cum, first) + ns
        word = tf.clip_by_value(tf.searchsorted(cum, target, side="right", out_type=tf.int64) - 1, 0,
                                tf.maximum(tf.size(length, tf.int64) - 1, 0))
        within = target - tf.gather(cum, word)
        return ~char_is_space, tf.gather(ctx.char_start, word) + within, ns + word - first

    start_ok, start_char, orig_start = aligned(start_pos)
    end_ok, end_char, orig_end = aligned(end_pos)
    ok = found & same_length & start_ok & end_ok
    text = tf.strings.substr(orig, tf.where(ok, orig_start, 0), tf.where(ok, orig_end - orig_start + 1, 0),
                             unit="UTF8_CHAR")
    return FinalTexts(tf.where(ok, text, orig), tf.where(ok, start_char, tf.gather(ctx.char_start, first)),
                      tf.where(ok, end_char + 1, tf.gather(ctx.char_end, last)))


class Answers(NamedTuple):
    """One answer per example (row of the batch)."""
    text: tf.Tensor  # string
    start: tf.Tensor  # int64 code-point offsets into the context, end exclusive; -1 for "" and the nonce
    end: tf.Tensor
    score: tf.Tensor  # float64: start_logit + end_logit of the answer's n-best entry
    probability: tf.Tensor  # float64: its n-best softmax probability
    null_score_diff: tf.Tensor  # float64: score_null - best_non_null (v2.0; 0 for v1.1)


def _null_answers(win: Windows, start_logits: tf.Tensor, end_logits: tf.Tensor, examples: tf.Tensor):
    """Step 3: (score_null, start_logit, end_logit) of each example's null answer, float64 [examples]."""
    start0, end0 = (tf.cast(x[:, 0], tf.float64) for x in (start_logits, end_logits))
    null = start0 + end0
    lowest = tf.minimum(tf.math.unsorted_segment_min(null, win.example, examples), INITIAL_NULL_SCORE)
    is_it = (null == tf.gather(lowest, win.example)) & (null < INITIAL_NULL_SCORE)
    window = tf.math.unsorted_segment_min(tf.where(is_it, tf.range(tf.size(null, tf.int64)), _NOT_FOUND),
                                          win.example, examples)
    has = window != _NOT_FOUND
    at = tf.where(has, window, 0)

    def pick(x):
        return tf.where(has, tf.gather(tf.concat([x, [0.0]], 0), at), 0.0)

    return lowest, pick(start0), pick(end0)


def _pick(values: tf.Tensor, index: tf.Tensor, use: tf.Tensor, default) -> tf.Tensor:
    """values[index] where `use`, else `default` (values may be empty where nothing is used)."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], 0)
    return tf.where(use, tf.gather(padded, index), tf.constant(default, values.dtype))


def _first_per_example(mask: tf.Tensor, example: tf.Tensor, examples: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(has one, index of the first row with `mask`) per example."""
    first = tf.math.unsorted_segment_min(tf.where(mask, tf.range(tf.size(mask, tf.int64)), _NOT_FOUND),
                                         example, examples)
    return first != _NOT_FOUND, tf.where(first != _NOT_FOUND, first, 0)


def _nbest(example, score, text, is_null, a: AnswerSettings) -> tf.Tensor:
    """Rows (in sorted order) that make each example's n-best list: the first n_best distinct texts, and
    the null answer wherever it is (appended by the original when it was not among them)."""
    keys = tf.strings.join([tf.strings.as_string(example), text], separator="\x1f")
    unique = tf.unique(keys).idx
    rows = tf.range(tf.size(example, tf.int64))
    first_row = tf.math.unsorted_segment_min(rows, unique, tf.reduce_max(tf.concat([unique + 1, [0]], 0)))
    kept = tf.equal(tf.gather(first_row, unique), rows)
    before = tf.cumsum(tf.cast(kept, tf.int64), exclusive=True)
    rank = before - tf.gather(before, tf.searchsorted(example, example, side="left", out_type=tf.int64))
    return kept & ((rank < a.n_best_size) | is_null)


def choose(cand: Candidates, texts: FinalTexts, win: Windows, start_logits: tf.Tensor, end_logits: tf.Tensor,
           examples: tf.Tensor, a: AnswerSettings) -> Answers:
    """Step 4 of the module docstring: each example's n-best list, softmax and answer."""
    v2 = a.version_2_with_negative
    ex = tf.range(examples)
    score_null, null_start, null_end = _null_answers(win, start_logits, end_logits, examples)
    parts = [(cand.example, ex), (cand.start_logit, null_start), (cand.end_logit, null_end),
             (texts.text, tf.fill([examples], "")), (texts.char_start, -tf.ones([examples], tf.int64)),
             (texts.char_end, -tf.ones([examples], tf.int64)),
             (tf.zeros_like(cand.example, tf.bool), tf.ones([examples], tf.bool))]
    example, start_logit, end_logit, text, char_start, char_end, is_null = (
        tf.concat([x, y] if v2 else [x], 0) for x, y in parts)
    order = tf.argsort(start_logit + end_logit, direction="DESCENDING", stable=True)
    order = tf.gather(order, tf.argsort(tf.gather(example, order), stable=True))
    example, start_logit, end_logit, text, char_start, char_end, is_null = (
        tf.gather(x, order) for x in (example, start_logit, end_logit, text, char_start, char_end, is_null))
    score = start_logit + end_logit
    in_nbest = _nbest(example, score, text, is_null, a)

    has_best, best = _first_per_example(in_nbest & ~is_null, example, examples)  # v1.1: no null rows
    nonce = ~has_best  # in the n-best too (score 0.0), alone for v1.1, first for v2.0
    top = tf.math.unsorted_segment_max(tf.where(in_nbest, score, -float("inf")), example, examples)
    top = tf.maximum(top, tf.where(nonce, tf.constant(0.0, tf.float64), -float("inf")))
    exp = tf.where(in_nbest, tf.exp(score - tf.gather(top, example)), 0.0)
    total = tf.math.unsorted_segment_sum(exp, example, examples) + tf.where(nonce, tf.exp(-top), 0.0)
    best_start, best_end = (_pick(x, best, has_best, 0.0) for x in (start_logit, end_logit))
    answer = Answers(_pick(text, best, has_best, NONCE_TEXT), _pick(char_start, best, has_best, -1),
                     _pick(char_end, best, has_best, -1), best_start + best_end,
                     tf.where(nonce, tf.exp(-top), _pick(exp, best, has_best, 0.0)) / total,
                     tf.zeros([examples], tf.float64))
    if not v2:
        return answer
    diff = score_null - best_start - best_end
    _, null_row = _first_per_example(is_null, example, examples)
    null_score = tf.gather(score, null_row)
    is_null_answer = diff > a.null_score_diff_threshold
    return Answers(tf.where(is_null_answer, "", answer.text),
                   tf.where(is_null_answer, tf.constant(-1, tf.int64), answer.start),
                   tf.where(is_null_answer, tf.constant(-1, tf.int64), answer.end),
                   tf.where(is_null_answer, null_score, answer.score),
                   tf.where(is_null_answer, tf.gather(exp, null_row) / total, answer.probability), diff)


def answers(win: Windows, ctx: Context, start_logits: tf.Tensor, end_logits: tf.Tensor, examples: tf.Tensor,
            piece_text: tf.Tensor, a: AnswerSettings) -> Answers:
    """The original's prediction for each example from its windows' logits [W, seq_length]."""
    cand = span_candidates(win, start_logits, end_logits, a)
    texts = final_texts(cand, win, ctx, piece_text)
    return choose(cand, texts, win, start_logits, end_logits, examples, a)
