"""Dynamic masking (RoBERTa, Liu et al. 2019): masks drawn anew for every batch in the tf.data pipeline.

`DynamicMasking.apply(dataset, pipeline_index)` numbers the parsed batches of a pre-training pipeline and
masks each with stateless random ops keyed by (--seed, input pipeline, batch number). The masks are then a
function of the batch's position alone: two runs with one seed draw the same masks, a record gets new
masks each time it comes round again, and a resumed run (its iterator restored from a checkpoint, or the
finished batches skipped: bert_tf.training.trainer) draws exactly the masks an uninterrupted one would.

The rules are data preparation's (bert_tf.pretraining.instances), applied to each record's true tokens:
  * a budget of min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))) of its n tokens; [CLS] and
    [SEP] are never masked;
  * wordpiece: that many positions, uniformly without replacement (the original's shuffle-and-take);
    word: whole words in a random order, a word that would overflow the budget skipped (the original's
    whole-word masking; a "##" piece joins the word before it, across the middle [SEP] too, as there);
    span: SpanBERT's spans of whole words (bert_tf.pretraining.span_masking), each replaced as one;
  * replacement: one uniform draw per position (per span): [MASK] below mask_token_prob, the true token
    below mask_token_prob + the kept share, else a random vocab word (sharded mode's scheme; the word is
    drawn uniformly from the vocab's ids, as the original draws from its keys).
The draws are not the data-prep program's (those come from Python's and numpy's generators); the
distributions are (tested). Records written with masks are unmasked first: their masked_lm_ids go back to
their masked_lm_positions, which restores the true tokens exactly (the original alters no other position),
so the original program's records can be re-masked too.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.pretraining import span_masking
from bert_tf.pretraining.instances import InstanceOptions, VocabIds, load_vocab_checked

_ALG = "philox"  # named, so that the masks do not depend on which algorithm "auto_select" picks
# Independent random streams of one batch's key.
_CHOOSE, _REPLACE, _RANDOM_WORDS = 0, 1, 2


class DynamicMasking:
    """The masking of `options` (masked_lm_prob, max_predictions_per_seq, unit, replacement shares) with
    the vocab's special ids and words, keyed by `seed` (None: 0)."""

    def __init__(self, options: InstanceOptions, vocab: VocabIds, seed: int | None):
        options.validate()
        self.options = options
        self.seed = 0 if seed is None else int(seed)
        self._special = (vocab.cls_id, vocab.sep_id, vocab.mask_id)
        self._is_subword = np.frombuffer(bytes(vocab.is_subword), dtype=np.uint8).astype(bool)
        self._random_words = np.asarray(vocab.random_word_ids, dtype=np.int32)

    @classmethod
    def from_vocab_file(cls, vocab_file: str, options: InstanceOptions, seed: int | None) -> "DynamicMasking":
        """The masking of `options` with `vocab_file`'s ids (a DataPrepError names a bad vocab)."""
        return cls(options, VocabIds(load_vocab_checked(vocab_file)), seed)

    def apply(self, dataset: tf.data.Dataset, pipeline_index: int = 0) -> tf.data.Dataset:
        """`dataset` (batches of parsed features) with every batch masked by its position in it."""
        key = tf.constant([self.seed % (1 << 63), pipeline_index], tf.int64)

        def mask(batch_index, features):
            return self.mask_batch(features, tf.random.fold_in(key, batch_index, alg=_ALG))

        return dataset.enumerate().map(mask, num_parallel_calls=tf.data.AUTOTUNE)

    def mask_batch(self, features: Mapping[str, tf.Tensor], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        """The features with new masks: input_ids masked, masked_lm_* the chosen positions (ascending),
        their true ids and weights 1.0, padded with 0 to max_predictions_per_seq."""
        cls_id, sep_id, mask_id = self._special
        ids = true_ids(features)
        real = features["input_mask"] > 0
        candidates = real & tf.not_equal(ids, cls_id) & tf.not_equal(ids, sep_id)
        budget = self._budget(tf.reduce_sum(tf.cast(real, tf.int32), axis=1))
        choose, replace, random_words = (tf.random.fold_in(seed, k, alg=_ALG)
                                          for k in (_CHOOSE, _REPLACE, _RANDOM_WORDS))
        unit = self.options.unit
        if unit == "wordpiece":
            masked = _choose_pieces(candidates, budget, self.options.max_predictions_per_seq, choose)
            draw = _uniform(tf.shape(ids), replace)
        else:
            words = _Words(ids, candidates, features["segment_ids"], self._is_subword)
            if unit == "word":
                chosen = _choose_words(words, budget, choose)
                draw = _uniform(tf.shape(ids), replace)
            else:
                draws = span_masking.max_span_draws(self.options.max_predictions_per_seq)
                chosen, span_of = _choose_spans(words, candidates, budget, draws, choose)
                span_draw = _uniform(tf.stack([tf.shape(ids)[0], draws]), replace)
                draw = tf.gather(span_draw, tf.maximum(words.at_positions(span_of), 0), batch_dims=1)
            masked = candidates & words.at_positions(chosen)
        new_ids = tf.where(masked, self._replacements(ids, draw, mask_id, random_words), ids)
        return {**features, "input_ids": new_ids,
                **_predictions(masked, ids, self.options.max_predictions_per_seq)}

    def _budget(self, lengths: tf.Tensor) -> tf.Tensor:
        """min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))), rounding half to even as
        Python's round() on the same float64 product."""
        wanted = tf.cast(tf.round(tf.cast(lengths, tf.float64) * self.options.masked_lm_prob), tf.int32)
        return tf.minimum(self.options.max_predictions_per_seq, tf.maximum(1, wanted))

    def _replacements(self, ids: tf.Tensor, draw: tf.Tensor, mask_id: int, seed: tf.Tensor) -> tf.Tensor:
        """What each position shows if masked: [MASK], its true token, or a random word, by `draw`."""
        mask, keep, _ = self.options.replacement_thresholds()
        words = tf.constant(self._random_words)
        picks = tf.random.stateless_uniform(tf.shape(ids), seed, minval=0, maxval=len(self._random_words),
                                            dtype=tf.int32, alg=_ALG)
        random_words = tf.gather(words, picks)
        return tf.where(draw < mask, tf.constant(mask_id, ids.dtype), tf.where(draw < keep, ids, random_words))


def true_ids(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """input_ids with each masked_lm_id (weight > 0) put back at its masked_lm_position: a record's true
    tokens (records written with --masking=none have none to put back)."""
    ids, positions = features["input_ids"], features["masked_lm_positions"]
    current = tf.gather(ids, positions, batch_dims=1)
    updates = tf.where(features["masked_lm_weights"] > 0, features["masked_lm_ids"], current)
    rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, None], tf.shape(positions))
    # Padding entries (weight 0) write a position's own value back: harmless duplicates.
    return tf.tensor_scatter_nd_update(ids, tf.stack([rows, positions], axis=-1), updates)


