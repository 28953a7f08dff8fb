"""The classifier benchmark's fidelity checks: ours and Hugging Face where seeds cannot differ (MRPC)."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

from bench._classifier_runs import (BATCH, HF_ACCURACY_THREADS, LEARNING_RATE, TASKS, bert_config, dev_labels,
                                    features_file, fresh_dir, git_commit, init_folder, load_result, log_tail,
                                    make_order, program_flags, read_predictions, run_logged, save_result,
                                    task_scores)
from bert_tf.data.tfrecord import read_examples

FIDELITY_STEPS = 20


def no_dropout_config(work_dir: str) -> str:
    """WORK/bert_config_no_dropout.json: the MiniLM config with hidden and attention dropout 0."""
    path = os.path.join(work_dir, "bert_config_no_dropout.json")
    with open(bert_config(work_dir), encoding="utf-8") as f:
        config = json.load(f)
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return path


def step_losses(log_path: str) -> list[float]:
    """Per-step training losses from our log (run with --steps_per_loop=1: one line per step)."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        return [float(m[2]) for m in re.finditer(r"step (\d+)/\d+ \| loss ([\d.]+)", f.read())]


def fidelity_phase(args: argparse.Namespace) -> None:
    """The checks that need no seeds to agree: the initial model's dev predictions, a short training run with the
    config's dropout off, and the whole recipe with no dropout anywhere (every random mask off, so any gap
    left is the two frameworks' arithmetic)."""
    if not load_result(args.work_dir, "fidelity-init"):
        fidelity_init(args.work_dir)
    if not load_result(args.work_dir, "fidelity-train"):
        fidelity_train(args.work_dir)
    if not load_result(args.work_dir, FULL_LABEL):
        fidelity_train(args.work_dir, steps=None, classifier_dropout=0.0)


def fidelity_init(work: str) -> None:
    """MRPC dev predictions of the seed-1 initial weights (MiniLM + seeded head), ours (--do_eval only) and HF."""
    spec = TASKS["MRPC"]
    init = init_folder(work, spec, 1)
    ours_dir = fresh_dir(os.path.join(work, "fidelity", "ours_init"))
    code, _, _ = run_logged([sys.executable, "-m", "bert_tf.tasks.classifier", "--do_eval",
                             *program_flags(spec, 1, ours_dir, bert_config(work), init)], ours_dir + ".log")
    if code:
        save_result(work, "fidelity-init", {"error": f"ours exit {code}: {log_tail(ours_dir + '.log')}"})
        return
    hf_dir = fresh_dir(os.path.join(work, "fidelity", "hf_init"))
    dev = features_file(ours_dir, spec, "eval")
    code, _, line = run_logged([sys.executable, "-m", "bench._hf_classifier", f"--init={init}", f"--train={dev}",
                                f"--dev={dev}", "--num_labels=2", "--seed=1", "--num_train_epochs=0",
                                f"--out={hf_dir}"], hf_dir + ".log")
    if code or not line:
        save_result(work, "fidelity-init", {"error": f"hf exit {code}: {log_tail(hf_dir + '.log')}"})
        return
    ours_p = read_predictions(os.path.join(ours_dir, "eval_results.tsv"))
    hf_p = read_predictions(os.path.join(hf_dir, "eval_results.tsv"))
    save_result(work, "fidelity-init", {"rows": len(ours_p), "max_prob_diff": float(np.max(np.abs(ours_p - hf_p)))})


FULL_LABEL = "fidelity-train-full"


def fidelity_train(work: str, steps: int | None = FIDELITY_STEPS, classifier_dropout: float | None = None) -> None:
    """Both frameworks with the config's dropout off, same head, rows and batches on MRPC (seed 1): `steps` steps,
    or the whole recipe (3 epochs) with steps=None. With classifier_dropout None our classifier keeps the
    original's fixed dropout 0.1 on the pooled output, so the two still differ by that one mask per step; with
    0 (`--classifier_dropout=0`) neither side draws any random mask."""
    spec, label = TASKS["MRPC"], "fidelity-train" if steps else FULL_LABEL
    epochs = (steps + 0.5) * BATCH / 3667 if steps else spec.epochs
    ours_dir = fresh_dir(os.path.join(work, "fidelity", "ours" if steps else "ours_full"))
    init = init_folder(work, spec, 1)
    flags = program_flags(spec, 1, ours_dir, no_dropout_config(work), init, epochs)
    pooled = [] if classifier_dropout is None else [f"--classifier_dropout={classifier_dropout}"]
    code, _, _ = run_logged([sys.executable, "-m", "bert_tf.tasks.classifier", "--do_train", "--do_eval",
                             "--steps_per_loop=1", *flags, *pooled], ours_dir + ".log")
    if code:
        save_result(work, label, {"error": f"ours exit {code}: {log_tail(ours_dir + '.log')}"})
        return
    train_file = features_file(ours_dir, spec, "train")
    hf_dir = fresh_dir(os.path.join(work, "fidelity", "hf" if steps else "hf_full"))
    total = steps or int(sum(1 for _ in read_examples(train_file)) / BATCH * epochs)
    code, _, line = run_logged([
        sys.executable, "-m", "bench._hf_classifier", f"--init={init}", f"--train={train_file}",
        f"--dev={features_file(ours_dir, spec, 'eval')}", "--num_labels=2", "--seed=1", "--dropout=0",
        f"--order={make_order(work, train_file, 1, total)}", f"--out={hf_dir}", "--dynamic_padding",
        f"--learning_rate={LEARNING_RATE}", f"--num_train_epochs={epochs}", f"--threads={HF_ACCURACY_THREADS}"],
        hf_dir + ".log")
    if code or not line:
        save_result(work, label, {"error": f"hf exit {code}: {log_tail(hf_dir + '.log')}"})
        return
    ours_p = read_predictions(os.path.join(ours_dir, "eval_results.tsv"))
    hf_p = read_predictions(os.path.join(hf_dir, "eval_results.tsv"))
    ours_losses, hf_losses = step_losses(ours_dir + ".log"), json.loads(line)["losses"]
    labels = dev_labels(ours_dir, spec)
    save_result(work, label, {
        "steps": len(ours_losses), "classifier_dropout": 0.1 if classifier_dropout is None else classifier_dropout,
        "dynamic_padding": True, "commit": git_commit(), "ours_losses": ours_losses, "hf_losses": hf_losses,
        "max_loss_diff": max(abs(a - b) for a, b in zip(ours_losses, hf_losses)),
        "max_prob_diff": float(np.max(np.abs(ours_p - hf_p))),
        "same_predictions": float(np.mean(ours_p.argmax(-1) == hf_p.argmax(-1))),
        "ours_scores": task_scores(spec, ours_p, labels), "hf_scores": task_scores(spec, hf_p, labels)})
