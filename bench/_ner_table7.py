"""The paper's Table 7 with our program (bench/bench_ner.py --phase=table7): MiniLM frozen, the layers each row names
into a 2-layer BiLSTM and a softmax classifier, by `python -m bert_tf.tasks.ner.program --mode=feature_based
--features=F --do_train --do_eval --do_predict`, one run per row and seed (WORK/runs/t7-sSEED-F, its result
WORK/results/t7-sSEED-F.json), on the fine-tuning runs' data, document context and max_seq_length, from the same
seeded init folder (only its encoder is read: the tagging head is unused).

The BiLSTM's recipe (the paper gives none): our optimizer (the original's AdamWeightDecay) at --table7_learning_rate
1e-3, batch 32, --table7_epochs 4, warmup 10%, --lstm_units 768 per direction (the paper's; a smaller size only where
CPU time forces it, the same for every row: a phase refuses to mix sizes in one --work_dir).

Cost: every row has its own --output_dir, as the program keeps one checkpoint series per output folder, but all rows
of a seed share one --feature_cache_dir (WORK/frozen/sSEED) of per-layer frozen tables: the first row run, sum_all,
encodes layers 1..L of every window of train, dev and test (20,744 windows of up to 128 tokens), the second,
embeddings, encodes layer 0, and the other four read cached layers only (about 460 MB per layer). At the 20 windows/s
a smoke measured on this 2-core CPU beside two other benchmarks, an encoding pass takes about 17 minutes, small beside
the BiLSTM's training at 768 units. A killed row keeps the encoded tables (verified by the program before reuse) and
retrains from scratch. Before the rows left, the phase prints their estimated cost from the first finished row's
measured times (--lstm_units can then be chosen).
"""
from __future__ import annotations

import argparse
import math
import os

from bench import _ner_runs
from bench._classifier_runs import load_result, minilm_config
from bench._ner_runs import BATCH, FILES, data_dir, program_command, run_program
from bert_tf.tasks.ner.conll import read_conll
from bert_tf.tasks.ner.frozen_features import FEATURES

ROWS = (  # (--features, or "finetune"; the paper's row; its dev F1: BERT-Base cased, Table 7)
    ("finetune", "Fine-tuning", 96.4),
    ("embeddings", "Embeddings", 91.0),
    ("second_to_last", "Second-to-last hidden", 95.6),
    ("last", "Last hidden", 94.9),
    ("sum_last_four", "Weighted sum last four hidden", 95.9),
    ("concat_last_four", "Concat last four hidden", 96.1),
    ("sum_all", "Weighted sum all {layers} layers", 95.5),  # the paper: all 12 layers of BERT-Base
)
LEARNING_RATE, EPOCHS, LSTM_UNITS, MAX_WORDS = 1e-3, 4.0, 768, 128
RECIPE = ("learning_rate", "epochs", "lstm_units", "max_words")  # what every row of one --work_dir shares
OTHER_UNITS = (768, 512, 384, 256, 128)  # the estimate's alternatives to --lstm_units


def label(seed: int, features: str) -> str:
    """The run and result name of a row: the accuracy phase's s{seed}-ours for fine-tuning."""
    return f"s{seed}-ours" if features == "finetune" else f"t7-s{seed}-{features}"


def row_names() -> dict[str, str]:
    """The rows' names, "all 12 layers" as all of MiniLM's."""
    layers = minilm_config()["num_hidden_layers"]
    return {key: name.format(layers=layers) for key, name, _ in ROWS}


def recipe(args: argparse.Namespace) -> dict:
    return {"learning_rate": args.table7_learning_rate, "epochs": smoke_epochs(args.work_dir, args.table7_epochs),
            "lstm_units": args.lstm_units, "max_words": MAX_WORDS}


# Every row of a seed shares one cache of per-layer frozen tables (WORK/frozen/sSEED): sum_all encodes layers 1..L,
# embeddings layer 0, and the other four rows read only cached layers.
RUN_ORDER = ("sum_all", "embeddings", "second_to_last", "last", "sum_last_four", "concat_last_four")
assert sorted(RUN_ORDER) == sorted(FEATURES)


def smoke_epochs(work_dir: str, epochs: float) -> float:
    """`epochs`, raised under --smoke_documents where the cut training file's rows (sentences, in pieces of at most
    MAX_WORDS words) would not fill one batch in that many epochs (the program then trains no step and stops)."""
    if not _ner_runs.SMOKE_DOCUMENTS:
        return epochs
    sentences = read_conll(os.path.join(data_dir(work_dir), FILES["train"]))
    rows = sum(math.ceil(len(sentence.words) / MAX_WORDS) for sentence in sentences)
    least = math.ceil(BATCH / rows * 100) / 100  # the program trains int(rows / BATCH * epochs) steps
    if epochs * rows >= BATCH:
        return epochs
    print(f"smoke: --table7_epochs {epochs:g} raised to {least:g}, so that the {rows} training rows fill a batch "
          f"of {BATCH}", flush=True)
    return least