def _uniform(shape, seed: tf.Tensor, dtype=tf.float32) -> tf.Tensor:
    return tf.random.stateless_uniform(shape, seed, dtype=dtype, alg=_ALG)


def _choose_pieces(candidates: tf.Tensor, budget: tf.Tensor, max_predictions: int, seed: tf.Tensor) -> tf.Tensor:
    """[batch, length] bool: `budget` candidate positions per row, uniformly without replacement."""
    length = candidates.shape[1]
    keys = tf.where(candidates, _uniform(tf.shape(candidates), seed), 2.0)
    k = min(max_predictions, length)
    smallest, index = tf.math.top_k(-keys, k=k)
    take = (tf.range(k)[None, :] < budget[:, None]) & (smallest > -2.0)
    hits = tf.one_hot(index, length, dtype=tf.int32) * tf.cast(take, tf.int32)[:, :, None]
    return tf.reduce_sum(hits, axis=1) > 0


class _Words:
    """A batch's maskable tokens grouped into words as the original's whole-word masking groups them:
    `word_of` [batch, length] (the word of each candidate position, 0 elsewhere), `length` and `segment`
    [batch, words] (tokens per word, 0 past the last word; segment id of its first token)."""

    def __init__(self, ids: tf.Tensor, candidates: tf.Tensor, segment_ids: tf.Tensor, is_subword: np.ndarray):
        table = tf.constant(is_subword)
        known = ids < len(is_subword)
        subword = candidates & known & tf.gather(table, tf.where(known, ids, 0))
        after_one = tf.cumsum(tf.cast(candidates, tf.int32), axis=1, exclusive=True) > 0
        starts = candidates & ~(subword & after_one)
        self.width = candidates.shape[1]
        self.word_of = tf.where(candidates, tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, 0)
        rows = tf.shape(ids)[0]
        flat = self.word_of + tf.range(rows)[:, None] * self.width
        shape = tf.stack([rows, self.width])
        self.length = tf.reshape(tf.math.unsorted_segment_sum(
            tf.cast(candidates, tf.int32), flat, rows * self.width), shape)
        segment = tf.math.unsorted_segment_max(tf.where(starts, segment_ids, 0), flat, rows * self.width)
        self.segment = tf.where(self.length > 0, tf.reshape(segment, shape), -1)

    def at_positions(self, per_word: tf.Tensor) -> tf.Tensor:
        """A [batch, words] value looked up for every position's word ([batch, length])."""
        return tf.gather(per_word, self.word_of, batch_dims=1)


