"""How the speed studies read a contender's figures: each bench contender writes one JSON file into its run's
folder (`--out`, `--json_out`), and each reader here turns one such file into the figures a speed table shows.
Our own programs time themselves in their log (the training loop's "N seq/s", the prediction's "predicted N
examples ... after the first batch", a bench helper's "RESULT {json}" line): the runner keeps a run's log beside
its folder, OUT.log, and the log readers below read it there.
"""
from __future__ import annotations

import json
import os
import re
from typing import Mapping

from studies.study import MetricReader

RESULT = "result.json"


def load(out: str, filename: str = RESULT) -> dict:
    with open(os.path.join(out, filename), encoding="utf-8") as f:
        return json.load(f)


def pick(result: Mapping, paths: Mapping[str, str]) -> dict[str, float]:
    """{metric: value at a dotted path of `result`} for every path present ("b1_short.p50_ms"); a path may name
    alternatives, "a.b|c", the first present counting."""
    found = {}
    for metric, alternatives in paths.items():
        for path in alternatives.split("|"):
            value: object = result
            for part in path.split("."):
                value = value.get(part) if isinstance(value, Mapping) else None
            if isinstance(value, (int, float)):
                found[metric] = float(value)
                break
    return found


def figures(paths: Mapping[str, str], filename: str = RESULT) -> MetricReader:
    """A reader of one JSON file's figures at dotted paths (see `pick`)."""
    def read(out: str, folders: Mapping[str, str]) -> dict[str, float]:
        return pick(load(out, filename), paths)
    return read


TOKENIZER = {"mb_per_s": "mb_per_s", "mb_per_cpu_s": "mb_per_cpu_s", "identical_lines": "identical_lines"}


def model_window(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """bench/model_contender.py's result.json: forward and training sequences/s of one window and the training
    step's matmul GFLOP/s (3 × the forward FLOPs the model runs)."""
    window = load(out)
    rate = {phase: window["batch_size"] * len(window[phase]) / sum(window[phase]) for phase in ("forward_s", "train_s")}
    return {"forward_seq_per_s": rate["forward_s"], "train_seq_per_s": rate["train_s"],
            "train_gflops": 3 * window["forward_flops_per_seq"] * rate["train_s"] / 1e9}


DATA_PREP = {"wall_s": "wall_s", "peak_rss_mib": "peak_rss_mib", "instances": "instances",
             "speedup_vs_original": "speedup_vs_original", "rss_vs_original": "rss_vs_original",
             "identical_to_original": "identical_to_original"}
INFERENCE = {"b1_short_p50_ms": "b1_short.p50_ms", "b1_short_p99_ms": "b1_short.p99_ms",
             "b1_long_p50_ms": "b1_long.p50_ms", "b1_long_p99_ms": "b1_long.p99_ms",
             "b32_sentences_per_s": "b32_long.sentences_per_s", "max_abs_diff_vs_hf": "max_abs_diff_vs_hf",
             "load_s": "load_s"}
INPUT_PIPELINE = {"records_per_s": "records_per_s"}
SOAK = ("rss_slope_mib_per_min", "rss_late_slope_mib_per_min", "rss_peak_mib", "p50_ms", "p99_ms", "p50_drift", "requests_per_s", "rows_per_s",
        "b1_items_per_s", "b8_items_per_s", "b32_items_per_s", "errors", "hostile_handled",
        "hostile_good_after_max_abs_diff")
serving_soak = figures({name: name for name in SOAK})  # bench/serving_soak.py's result.json


def inference(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """bench/inference_contender.py's result.json: batch-1 p50/p99 ms (short and 128-token strings), batch-32
    sentences/s, load seconds and, against the HF pipeline's run, the largest probability difference in millionths
    (`max_abs_diff_vs_hf_ppm`: a table shows it with a fixed number of digits)."""
    found = pick(load(out), INFERENCE)
    if "max_abs_diff_vs_hf" in found:
        found["max_abs_diff_vs_hf_ppm"] = found.pop("max_abs_diff_vs_hf") * 1e6
    return found


FINETUNING = {"train_examples_per_s": "train_examples_per_s",
              "predict_b8_examples_per_s": "predict.8.examples_per_s|predict_examples_per_s",
              "predict_b32_examples_per_s": "predict.32.examples_per_s"}


def finetuning(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """A Hugging Face peer's result.json (bench/_hf_*.py --speed): training examples/s, and prediction examples/s
    per batch size where it has them (the classifier's `predict.B.examples_per_s`; SQuAD's
    `predict_examples_per_s`, measured at batch 8, the original's predict_batch_size)."""
    return pick(load(out), FINETUNING)


# ---------------------------------------------------------------------------------------------- our programs' logs

LOOP_LINE = re.compile(r"\] step (\d+)/(\d+) \|.*\| ([\d.]+) seq/s")
PREDICTED = re.compile(r"predicted (\d+) examples in ([\d.]+) s \(([\d.]+) examples/s(?:, ([\d.]+) after the first)?")


def log_text(out: str) -> str:
    """The run's log, which the runner writes beside its output folder (OUT.log)."""
    with open(out.rstrip(os.sep) + ".log", encoding="utf-8", errors="replace") as f:
        return f.read()


def train_rate(text: str, warmup_steps: int, steps_per_loop: int) -> dict[str, float]:
    """Training examples/s of our program over its loops after `warmup_steps` (the first loop traces): the loops'
    own "N seq/s" (timed around the compiled loop), combined as examples over seconds (their harmonic mean)."""
    rates = [float(m[3]) for m in LOOP_LINE.finditer(text)
             if int(m[1]) % steps_per_loop == 0 and int(m[1]) > warmup_steps]
    if not rates:
        raise ValueError(f"no training loop ended after step {warmup_steps} in the log")
    return {"train_examples_per_s": len(rates) / sum(1 / r for r in rates), "timed_steps": len(rates) * steps_per_loop}


def program_speed(warmup_steps: int, steps_per_loop: int) -> MetricReader:
    """Our fine-tuning program's log: its training rate (see `train_rate`) and, when it predicted, its prediction
    examples/s after the first batch (tracing excluded), as SQuAD's run logs it at batch 8."""
    def read(out: str, folders: Mapping[str, str]) -> dict[str, float]:
        text = log_text(out)
        found = train_rate(text, warmup_steps, steps_per_loop)
        predicted = PREDICTED.findall(text)
        if predicted:
            rows, _, overall, after_first = predicted[-1]
            found["predict_b8_examples_per_s"] = float(after_first or overall)
        return found
    return read


def result_line(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """A bench helper's last `RESULT {json}` line in the log (bench/_ours_predict_speed.py): prediction
    examples/s per batch size, steady (tracing cancelled)."""
    lines = [line for line in log_text(out).splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise ValueError("no RESULT line in the log")
    return pick(json.loads(lines[-1][len("RESULT "):]), FINETUNING)
