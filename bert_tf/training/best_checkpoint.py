"""Keeping the best checkpoint by a dev metric, as the paper picked the best dev run for BERT-Large.

`BestCheckpoint.update(metrics, step)` writes the model to OUTPUT_DIR/best/ when the chosen metric
beats every earlier evaluation (higher is better; lower for a metric named *loss*). The folder is
in the original release's layout (bert_config.json, bert_model.ckpt, vocab.txt: usable as any
program's --init_checkpoint; the task's files such as label_list.txt) plus best.json (metric, value, step), and is replaced as a whole,
atomically: a run killed and resumed keeps comparing against the true best (a kill while the folder
was being replaced is put right before the record is read). The weights are read on the host, so
keeping works the same under every strategy.
"""
from __future__ import annotations

import json
import math
import os
from typing import Mapping

from absl import logging

from bert_tf.data.atomic_io import atomic_folder, recover_folder, write_json_atomic
from bert_tf.training.trainer import TrainingError

BEST_DIR = "best"
RECORD = "best.json"
CHECKPOINT = "bert_model.ckpt"


def lower_is_better(metric: str) -> bool:
    return "loss" in metric


class BestCheckpoint:
    """The best weights so far in OUTPUT_DIR/best, by `metric`."""

    def __init__(self, output_dir: str, metric: str, model, config, vocab_file: str | None,
                 extra_files: Mapping[str, str] | None = None):
        self.output_dir, self.folder, self.metric = output_dir, os.path.join(output_dir, BEST_DIR), metric
        self.model, self.config, self.vocab_file = model, config, vocab_file
        self.extra_files = dict(extra_files or {})  # the task's, as in OUTPUT_DIR/export
        self.record: dict | None = None
        self._loaded = False

    def _load(self) -> None:
        """Reads the kept record, after putting right what a run killed while keeping left. Done at
        the first update, which only the chief makes: it holds the lock on the output folder."""
        if not self._loaded:
            recover_best(self.output_dir)
            self.record, self._loaded = read_record(self.output_dir), True

    def update(self, metrics: Mapping[str, float], step: int) -> bool:
        """Writes the weights if metrics[metric] is the best yet; returns whether it was."""
        from bert_tf.checkpoints import export_original_folder

        if self.metric not in metrics:
            raise TrainingError(f"--best_checkpoint_metric={self.metric!r} is not an eval metric of this task; "
                                f"choose one of {', '.join(sorted(metrics))}")
        value = float(metrics[self.metric])
        self._load()
        if not math.isfinite(value) or not self._better(value):
            return False
        record = {"metric": self.metric, "value": value, "step": step}

        def fill(tmp: str) -> None:
            export_original_folder(self.model, self.config, tmp, self.vocab_file, self.extra_files, in_place=True)
            write_json_atomic(os.path.join(tmp, RECORD), record)

        atomic_folder(self.folder, True, fill)
        self.record = record
        logging.info("New best %s = %.6g at step %d: kept in %s", self.metric, value, step, self.folder)
        return True

    def _better(self, value: float) -> bool:
        if self.record is None or self.record.get("metric") != self.metric:
            return True
        best = self.record["value"]
        return value < best if lower_is_better(self.metric) else value > best


def read_record(output_dir: str) -> dict | None:
    """The best checkpoint's record (metric, value, step), or None when there is none."""
    try:
        with open(os.path.join(output_dir, BEST_DIR, RECORD), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def recover_best(output_dir: str) -> None:
    """Puts back OUTPUT_DIR/best if a run was killed while replacing it (call on the chief, under the
    output folder's lock), so that neither a resumed run nor an eval-only run loses the kept best."""
    for line in recover_folder(os.path.join(output_dir, BEST_DIR)):
        logging.warning("%s", line)


def best_checkpoint(output_dir: str, metric: str) -> tuple[str, int] | None:
    """(TF1 checkpoint prefix, step) of the kept best by `metric`, or None."""
    record = read_record(output_dir)
    if record is None or record.get("metric") != metric:
        return None
    return os.path.join(output_dir, BEST_DIR, CHECKPOINT), int(record["step"])
