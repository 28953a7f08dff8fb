"""Where every program's evaluation ends up: the weights it evaluates, eval_results.txt, TensorBoard.

One place for all programs (pre-training and each fine-tuning task): restore the newest training
checkpoint of the output folder (else the initial checkpoint), write the original's
`eval_results.txt` ("key = value" lines, keys sorted), write the same figures as TensorBoard
scalars under OUTPUT_DIR/<name>, and log them.
"""
from __future__ import annotations

import os
from typing import Iterable, Mapping

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints.restore import restore_checkpoint
from bert_tf.data.atomic_io import atomic_write


def restore_for_eval(model: keras.Model, output_dir: str, init_checkpoint: str | None = None, *,
                     allow_missing: Iterable[str] = ()) -> int:
    """Loads the newest training checkpoint in `output_dir` into `model` (returns its step); without
    one, the `init_checkpoint` (any format load_init_checkpoint reads; step 0); with neither, the
    model keeps its initial weights (step 0)."""
    latest = tf.train.latest_checkpoint(output_dir)
    if latest:
        global_step = tf.Variable(0, dtype=tf.int64)
        restore_checkpoint(tf.train.Checkpoint(model=model, global_step=global_step), latest, partial=True)
        logging.info("Evaluating %s", latest)
        return int(global_step.numpy())
    if init_checkpoint:
        checkpoints.load_init_checkpoint(model, init_checkpoint, allow_missing=allow_missing)
        logging.info("Evaluating the initial checkpoint %s", init_checkpoint)
    return 0


def write_eval_results(path: str, results: Mapping[str, float]) -> None:
    """The original's eval_results.txt: "key = value" lines, keys sorted (written atomically)."""
    with atomic_write(path) as f:
        for key in sorted(results):
            f.write(f"{key} = {results[key]}\n")


def report_eval(output_dir: str, results: Mapping[str, float], step: int, *, name: str = "eval",
                filename: str | None = "eval_results.txt") -> str | None:
    """Writes OUTPUT_DIR/filename (with global_step; None: no file), TensorBoard scalars under
    OUTPUT_DIR/name at `step`, and logs the figures; returns the file's path."""
    results = {**results, "global_step": step}
    path = os.path.join(output_dir, filename) if filename else None
    if path:
        write_eval_results(path, results)
    writer = tf.summary.create_file_writer(os.path.join(output_dir, name))
    with writer.as_default(step=step):
        for key, value in results.items():
            if key != "global_step":
                tf.summary.scalar(key, value)
    writer.flush()
    logging.info("***** %s results *****\n%s", name.capitalize(),
                 "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))
    return path
