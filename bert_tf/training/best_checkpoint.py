"""Keeping the best checkpoint by a dev metric, as the paper picked the best dev run for BERT-Large.

`BestCheckpoint.update(metrics, step)` saves the model's weights to OUTPUT_DIR/best/ when the chosen
metric beats every earlier evaluation (higher is better; lower for a metric named *loss*), and
records the metric, value and step in OUTPUT_DIR/best/best.json (written atomically, so a run
killed and resumed keeps comparing against the true best). `restore_for_eval` reads it back.
"""
from __future__ import annotations

import json
import math
import os
from typing import Mapping

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from absl import logging

from bert_tf.data.atomic_io import write_json_atomic
from bert_tf.training.trainer import TrainingError

BEST_DIR = "best"
RECORD = "best.json"


def lower_is_better(metric: str) -> bool:
    return "loss" in metric


class BestCheckpoint:
    """The best weights so far under OUTPUT_DIR/best, by `metric`."""

    def __init__(self, output_dir: str, metric: str, model: keras.Model):
        self.folder, self.metric = os.path.join(output_dir, BEST_DIR), metric
        self.checkpoint = tf.train.Checkpoint(model=model, global_step=tf.Variable(0, dtype=tf.int64))
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.folder, max_to_keep=1, checkpoint_name="best")
        self.record = read_record(output_dir)

    def update(self, metrics: Mapping[str, float], step: int) -> bool:
        """Saves the weights if metrics[metric] is the best yet; returns whether it was."""
        if self.metric not in metrics:
            raise TrainingError(f"--best_checkpoint_metric={self.metric!r} is not an eval metric of this task; "
                                f"choose one of {', '.join(sorted(metrics))}")
        value = float(metrics[self.metric])
        if not math.isfinite(value) or not self._better(value):
            return False
        self.checkpoint.global_step.assign(step)
        path = self.manager.save(checkpoint_number=step)
        self.record = {"metric": self.metric, "value": value, "step": step, "checkpoint": os.path.basename(path)}
        write_json_atomic(os.path.join(self.folder, RECORD), self.record)
        logging.info("New best %s = %.6g at step %d: saved %s", self.metric, value, step, path)
        return True

    def _better(self, value: float) -> bool:
        if self.record is None or self.record.get("metric") != self.metric:
            return True
        best = self.record["value"]
        return value < best if lower_is_better(self.metric) else value > best


def read_record(output_dir: str) -> dict | None:
    """The best checkpoint's record (metric, value, step, checkpoint), or None when there is none."""
    try:
        with open(os.path.join(output_dir, BEST_DIR, RECORD), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def best_checkpoint_path(output_dir: str) -> str | None:
    """The prefix of the kept best checkpoint, or None."""
    record = read_record(output_dir)
    if record is None:
        return None
    return tf.train.latest_checkpoint(os.path.join(output_dir, BEST_DIR))
