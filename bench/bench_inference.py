"""Inference of a sentence classifier, strings in -> probabilities out: our SavedModel and Python model against the
Hugging Face pipeline and ONNX Runtime, on MiniLM-L6 and BERT-Base shapes (issue #18).

Contenders (bench/_inference_contender.py, each in a fresh process of its own, library thread defaults):
ours_saved_model (the exporter's `classifier/` SavedModel, loaded with TensorFlow + tensorflow-text only),
ours_python (FastTokenizer + BertClassifierModel through a tf.function), hf_pipeline (transformers'
text-classification pipeline on torch CPU) and onnxruntime (the same torch model exported to ONNX, HF fast
tokenizer). Figures: batch-1 latency p50/p99 on short (SST-2) and 128-token (wiki) strings, batch-32 throughput on
128-token strings, tokenization included; each contender's probabilities on fixed check sets are compared with the
HF pipeline's (bench/_inference_report.py). Weights and inputs: bench/_inference_setup.py.

Phases (resumable: every finished process leaves WORK/results/MODEL-CONTENDER-rROUND.json, skipped next time):

* setup: the weights folders, inputs.json, the SavedModel exports and the ONNX files (made once; a SavedModel
  export of an older checkout is kept: delete WORK/models/MODEL/exported to redo it);
* measure (default): setup, then --rounds rounds of every model and contender (contender order reversed every
  other round);
* report: only re-render docs/benchmarks.md from the saved results.

    python bench/bench_inference.py --phase=measure --rounds=3    # ~50 min on 2 cores; run it on a quiet machine
    python bench/bench_inference.py --phase=report

    # smoke test (a few calls per figure, scratch work dir, docs/benchmarks.md untouched; ~5 min):
    python bench/bench_inference.py --smoke
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import _inference_setup as setup  # noqa: E402
from bench._classifier_runs import git_commit, load_result, log_tail, run_logged, save_result  # noqa: E402
from bench._cpu import read_cpu  # noqa: E402
from bench._inference_contender import CONTENDERS  # noqa: E402
from bench._inference_report import report  # noqa: E402
from bench._report import comma_list, known_names, run_phase  # noqa: E402

PHASES = ("setup", "measure", "report")
SMOKE = {"calls": 10, "warmup": 2, "b32_min_batches": 1, "b32_min_seconds": 0.0, "b32_warmup": 1, "check_count": 4,
         "rounds": 1}
SMOKE_WORK_DIR = "/tmp/bench_inference_smoke"


def model_status(args: argparse.Namespace, model: str) -> dict[str, str]:
    """Builds the model's weights, SavedModel and ONNX file; returns {contender: why it cannot run} for those
    that cannot."""
    setup.weights_folder(args.work_dir, model)
    missing = {}
    if "ours_saved_model" in args.contenders:
        missing["ours_saved_model"] = export_problem(lambda: setup.export_saved_model(args.work_dir, model),
                                                     "this checkout's exporter writes no classifier/ SavedModel")
    if "onnxruntime" in args.contenders:
        missing["onnxruntime"] = export_problem(lambda: setup.export_onnx(args.work_dir, model),
                                                "`onnxruntime` is not installed here")
    return {contender: why for contender, why in missing.items() if why}


def export_problem(export, absent: str) -> str | None:
    """None when `export()` gives its file; else why the contender cannot run (a failed export is reported, not
    fatal: the other contenders still run)."""
    try:
        return None if export() else "not run: " + absent
    except SystemExit as e:
        print(e, flush=True)
        return f"not run: {str(e)[-200:]}".replace("|", "/")


def setup_phase(args: argparse.Namespace) -> dict:
    """Weights, inputs and exports of every model; WORK/status.json records what cannot run and the settings."""
    path = setup.write_inputs(args.work_dir)
    with open(path, encoding="utf-8") as f:
        inputs = json.load(f)
    status = {model: model_status(args, model) for model in args.models}
    status["inputs"] = {k: inputs[k] for k in ("short_source", "long_source", "long_wordpieces")} | {
        "short_count": len(inputs["short"]), "long_count": len(inputs["long"])}
    status["settings"] = {k: getattr(args, k) for k in SMOKE}
    with open(os.path.join(args.work_dir, "status.json"), "w", encoding="utf-8") as f:
        json.dump(status, f, indent=1)
    return status


def contender_command(args: argparse.Namespace, model: str, contender: str) -> list[str]:
    return [sys.executable, "-m", "bench._inference_contender", f"--contender={contender}",
            f"--model_dir={setup.model_dir(args.work_dir, model)}", f"--inputs={setup.inputs_file(args.work_dir)}",
            f"--calls={args.calls}", f"--warmup={args.warmup}", f"--b32_min_batches={args.b32_min_batches}",
            f"--b32_min_seconds={args.b32_min_seconds}", f"--b32_warmup={args.b32_warmup}",
            f"--check_count={args.check_count}"]


def measure_one(args: argparse.Namespace, model: str, contender: str, label: str) -> dict:
    """One contender process; its RESULT with the load average around it, the commit and the CPU label."""
    load, commit = os.getloadavg()[0], git_commit()
    log = os.path.join(args.work_dir, "logs", label + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    code, wall, line = run_logged(contender_command(args, model, contender), log)
    if code or not line:
        result = {"error": f"exit {code}: {log_tail(log)}"}
    else:
        result = json.loads(line)
    if contender == "ours_saved_model":
        result["export_commit"] = setup.export_commit(args.work_dir, model)
    return save_result(args.work_dir, label, result | {
        "model": model, "load_before": load, "load_after": os.getloadavg()[0], "commit": commit,
        "cpu": read_cpu().label(), "process_wall_s": wall, "log": log})


def measure_phase(args: argparse.Namespace) -> None:
    """Setup, then rounds of every (model, contender) that can run, skipping saved results."""
    if args.smoke:  # a smoke run measures afresh; weights and exports are kept
        for name in glob.glob(os.path.join(args.work_dir, "results", "*.json")):
            os.remove(name)
    status = setup_phase(args)
    for r in range(1, args.rounds + 1):
        order = args.contenders if r % 2 else list(reversed(args.contenders))
        for model in args.models:
            for contender in order:
                label = f"{model}-{contender}-r{r}"
                if contender in status[model] or load_result(args.work_dir, label):
                    continue
                measure_one(args, model, contender, label)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", default="measure", choices=PHASES)
    p.add_argument("--models", default=",".join(setup.MODELS), help="comma list of: " + ", ".join(setup.MODELS))
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma list of: " + ", ".join(CONTENDERS))
    p.add_argument("--rounds", type=int, default=3, help="rounds of every contender (each a fresh process)")
    p.add_argument("--calls", type=int, default=300, help="timed batch-1 calls per input kind")
    p.add_argument("--warmup", type=int, default=20, help="untimed batch-1 calls before each batch-1 timing")
    p.add_argument("--b32_min_batches", type=int, default=8, help="at least this many timed batches of 32")
    p.add_argument("--b32_min_seconds", type=float, default=20.0, help="and at least this many seconds of them")
    p.add_argument("--b32_warmup", type=int, default=2, help="untimed batches of 32 first")
    p.add_argument("--check_count", type=int, default=16, help="strings per batch-1 check set")
    p.add_argument("--smoke", action="store_true",
                   help=f"a few calls per figure, 1 round, --work_dir {SMOKE_WORK_DIR} unless given, --no_write")
    p.add_argument("--work_dir", default=None, help="weights, exports, logs and results (default /tmp/bench_inference)")
    p.add_argument("--command", default=None, help="the command to record in the doc (default: this one)")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
        args.no_write = True
    args.work_dir = args.work_dir or (SMOKE_WORK_DIR if args.smoke else "/tmp/bench_inference")
    args.models = known_names(p, comma_list(args.models), setup.MODELS, "model")
    args.contenders = known_names(p, comma_list(args.contenders), CONTENDERS, "contender")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_phase(args, {"setup": setup_phase, "measure": measure_phase}, report, "inference")


if __name__ == "__main__":
    main()