def _choose_words(words: _Words, budget: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """[batch, words] bool: the original's whole-word choice: words in a uniformly random order, each
    taken if it fits in what is left of the budget (a word that would overflow it is skipped)."""
    valid = words.length > 0
    keys = tf.where(valid, _uniform(tf.shape(words.length), seed), 2.0)
    order = tf.argsort(keys, axis=1, stable=True)
    sorted_length = tf.gather(words.length, order, batch_dims=1)
    num_words = tf.reduce_sum(tf.cast(valid, tf.int32), axis=1)
    columns = tf.range(words.width)[None, :]

    def more(j, total, taken):
        return (j < words.width) & tf.reduce_any((total < budget) & (j < num_words))

    def step(j, total, taken):
        size = sorted_length[:, j]
        take = (size > 0) & (total + size <= budget)
        return j + 1, total + tf.where(take, size, 0), taken | ((columns == j) & take[:, None])

    _, _, taken = tf.while_loop(more, step, (tf.constant(0), tf.zeros_like(budget), tf.zeros_like(valid)))
    return tf.gather(taken, tf.argsort(order, axis=1), batch_dims=1)


def _choose_spans(words: _Words, candidates: tf.Tensor, budget: tf.Tensor, max_draws: int,
                  seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """([batch, words] bool, [batch, words] int): span_masking.choose_spans for every row at once: the
    words masked and the draw (span) that masked each (-1: none)."""
    width = candidates.shape[1]
    num_candidates = tf.reduce_sum(words.length, axis=1)
    columns = tf.range(width)[None, :]
    # Candidate positions first, in order: the k-th maskable token of a row is at [row, k].
    candidate_positions = tf.argsort(tf.where(candidates, columns, width + columns), axis=1, stable=True)
    bounds = tf.constant(span_masking.SPAN_LENGTH_CDF, tf.float64)

    def more(t, masked, span_of, count):
        return (t < max_draws) & tf.reduce_any((count < budget) & (count < num_candidates))

    def step(t, masked, span_of, count):
        u = _uniform(tf.stack([tf.shape(budget)[0], 2]), tf.random.fold_in(seed, t, alg=_ALG), tf.float64)
        span_words = 1 + tf.reduce_sum(tf.cast(bounds[None, :] <= u[:, :1], tf.int32), axis=1)
        k = tf.cast(tf.floor(u[:, 1] * tf.cast(num_candidates, tf.float64)), tf.int32)
        anchor_position = tf.gather(candidate_positions, tf.clip_by_value(k, 0, tf.maximum(num_candidates - 1, 0)),
                                    batch_dims=1)
        anchor = tf.gather(words.word_of, anchor_position, batch_dims=1)
        active = (count < budget) & (count < num_candidates) & ~tf.gather(masked, anchor, batch_dims=1)
        in_span = ((columns >= anchor[:, None]) & (columns < (anchor + span_words)[:, None])
                   & tf.equal(words.segment, tf.gather(words.segment, anchor, batch_dims=1)[:, None])
                   & active[:, None] & ~masked)
        added = tf.cumsum(tf.where(in_span, words.length, 0), axis=1)
        take = in_span & (count[:, None] + added <= budget[:, None])
        count += tf.reduce_sum(tf.where(take, words.length, 0), axis=1)
        return t + 1, masked | take, tf.where(take, t, span_of), count

    masked = tf.zeros(tf.shape(words.length), tf.bool)
    _, masked, span_of, _ = tf.while_loop(
        more, step, (tf.constant(0), masked, -tf.ones_like(words.length), tf.zeros_like(budget)))
    return masked, span_of


def _predictions(masked: tf.Tensor, ids: tf.Tensor, max_predictions: int) -> dict[str, tf.Tensor]:
    """masked_lm_positions (ascending), masked_lm_ids (true tokens) and masked_lm_weights of `masked`,
    padded with 0 to `max_predictions`."""
    length = masked.shape[1]
    columns = tf.range(length)[None, :]
    k = min(max_predictions, length)
    _, index = tf.math.top_k(-tf.where(masked, columns, length + columns), k=k)
    valid = tf.range(k)[None, :] < tf.reduce_sum(tf.cast(masked, tf.int32), axis=1)[:, None]
    out = {"masked_lm_positions": tf.where(valid, index, 0),
           "masked_lm_ids": tf.where(valid, tf.gather(ids, index, batch_dims=1), 0),
           "masked_lm_weights": tf.cast(valid, tf.float32)}
    if k < max_predictions:
        out = {name: tf.pad(value, [[0, 0], [0, max_predictions - k]]) for name, value in out.items()}
    return out
