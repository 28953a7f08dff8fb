"""The classifier benchmark's speed phase: training and prediction examples/s of ours and Hugging Face on MRPC."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from bench._classifier_runs import (BATCH, TASKS, bert_config, features_file, fresh_dir, init_folder, load_result,
                                    log_tail, make_order, program_flags, run_logged, save_result)

SPEED_WARMUP, SPEED_TIMED, SPEED_LOOP = 5, 40, 5


def ours_train_speed(work_dir: str, label: str, jit: bool, config: str | None = None) -> dict:
    """Our program training MRPC for 45 steps in loops of 5; examples/s over loops 2-9 (the first traces).

    The rate is the program's own per-loop figure ("... seq/s", one loop = 5 steps timed around the compiled
    loop); the timed loops' rates are combined as total examples / total seconds.
    """
    spec = TASKS["MRPC"]
    output_dir = fresh_dir(os.path.join(work_dir, "speed", label))
    rows = 3667  # MRPC train.tsv rows
    epochs = (SPEED_WARMUP + SPEED_TIMED + 0.5) * BATCH / rows
    command = [sys.executable, "-m", "bert_tf.tasks.classifier", "--do_train", f"--steps_per_loop={SPEED_LOOP}",
               *program_flags(spec, 1, output_dir, config or bert_config(work_dir), init_folder(work_dir, spec, 1),
                              epochs),
               *(["--jit_compile"] if jit else [])]
    code, wall, _ = run_logged(command, output_dir + ".log")
    if code:
        return {"error": f"exit {code}: {log_tail(output_dir + '.log')}"}
    seconds = []
    with open(output_dir + ".log", encoding="utf-8", errors="replace") as f:
        for match in re.finditer(r"step (\d+)/(\d+) \|.*\| ([\d.]+) seq/s", f.read()):
            step = int(match[1])
            if step % SPEED_LOOP == 0 and step > SPEED_WARMUP:
                seconds.append(SPEED_LOOP * BATCH / float(match[3]))
    if len(seconds) * SPEED_LOOP != SPEED_TIMED:
        return {"error": f"expected {SPEED_TIMED // SPEED_LOOP} timed loops in the log, found {len(seconds)}"}
    return {"train_examples_per_s": SPEED_TIMED * BATCH / sum(seconds), "train_s": sum(seconds), "wall_s": wall}


def ours_predict_speed(work_dir: str, label: str, config: str | None = None) -> dict:
    """bench/_ours_predict_speed.py on the MRPC dev set at batch 8 and 32."""
    spec = TASKS["MRPC"]
    output_dir = fresh_dir(os.path.join(work_dir, "speed", label))
    command = [sys.executable, "-m", "bench._ours_predict_speed", "--batch_sizes=8,32", "--repeats=2", "--passes=3", "--",
               *program_flags(spec, 1, output_dir, config or bert_config(work_dir), init_folder(work_dir, spec, 1)),
               "--do_eval"]
    code, wall, line = run_logged(command, output_dir + ".log")
    if code or not line:
        return {"error": f"exit {code}: {log_tail(output_dir + '.log')}"}
    return json.loads(line) | {"wall_s": wall}


def hf_speed(work_dir: str, label: str, train_dir: str, eval_dir: str) -> dict:
    """bench/_hf_classifier.py --speed on the MRPC features our speed runs cached, in our seed-1 batch order."""
    spec = TASKS["MRPC"]
    train_file = features_file(train_dir, spec, "train")
    order = make_order(work_dir, train_file, 1, SPEED_WARMUP + SPEED_TIMED)
    out = fresh_dir(os.path.join(work_dir, "speed", label))
    command = [sys.executable, "-m", "bench._hf_classifier", "--speed", f"--init={init_folder(work_dir, spec, 1)}",
               f"--train={train_file}", f"--dev={features_file(eval_dir, spec, 'eval')}", "--num_labels=2",
               "--seed=1", f"--order={order}", f"--out={out}", f"--warmup_steps={SPEED_WARMUP}",
               f"--timed_steps={SPEED_TIMED}", "--speed_predict_batch_sizes=8,32", "--speed_predict_passes=3"]
    code, wall, line = run_logged(command, out + ".log")
    if code or not line:
        return {"error": f"exit {code}: {log_tail(out + '.log')}"}
    return json.loads(line) | {"wall_s": wall}


def tanh_gelu_config(work_dir: str) -> str:
    """WORK/bert_config_tanh_gelu.json: MiniLM's config with the original's tanh GELU (a diagnostic: not the same
    model, but the activation our fused CPU kernel computes)."""
    path = os.path.join(work_dir, "bert_config_tanh_gelu.json")
    with open(bert_config(work_dir), encoding="utf-8") as f:
        config = json.load(f)
    config["hidden_act"] = "gelu"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return path


def speed_diagnostics(args: argparse.Namespace) -> None:
    """One round of ours with the tanh GELU, to measure what MiniLM's erf GELU costs us."""
    config = tanh_gelu_config(args.work_dir)
    for name, measure in {"ours_train_tanh_gelu": lambda label: ours_train_speed(args.work_dir, label, False, config),
                          "ours_predict_tanh_gelu": lambda label: ours_predict_speed(args.work_dir, label, config)
                          }.items():
        if not load_result(args.work_dir, f"speed-{name}-r1"):
            load = os.getloadavg()[0]
            result = measure(f"{name}-r1")
            save_result(args.work_dir, f"speed-{name}-r1", result | {"load_before": load,
                                                                      "load_after": os.getloadavg()[0]})


def speed_phase(args: argparse.Namespace) -> None:
    """Rounds of: ours training, ours prediction, HF training + prediction (on the rows those two cached), ours
    training under XLA."""
    for round_index in range(1, args.speed_rounds + 1):
        speed_dir = os.path.join(args.work_dir, "speed")
        steps = {"ours_train": lambda label: ours_train_speed(args.work_dir, label, jit=False),
                 "ours_predict": lambda label: ours_predict_speed(args.work_dir, label),
                 "hf": lambda label: hf_speed(args.work_dir, label,
                                              os.path.join(speed_dir, f"ours_train-r{round_index}"),
                                              os.path.join(speed_dir, f"ours_predict-r{round_index}")),
                 "ours_jit_train": lambda label: ours_train_speed(args.work_dir, label, jit=True)}
        for name, measure in steps.items():
            label = f"speed-{name}-r{round_index}"
            if load_result(args.work_dir, label):
                continue
            load = os.getloadavg()[0]
            result = measure(f"{name}-r{round_index}")
            save_result(args.work_dir, label, result | {"load_before": load, "load_after": os.getloadavg()[0]})
    if args.speed_diagnostics:
        speed_diagnostics(args)
