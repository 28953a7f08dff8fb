"""How a study reads a run's figures from its output folder: the programs' own result files, scored the same way
for every framework."""
from __future__ import annotations

import glob
import json
import os
from typing import Mapping

import numpy as np

from bert_tf.data.tfrecord import read_examples
from bert_tf.training import metrics
from studies.study import MetricReader


def eval_results(filename: str = "eval_results.txt", keys: Mapping[str, str] | None = None) -> MetricReader:
    """The original's "key = value" file (eval_results.txt); `keys`: {file key: metric name} to keep (default
    every numeric key)."""
    def read(out: str, folders: Mapping[str, str]) -> dict[str, float]:
        found = {}
        with open(os.path.join(out, filename), encoding="utf-8") as f:
            for line in f:
                name, _, value = line.partition(" = ")
                try:
                    found[name.strip()] = float(value)
                except ValueError:
                    continue
        return {new: found[old] for old, new in keys.items()} if keys else found
    return read


def json_results(filename: str, keys: Mapping[str, str] | None = None) -> MetricReader:
    """A JSON object of figures (SQuAD's eval_results.json, a contender's result.json); `keys` as above."""
    def read(out: str, folders: Mapping[str, str]) -> dict[str, float]:
        with open(os.path.join(out, filename), encoding="utf-8") as f:
            found = json.load(f)
        found = {k: v for k, v in found.items() if isinstance(v, (int, float))}
        return {new: found[old] for old, new in keys.items()} if keys else found
    return read


def classifier_scores(task: str, features_run: str, regression: bool = False) -> MetricReader:
    """GLUE scores of a run's eval_results.tsv (class probabilities, or the score, per dev row) against the dev
    labels of the cached features of run `features_run` (ours), by bert_tf.training.metrics: one scorer for
    every framework."""
    def read(out: str, folders: Mapping[str, str]) -> dict[str, float]:
        outputs = np.loadtxt(os.path.join(out, "eval_results.tsv"), delimiter="\t", ndmin=2)
        pattern = os.path.join(folders[features_run], "features", f"{task.lower()}-eval-*.tfrecord")
        found = sorted(glob.glob(pattern))
        if not found:
            raise OSError(f"no cached dev features matching {pattern}")
        labels = np.array([row["label_ids"][0] for row in read_examples(found[-1])])
        if regression:
            return {"pearson": metrics.pearson(outputs[:, 0], labels),
                    "spearman": metrics.spearman(outputs[:, 0], labels)}
        predicted, labels = np.argmax(outputs, axis=-1), labels.astype(int)
        return {"accuracy": metrics.accuracy(labels, predicted), "f1": metrics.f1(labels, predicted),
                "matthews_corrcoef": metrics.matthews_corrcoef(labels, predicted)}
    return read


def nothing(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """A set-up run (data, initial weights): no figures."""
    return {}
