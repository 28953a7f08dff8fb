"""Fine-tuning features cached as TFRecords in the output folder, keyed by everything that makes them.

The key hashes the task's name and settings, the split, the vocab file, the case flag, the
sequence length and every input file's bytes: a rerun with the same inputs skips conversion, and
a changed input gets a new file, never a stale one. A cache file is used only when its sidecar
record says it is complete and its size and SHA-256 match (a damaged cache would stop training
midway); otherwise it is rebuilt (written under a temporary name and renamed). Code consuming
`dataset(path, ...)` runs inside `reading(path)`: a cache damaged after that check ends as one
line naming it.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Mapping, Sequence

import bert_tf._env  # noqa: F401
import tensorflow as tf
from absl import logging

from bert_tf.data import tfrecord
from bert_tf.data.files import file_sha256
from bert_tf.data.atomic_io import atomic_write
from bert_tf.tasks.base import FeatureSpec, Task
from bert_tf.training import input_errors

CACHE_DIR = "features"


def cache_key(task: Task, split: str, vocab_file: str, do_lower_case: bool, max_seq_length: int) -> str:
    """16 hex digits naming the features of `split` under these settings and inputs."""
    parts = {"task": task.name, "settings": task.settings(), "split": split, "do_lower_case": do_lower_case,
             "max_seq_length": max_seq_length, "vocab": file_sha256(vocab_file),
             "inputs": [file_sha256(path) for path in task.input_files(split)]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _typed(row: Mapping[str, Any], spec: Mapping[str, FeatureSpec]) -> dict[str, list]:
    """The row's features as flat lists of the spec's kind (ints stay ints, floats become floats)."""
    cast = {"int": int, "float": float}
    return {name: [cast[feature.dtype](v) for v in _flat(row[name])] for name, feature in spec.items()}


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [value]


def write_features(path: str, rows: list[Mapping[str, Any]], spec: Mapping[str, FeatureSpec]) -> None:
    """Writes `rows` as tf.train.Examples (atomically), then its sidecar `path.json` (count, size, SHA-256)."""
    count = tfrecord.write_examples(path, (_typed(row, spec) for row in rows))
    with atomic_write(path + ".json") as f:
        json.dump({"count": count, "bytes": os.path.getsize(path), "sha256": file_sha256(path)}, f)


def complete_count(path: str) -> int | None:
    """The row count of a complete cache file, or None when absent, partial or changed (a warning says so)."""
    try:
        with open(path + ".json", encoding="utf-8") as f:
            record = json.load(f)
        count, size, digest = int(record["count"]), record["bytes"], record["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        if os.path.getsize(path) == size and file_sha256(path) == digest:
            return count
    except OSError:
        return None
    logging.warning("%s: changed since it was written (size or SHA-256); rebuilding it", path)
    return None


def cached_features(task: Task, split: str, get_examples: Callable[[], Sequence[Any]], output_dir: str,
                    vocab_file: str, do_lower_case: bool, max_seq_length: int) -> tuple[str, int]:
    """(TFRecord path, row count) of the split's features: from the cache when complete, else made
    with task.features from `get_examples()` (called only then) and cached."""
    key = cache_key(task, split, vocab_file, do_lower_case, max_seq_length)
    folder = os.path.join(output_dir, CACHE_DIR)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{task.name}-{split}-{key}.tfrecord")
    count = complete_count(path)
    if count is not None:
        logging.info("%s features: %d rows from the cache %s", split, count, path)
        return path, count
    examples = get_examples()
    rows = task.features(split, examples)
    write_features(path, rows, task.feature_spec)
    logging.info("%s features: %d rows from %d examples, cached in %s", split, len(rows), len(examples), path)
    return path, len(rows)


def dataset(path: str, spec: Mapping[str, FeatureSpec]) -> tf.data.Dataset:
    """The cached rows as a dataset of int32/float32 tensors (unbatched, in file order)."""
    description = {name: tf.io.FixedLenFeature(list(f.shape), tf.float32 if f.dtype == "float" else tf.int64)
                   for name, f in spec.items()}

    def parse(record):
        parsed = tf.io.parse_single_example(record, description)
        return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
                for name, value in parsed.items()}

    return tf.data.TFRecordDataset(path).map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def reading(path: str):
    """Put around the code consuming `dataset(path, ...)`: a cache found damaged while it is read
    ends as one line naming it."""
    return input_errors.reading([path], advice="; it is a feature cache: delete it and rerun to rebuild it")