def command(work_dir: str, seed: int, features: str, wanted: dict) -> list[str]:
    """run_ner.py feature-based with the BiLSTM recipe; data, context and seq length as the fine-tuning runs."""
    return program_command(work_dir, seed, os.path.join(work_dir, "runs", label(seed, features)), wanted["epochs"],
                           ("--do_eval", "--do_predict", "--mode=feature_based", f"--features={features}",
                            f"--lstm_units={wanted['lstm_units']}", f"--max_words={wanted['max_words']}",
                            f"--feature_cache_dir={os.path.join(work_dir, 'frozen', f's{seed}')}"),
                           wanted["learning_rate"])


def phase(args: argparse.Namespace) -> None:
    """Every seed's six rows in the table's order, skipping finished ones; an estimate before the rows left."""
    wanted = recipe(args)
    for seed in args.seeds:
        estimated = False
        for features in RUN_ORDER:
            saved = load_result(args.work_dir, label(seed, features))
            if saved:
                if {key: saved.get(key) for key in RECIPE} != wanted:
                    raise SystemExit(f"{label(seed, features)} ran with {({k: saved.get(k) for k in RECIPE})}, not "
                                     f"{wanted}: every row of a --work_dir shares one recipe (delete "
                                     f"{args.work_dir}/results/t7-*.json or use another --work_dir)")
                continue
            if not estimated:
                text = estimate(args.work_dir, seed, wanted["lstm_units"])
                print(text or f"Table 7, seed {seed}: an estimate of the rows left once {features} has finished.",
                      flush=True)
                estimated = text is not None
            run_program(args.work_dir, label(seed, features), command(args.work_dir, seed, features, wanted),
                        {"framework": "ours", "phase": "table7", "seed": seed, "features": features, **wanted},
                        keep=("features",))


def lstm_cost(features: str, hidden: int, units: int) -> int:
    """Multiply-adds per word and direction of the 2-layer BiLSTM, up to the gates' factor 4: units × (inputs +
    units) per layer; the first layer reads one layer's vector, or four side by side for concat_last_four."""
    width = hidden * (4 if features.startswith("concat") else 1)
    return sum(units * (inputs + units) for inputs in (width, 2 * units))


def training_at(result: dict, features: str, units: int, hidden: int) -> float:
    """Seconds a row of `features` at `units` would train, from a finished row's training time scaled by the
    BiLSTM's multiply-adds (rough: overheads keep small sizes slower than that)."""
    return result["train_s"] * lstm_cost(features, hidden, units) / lstm_cost(result["features"], hidden,
                                                                               result["lstm_units"])


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def estimate(work_dir: str, seed: int, units: int) -> str | None:
    """The rows of `seed` left, each estimated from the first finished row: its run time outside training (start-up,
    encoding, tagging dev and test) plus its training time scaled by the BiLSTM's multiply-adds; None before any."""
    done = [result for result in (load_result(work_dir, label(seed, f)) for f in FEATURES)
            if result and result.get("train_s") and result.get("wall_s")]
    todo = [f for f in FEATURES if not load_result(work_dir, label(seed, f))]
    if not done:
        return None
    basis, hidden = done[0], minilm_config()["hidden_size"]
    train_s, fixed = basis["train_s"], basis["wall_s"] - basis["train_s"]
    per_word = {u: {f: training_at(basis, f, u, hidden) for f in todo}
                for u in sorted({units, *OTHER_UNITS}, reverse=True)}
    encoding = (f"encoding {basis['encode_windows']} windows in {basis['encode_s']:.0f} s, "
                f"{basis['encode_windows_per_s']:.1f}/s" if basis.get("encode_s") else "its tables from the cache")
    lines = [f"Table 7, seed {seed}: estimate from {label(seed, basis['features'])} ({basis['lstm_units']} units: "
             f"{basis.get('train_rows')} rows × {basis['epochs']:g} epochs trained in {train_s:.0f} s, "
             f"{basis.get('train_rows', 0) * basis['epochs'] / train_s:.2f} sentences/s; {encoding}; "
             f"{fixed:.0f} s besides training):"]
    lines += [f"  {f}: ~{_duration(fixed + per_word[units][f])}" for f in todo]
    lines.append(f"  all {len(todo)} left: ~{_duration(len(todo) * fixed + sum(per_word[units].values()))}; "
                 f"at other --lstm_units (training scaled by multiply-adds from {basis['lstm_units']} units: rough, "
                 "the more so the further from it; overheads keep small sizes slower than that): "
                 + ", ".join(f"{u}: ~{_duration(len(todo) * fixed + sum(per_word[u].values()))}"
                             for u in per_word if u != units))
    return "\n".join(lines)
