"""Dynamic padding: each batch runs only as long as its longest row, not --max_seq_length.

The original pads every row to --max_seq_length and computes on the padding too. Padding sits
at the end of each row and is masked out of attention (its keys get -10000 added before the
softmax, which makes their weights exactly 0 in float32), so cutting a batch's sequence axis to
its longest row gives the same outputs on the real tokens, float round-off apart, for less work:
MRPC pairs are ~50 of 128 tokens, CoLA and SST-2 sentences fewer. Lengths are rounded up to a
multiple of PAD_MULTIPLE so that XLA compiles a few shapes, not one per length. TPUs need fixed
shapes: there the programs keep the original's padding.

Prediction may also reorder rows, since each row's outputs do not depend on its batch mates:
`length_sorted_batches` sorts windows of SORT_WINDOW_BATCHES batches by length before batching,
so that rows of similar length share a batch and little padding is left (the predictions are
put back in input order by their index). Training keeps the seeded shuffle's batches. A task of
fixed-length rows (SQuAD's windows) is sorted too, untrimmed: the model then skips the keys past
each batch's longest row.
"""
from __future__ import annotations

from typing import Callable, Mapping

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.tasks.base import FeatureSpec

PAD_MULTIPLE = 16
MASK_KEY = "input_mask"
SORT_WINDOW_BATCHES = 64


def sequence_keys(spec: Mapping[str, FeatureSpec]) -> tuple[str, ...]:
    """The features whose last axis is token positions."""
    return tuple(name for name, feature in spec.items() if feature.sequence)


def trim_to_longest(batch: Mapping[str, tf.Tensor], keys: tuple[str, ...],
                    multiple: int = PAD_MULTIPLE) -> dict[str, tf.Tensor]:
    """The batch with the last axis of `keys` cut to its longest row's length (by `input_mask`),
    rounded up to `multiple` and at most the padded length."""
    mask = batch[MASK_KEY]
    padded = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1))
    length = tf.minimum(padded, (longest + multiple - 1) // multiple * multiple)
    return {name: value[..., :length] if name in keys else value for name, value in batch.items()}


def batch_trimmer(spec: Mapping[str, FeatureSpec], enabled: bool) -> Callable | None:
    """The map function trimming batches of rows with this spec, or None when disabled or when the
    spec has no sequence features or no input mask to measure rows by."""
    keys = sequence_keys(spec)
    if not enabled or not keys or MASK_KEY not in spec:
        return None
    return lambda batch: trim_to_longest(batch, keys)


def length_sorted_batches(rows: tf.data.Dataset, batch_size: int, keys: tuple[str, ...],
                          window_batches: int = SORT_WINDOW_BATCHES, trim: bool = True) -> tf.data.Dataset:
    """Full batches of `rows` (a multiple of `batch_size` long), each window of `window_batches`
    batches sorted by row length (longest first) and, with `trim`, every batch trimmed to its longest
    row. Untrimmed, sorting still pays: at inference the model skips the keys past a batch's longest
    row (bert_tf.model.layers.trims_keys)."""

    def sort_window(window):
        mask = tf.cast(window[MASK_KEY], tf.int32)  # [rows, T], or [rows, choices, T]: real tokens per row
        lengths = tf.reduce_sum(tf.reshape(mask, [tf.shape(mask)[0], -1]), axis=-1)
        order = tf.argsort(lengths, direction="DESCENDING", stable=True)
        return {name: tf.gather(value, order) for name, value in window.items()}

    windows = rows.batch(batch_size * window_batches).map(sort_window, deterministic=True,
                                                         num_parallel_calls=tf.data.AUTOTUNE)
    batches = windows.unbatch().batch(batch_size, drop_remainder=True)
    if not trim:
        return batches
    return batches.map(lambda batch: trim_to_longest(batch, keys), num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True)


def prediction_batcher(spec: Mapping[str, FeatureSpec], enabled: bool, trim: bool = True) -> Callable | None:
    """`batcher(rows, batch_size)` for bert_tf.training.evaluation.predict: length-sorted batches,
    trimmed with `trim` (a fixed-length task's keep every position); None (the original's batches in
    input order) when disabled or not applicable."""
    keys = sequence_keys(spec)
    if not enabled or not keys or MASK_KEY not in spec:
        return None
    return lambda rows, batch_size: length_sorted_batches(rows, batch_size, keys, trim=trim)
