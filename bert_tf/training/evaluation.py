"""Evaluation and prediction over a whole data set, under any tf.distribute strategy.

Two kinds, because metrics come in two kinds:
- `evaluate`: the original's eval for pooled metrics (loss, accuracy as sum / count) over a fixed
  number of batches; each term's numerator and denominator are summed over every batch.
- `predict`: per-example outputs of every example exactly once, in input order, for metrics that
  need all predictions at once (Matthews correlation, Pearson/Spearman, F1, SQuAD EM/F1, entity F1)
  and for prediction files. The tail batch is padded with filler rows that carry index -1 and are
  dropped afterwards, so nothing is lost and nothing is counted twice, whatever the replica count.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Iterable, Mapping

import numpy as np

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from absl import logging

from bert_tf.model import custom_ops
from bert_tf.training.objectives import Objective, pooled_ratios, sum_keys, term_sums, total_loss
from bert_tf.training.trainer import TrainingError, format_duration

INDEX_KEY = "example_index"
PROGRESS_SECONDS = 30.0


def evaluate(strategy: tf.distribute.Strategy, model: keras.Model, objective: Objective,
             dataset_fn: Callable, steps: int) -> dict[str, float]:
    """Metrics over `steps` batches, as the original's eval: each loss and metric term pooled over
    all batches (sum of numerators / sum of denominators), and "loss" the mean of the per-batch
    total loss."""
    if steps <= 0:
        raise TrainingError(f"--max_eval_steps must be positive, got {steps}")
    names = list(objective.loss_names) + list(objective.metric_names)
    keys = ["loss"] + sum_keys(names)

    def replica_step(batch):
        ctx = tf.distribute.get_replica_context()
        with custom_ops.program_inference():
            losses, metrics = objective.terms_fn(model, batch, False)
        terms = [losses[name] for name in objective.loss_names]
        totals = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [t.denominator for t in terms])
        return {"loss": total_loss(terms, totals), **term_sums({**losses, **metrics})}

    @tf.function
    def run(iterator):
        sums = {key: tf.zeros([]) for key in keys}
        for _ in tf.range(steps):
            out = strategy.run(replica_step, args=(next(iterator),))
            sums = {key: sums[key] + strategy.reduce(tf.distribute.ReduceOp.SUM, out[key], axis=None)
                    for key in keys}
        return sums

    sums = {k: float(v) for k, v in run(iter(strategy.distribute_datasets_from_function(dataset_fn))).items()}
    return {"loss": sums["loss"] / steps, **pooled_ratios(sums, names)}


def predict(strategy: tf.distribute.Strategy, model: Callable, make_dataset: Callable[[], tf.data.Dataset],
            num_examples: int, global_batch_size: int, output_keys: Iterable[str],
            passthrough_keys: Iterable[str] = (), batcher: Callable | None = None) -> dict[str, np.ndarray]:
    """Per-example outputs over a finite data set: every example exactly once, in input order.

    `make_dataset()` returns the whole set unbatched (dicts of features), `num_examples` long;
    `batcher(rows, batch_size)`, if given, makes the batches from each pipeline's rows (a multiple of
    its batch size long) instead of `rows.batch(batch_size)`: it may reorder the rows and trim
    padding (bert_tf.tasks.batching), as outputs are put back in input order by their index.
    `model(features, training=False)` returns a dict; `output_keys` of it are kept, and
    `passthrough_keys` of the features (e.g. label ids, unique ids) are returned beside them.
    Returns arrays with `num_examples` rows, plus INDEX_KEY (0..n-1); where batches differ in a
    trailing axis (per-position outputs of trimmed batches), shorter ones are padded with zeros.
    """
    output_keys, passthrough_keys = list(output_keys), list(passthrough_keys)
    if num_examples <= 0:
        raise TrainingError("nothing to predict: the input has no examples")
    steps = math.ceil(num_examples / global_batch_size)
    batches = strategy.distribute_datasets_from_function(
        _padded_dataset_fn(make_dataset, steps, global_batch_size, batcher))

    def replica_step(batch):
        with custom_ops.program_inference():
            outputs = model(batch, training=False)
        kept = {key: outputs[key] for key in output_keys}
        kept.update({key: batch[key] for key in passthrough_keys + [INDEX_KEY]})
        return kept

    @tf.function
    def step(iterator):
        per_replica = strategy.run(replica_step, args=(next(iterator),))
        return {key: strategy.gather(value, axis=0) for key, value in per_replica.items()}

    iterator, parts = iter(batches), []
    start = last_log = time.perf_counter()
    for done in range(1, steps + 1):
        parts.append({key: value.numpy() for key, value in step(iterator).items()})
        if done == 1:
            traced = time.perf_counter()
        if time.perf_counter() - last_log >= PROGRESS_SECONDS and done < steps:
            last_log = time.perf_counter()
            rate = done / (last_log - start)
            logging.info("predicting: batch %d/%d, %.1f batches/s, ETA %s", done, steps, rate,
                         format_duration((steps - done) / rate))
    end = time.perf_counter()
    after_first = (f", {(num_examples - global_batch_size) / (end - traced):.1f} after the first batch"
                   if steps > 1 else "")
    logging.info("predicted %d examples in %.1f s (%.1f examples/s%s)", num_examples, end - start,
                 num_examples / max(end - start, 1e-9), after_first)
    return _in_input_order(parts, num_examples)


def _padded_dataset_fn(make_dataset: Callable[[], tf.data.Dataset], steps: int, global_batch_size: int,
                       batcher: Callable | None = None):
    """dataset_fn giving each input pipeline `steps` full batches: its share of the indexed examples,
    then filler rows (a copy of the first example with index -1); batched by `batcher` if given."""

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        per_pipeline = per_replica * (context.num_replicas_in_sync // context.num_input_pipelines)
        indexed = make_dataset().enumerate().map(lambda i, features: {**features, INDEX_KEY: i})
        mine = indexed.shard(context.num_input_pipelines, context.input_pipeline_id)
        filler = indexed.take(1).map(lambda f: {**f, INDEX_KEY: tf.constant(-1, tf.int64)}).repeat()
        rows = mine.concatenate(filler).take(steps * per_pipeline)
        return batcher(rows, per_replica) if batcher else rows.batch(per_replica, drop_remainder=True)

    return dataset_fn


def _same_shape(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays zero-padded at the end of each axis after the first to the largest of them."""
    widest = np.max([a.shape[1:] for a in arrays], axis=0) if arrays[0].ndim > 1 else ()
    return [np.pad(a, [(0, 0)] + [(0, int(w) - n) for w, n in zip(widest, a.shape[1:])]) for a in arrays]


def _in_input_order(parts: list[Mapping[str, np.ndarray]], num_examples: int) -> dict[str, np.ndarray]:
    """Concatenates the gathered batches, drops filler rows, orders by index and checks 0..n-1 once each."""
    merged = {key: np.concatenate(_same_shape([part[key] for part in parts])) for key in parts[0]}
    index = merged[INDEX_KEY]
    real = index >= 0
    order = np.argsort(index[real], kind="stable")
    result = {key: value[real][order] for key, value in merged.items()}
    if not np.array_equal(result[INDEX_KEY], np.arange(num_examples)):
        seen = result[INDEX_KEY]
        raise TrainingError(f"prediction covered {len(np.unique(seen))} distinct examples in {len(seen)} rows; "
                            f"expected each of {num_examples} exactly once (does the input hold "
                            f"{num_examples} examples?)")
    return result
