"""The classifier benchmark's speed phase: training and prediction examples/s of ours and Hugging Face on MRPC.

Contenders per round, each a fresh process, in this order: ours training with the program's default dynamic
padding (`ours_train`) and with `--nodynamic_padding` (`ours_train_fixed`), ours prediction both ways
(`ours_predict`, `ours_predict_fixed`), HF training + prediction padded to max_seq_length (`hf_fixed`, run_glue.py's
default) and cut to each batch's longest row (`hf_dynamic`), and with --speed_jit ours training under
`--jit_compile` (`ours_jit_train`). Results: WORK/results/speed-NAME-rROUND.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from bench._classifier_runs import (BATCH, TASKS, bert_config, features_file, fresh_dir, git_commit, init_folder,
                                    load_result, log_tail, make_order, program_flags, run_logged, save_result)
from bench._cpu import read_cpu

MRPC_TRAIN_ROWS = 3667  # MRPC train.tsv rows


def padding_flags(dynamic: bool) -> list[str]:
    return [] if dynamic else ["--nodynamic_padding"]  # dynamic padding is the program's default


def ours_train_speed(args: argparse.Namespace, label: str, jit: bool, dynamic: bool = True,
                     config: str | None = None) -> dict:
    """Our program training MRPC for warm-up + timed steps in loops of --speed_loop; examples/s over the timed
    loops (the first loop traces).

    The rate is the program's own per-loop figure ("... seq/s", timed around the compiled loop); the timed loops'
    rates are combined as total examples / total seconds.
    """
    spec, work_dir = TASKS["MRPC"], args.work_dir
    warmup, timed, loop = args.speed_warmup, args.speed_timed, args.speed_loop
    output_dir = fresh_dir(os.path.join(work_dir, "speed", label))
    epochs = (warmup + timed + 0.5) * BATCH / MRPC_TRAIN_ROWS
    command = [sys.executable, "-m", "bert_tf.tasks.classifier", "--do_train", f"--steps_per_loop={loop}",
               *program_flags(spec, 1, output_dir, config or bert_config(work_dir), init_folder(work_dir, spec, 1),
                              epochs),
               *padding_flags(dynamic), *(["--jit_compile"] if jit else [])]
    code, wall, _ = run_logged(command, output_dir + ".log")
    if code:
        return {"error": f"exit {code}: {log_tail(output_dir + '.log')}"}
    seconds = []
    with open(output_dir + ".log", encoding="utf-8", errors="replace") as f:
        for match in re.finditer(r"step (\d+)/(\d+) \|.*\| ([\d.]+) seq/s", f.read()):
            step = int(match[1])
            if step % loop == 0 and step > warmup:
                seconds.append(loop * BATCH / float(match[3]))
    if len(seconds) * loop != timed:
        return {"error": f"expected {timed // loop} timed loops in the log, found {len(seconds)}"}
    return {"train_examples_per_s": timed * BATCH / sum(seconds), "train_s": sum(seconds), "timed_steps": timed,
            "dynamic_padding": dynamic, "jit_compile": jit, "wall_s": wall}


def ours_predict_speed(args: argparse.Namespace, label: str, dynamic: bool = True, config: str | None = None) -> dict:
    """bench/_ours_predict_speed.py (finetune.predict_features) on the MRPC dev set at batch 8 and 32."""
    spec, work_dir = TASKS["MRPC"], args.work_dir
    output_dir = fresh_dir(os.path.join(work_dir, "speed", label))
    command = [sys.executable, "-m", "bench._ours_predict_speed", "--batch_sizes=8,32",
               f"--repeats={args.speed_repeats}", f"--passes={args.speed_passes}", "--",
               *program_flags(spec, 1, output_dir, config or bert_config(work_dir), init_folder(work_dir, spec, 1)),
               "--do_eval", *padding_flags(dynamic)]
    code, wall, line = run_logged(command, output_dir + ".log")
    if code or not line:
        return {"error": f"exit {code}: {log_tail(output_dir + '.log')}"}
    return json.loads(line) | {"wall_s": wall}


def hf_speed(args: argparse.Namespace, label: str, train_dir: str, eval_dir: str, dynamic: bool) -> dict:
    """bench/_hf_classifier.py --speed on the MRPC features our speed runs cached, in our seed-1 batch order."""
    spec, work_dir = TASKS["MRPC"], args.work_dir
    train_file = features_file(train_dir, spec, "train")
    order = make_order(work_dir, train_file, 1, args.speed_warmup + args.speed_timed)
    out = fresh_dir(os.path.join(work_dir, "speed", label))
    command = [sys.executable, "-m", "bench._hf_classifier", "--speed", f"--init={init_folder(work_dir, spec, 1)}",
               f"--train={train_file}", f"--dev={features_file(eval_dir, spec, 'eval')}", "--num_labels=2",
               "--seed=1", f"--order={order}", f"--out={out}", f"--warmup_steps={args.speed_warmup}",
               f"--timed_steps={args.speed_timed}", "--speed_predict_batch_sizes=8,32",
               f"--speed_predict_passes={args.speed_passes}", *(["--dynamic_padding"] if dynamic else [])]
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


def measured(args: argparse.Namespace, label: str, measure) -> None:
    """Runs one contender unless its result is saved; saves it with the load average around it and the commit."""
    if load_result(args.work_dir, f"speed-{label}"):
        return
    load, commit = os.getloadavg()[0], git_commit()
    result = measure(label)
    save_result(args.work_dir, f"speed-{label}", result | {"load_before": load, "load_after": os.getloadavg()[0],
                                                            "commit": commit, "cpu": read_cpu().label()})


def speed_diagnostics(args: argparse.Namespace) -> None:
    """One round of ours (default padding) with the tanh GELU, to measure what MiniLM's erf GELU costs us."""
    config = tanh_gelu_config(args.work_dir)
    measured(args, "ours_train_tanh_gelu-r1", lambda label: ours_train_speed(args, label, False, True, config))
    measured(args, "ours_predict_tanh_gelu-r1", lambda label: ours_predict_speed(args, label, True, config))


def speed_phase(args: argparse.Namespace) -> None:
    """Rounds of the contenders (module docstring); HF reads the rows the round's ours runs cached."""
    if args.speed_timed % args.speed_loop or args.speed_warmup % args.speed_loop:
        raise SystemExit("--speed_warmup and --speed_timed must be multiples of --speed_loop")
    for r in range(1, args.speed_rounds + 1):
        def hf(label: str, dynamic: bool, r: int = r) -> dict:
            speed_dir = os.path.join(args.work_dir, "speed")
            return hf_speed(args, label, os.path.join(speed_dir, f"ours_train-r{r}"),
                            os.path.join(speed_dir, f"ours_predict-r{r}"), dynamic)

        steps = {"ours_train": lambda label: ours_train_speed(args, label, jit=False),
                 "ours_train_fixed": lambda label: ours_train_speed(args, label, jit=False, dynamic=False),
                 "ours_predict": lambda label: ours_predict_speed(args, label),
                 "ours_predict_fixed": lambda label: ours_predict_speed(args, label, dynamic=False),
                 "hf_fixed": lambda label: hf(label, False),
                 "hf_dynamic": lambda label: hf(label, True)}
        if args.speed_jit:
            steps["ours_jit_train"] = lambda label: ours_train_speed(args, label, jit=True)
        for name, measure in steps.items():
            measured(args, f"{name}-r{r}", measure)
    if args.speed_diagnostics:
        speed_diagnostics(args)
