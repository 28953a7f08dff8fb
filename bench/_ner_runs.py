"""The runs of the NER benchmark (bench/bench_ner.py): the CoNLL files, initial weights, our program, the Hugging
Face process scored by our own tagging post-processing, and the saved results that make every phase resumable.

    python -m bench._ner_runs --logits_dir=DIR --ours_dir=DIR --data_dir=DIR   # (the bench runs this) HF logits
        -> DIR/eval_predictions.txt and DIR/test_predictions.txt by TaggingTask.postprocess, as our program writes
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import sys
import time

import numpy as np

from bench._classifier_runs import (MINILM, SHARED, bert_config, fresh_dir, git_commit, log_seconds, log_tail,
                                    make_order, minilm_config, minilm_with_head, run_logged, save_result,
                                    truncated_normal)
from bench._cpu import read_cpu
from bench._squad_runs import log_rates
from bert_tf.data.tfrecord import read_examples
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner.conll import DOCSTART, label_list, read_conll

CONLL = os.path.join(SHARED, "data", "conll2003")
FILES = {"train": "train.txt", "eval": "valid.txt", "predict": "test.txt"}  # our program's split -> CoNLL file
SCORED = {"dev": "eval_predictions.txt", "test": "test_predictions.txt"}  # TaggingTask's predictions files
BATCH = 32
LEARNING_RATE = 5e-5  # the paper's appendix choices: lr 5e-5, batch 32, 3 epochs, warmup 10%
EPOCHS = 3.0
MAX_SEQ_LENGTH = 128
HF_ACCURACY_THREADS = 1  # as the other benchmarks: 2 torch threads crawl beside another busy process
SMOKE_DOCUMENTS: int | None = None  # --smoke_documents: each file cut to its first N documents (smoke tests only)


# ---------------------------------------------------------------------------------------------- set-up

def conll_labels() -> tuple[str, ...]:
    """The 9 tags in the order our program gives the full training file's (O, B-LOC, I-LOC, ..., I-PER); passed
    as --label_list so that a smoke run's few documents keep the same head."""
    path = os.path.join(CONLL, FILES["train"])
    return label_list(read_conll(path), path)


def data_dir(work_dir: str) -> str:
    """The CoNLL-2003 folder, or under --smoke_documents a copy of each file cut to its first N documents."""
    if not SMOKE_DOCUMENTS:
        return CONLL
    folder = os.path.join(work_dir, "data", f"first-{SMOKE_DOCUMENTS}-documents")
    for name in FILES.values():
        first_documents(os.path.join(CONLL, name), os.path.join(folder, name), SMOKE_DOCUMENTS)
    return folder


def first_documents(source: str, target: str, count: int) -> str:
    """`target`: the CoNLL file `source` cut to its first `count` -DOCSTART- documents (written once)."""
    if not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(source, encoding="utf-8") as f:
            parts = f.read().split(DOCSTART)  # "", then each document after its -DOCSTART- marker
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            f.write(DOCSTART.join(parts[:count + 1]))
        os.replace(target + ".tmp", target)
    return target


def init_folder(work_dir: str, seed: int) -> str:
    """A Hugging Face BertForTokenClassification folder: MiniLM plus a seeded tagging head and the CoNLL id2label.

    `classifier.weight` [9, hidden] truncated normal with stddev initializer_range (as our head's initializer),
    `classifier.bias` zeros; the architecture makes our loader map them to cls/token_classification/*.
    """
    labels, config = conll_labels(), minilm_config()
    shape = (len(labels), config["hidden_size"])
    head = dict(zip(("classifier.weight", "classifier.bias"),
                    (truncated_normal(np.random.default_rng(seed), shape, config["initializer_range"]),
                     np.zeros(len(labels), np.float32))))
    return minilm_with_head(os.path.join(work_dir, "init", f"s{seed}"), head, {
        "architectures": ["BertForTokenClassification"], "id2label": dict(enumerate(labels)),
        "label2id": {label: i for i, label in enumerate(labels)}})


def features_file(output_dir: str, split: str) -> str:
    """Our cached rows of `split` ("train", "eval" or "predict") in a run's output folder."""
    found = sorted(glob.glob(os.path.join(output_dir, "features", f"ner-{split}-*.tfrecord")))
    if not found:
        raise FileNotFoundError(f"no cached {split} rows in {output_dir}")
    return found[-1]


def count_rows(path: str) -> int:
    return sum(1 for _ in read_examples(path))


# ---------------------------------------------------------------------------------------------- our program

def program_command(work_dir: str, seed: int, output_dir: str, epochs: float = EPOCHS,
                    extra: tuple[str, ...] = ("--do_eval", "--do_predict"),
                    learning_rate: float = LEARNING_RATE) -> list[str]:
    """run_ner.py with the paper's recipe from the seeded head folder (document context: the program's default);
    the feature-based rows pass their own `learning_rate`, `epochs` and mode flags in `extra`."""
    return [sys.executable, "-m", "bert_tf.tasks.ner.program", f"--data_dir={data_dir(work_dir)}",
            f"--init_checkpoint={init_folder(work_dir, seed)}", f"--vocab_file={os.path.join(MINILM, 'vocab.txt')}",
            f"--bert_config_file={bert_config(work_dir)}", f"--label_list={','.join(conll_labels())}",
            f"--output_dir={output_dir}", "--do_train", *extra, f"--max_seq_length={MAX_SEQ_LENGTH}",
            f"--train_batch_size={BATCH}", f"--learning_rate={learning_rate}", f"--num_train_epochs={epochs}",
            "--warmup_proportion=0.1", f"--seed={seed}"]


def figures(output_dir: str) -> dict[str, dict[str, float]]:
    """conlleval's overall figures of a run's dev and test predictions files (ours and HF's are read alike)."""
    found = {}
    for split, name in SCORED.items():
        result = conlleval.evaluate(conlleval.read_predictions(os.path.join(output_dir, name)))
        found[split] = {"precision": result.precision, "recall": result.recall, "f1": result.f1,
                        "accuracy": result.accuracy}
    return found


def finished_run(work_dir: str, label: str, command: list[str] | None = None) -> bool:
    """Whether our run LABEL completed without its result being saved (its bench process was stopped while the
    program went on): the log the benchmark started is there (of `command`, when given) and both predictions files
    were written."""
    output_dir = os.path.join(work_dir, "runs", label)
    if not all(os.path.exists(os.path.join(output_dir, name)) for name in SCORED.values()):
        return False
    logged = _logged_command(output_dir + ".log")
    return bool(logged) and (command is None or logged == " ".join(command))


def _logged_command(log: str) -> str:
    """The command run_logged wrote as the log's first line ("$ COMMAND"), or ""."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            first = f.readline().rstrip("\n")
    except OSError:
        return ""
    return first[2:] if first.startswith("$ ") else ""


def fresh_run_dir(path: str, keep: tuple[str, ...] = ()) -> str:
    """`path` emptied for a new attempt (a killed earlier attempt's checkpoints would make the program resume), but
    for the entries named in `keep` (features: the frozen tables and rows the program keys and verifies itself)."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if name in keep:
            continue
        if os.path.isdir(os.path.join(path, name)):
            shutil.rmtree(os.path.join(path, name))
        else:
            os.remove(os.path.join(path, name))
    return path


def run_program(work_dir: str, label: str, command: list[str], facts: dict, keep: tuple[str, ...] = ()) -> dict:
    """Our program's run LABEL (`command`, whose --output_dir is WORK/runs/LABEL, emptied first but for `keep`):
    fine-tune or train the tagger, tag and score dev (--do_eval) and test (--do_predict); its result saved with
    `facts` (what the run is). A run of `command` that finished after its bench process was stopped is recorded,
    not rerun."""
    if finished_run(work_dir, label, command):
        return record_run(work_dir, label, facts)
    output_dir = fresh_run_dir(os.path.join(work_dir, "runs", label), keep)
    log, commit, load = output_dir + ".log", git_commit(), os.getloadavg()[0]
    code, wall, _ = run_logged(command, log)
    if code:
        return save_result(work_dir, label, {"error": f"exit {code}: {log_tail(log)}", "log": log, **facts})
    return record_run(work_dir, label, facts, {"wall_s": wall, "commit": commit, "load_before": load})


def run_ours(work_dir: str, seed: int) -> dict:
    """Our program fine-tuning with the paper's recipe: the run s{seed}-ours."""
    output_dir = os.path.join(work_dir, "runs", f"s{seed}-ours")
    return run_program(work_dir, f"s{seed}-ours", program_command(work_dir, seed, output_dir),
                       {"framework": "ours", "seed": seed})


ENCODED = re.compile(r"encoded (\d+) words of (\d+) windows in ([\d.]+) s")


def encoding_times(log: str) -> dict:
    """The frozen encoder's work in a feature-based run's log (one line per split it encoded; none when every table
    came from the cache): words, windows, seconds and windows/s over all splits."""
    with open(log, encoding="utf-8", errors="replace") as f:
        found = ENCODED.findall(f.read())
    if not found:
        return {}
    words, windows, seconds = (sum(map(type_, column)) for type_, column in zip((int, int, float), zip(*found)))
    return {"encode_words": words, "encode_windows": windows, "encode_s": seconds,
            "encode_windows_per_s": windows / seconds if seconds else None}


def record_run(work_dir: str, label: str, facts: dict, known: dict | None = None) -> dict:
    """Saves our finished run's result: `facts`, its figures, its log's rates (and the frozen encoder's, if any), the
    command, and what the caller knows (wall, commit, load); without a known wall time, the span of the log's
    timestamps."""
    output_dir = os.path.join(work_dir, "runs", label)
    log = output_dir + ".log"
    if not known:
        with open(log, encoding="utf-8", errors="replace") as f:
            stamps = [s for s in map(log_seconds, f) if s is not None]
        known = {"wall_s": (stamps[-1] - stamps[0]) % 86400 if stamps else None, "commit": git_commit()}
    return save_result(work_dir, label, {
        **facts, "scores": figures(output_dir), **log_rates(log), **encoding_times(log),
        "smoke_documents": SMOKE_DOCUMENTS, "cpu": read_cpu().label(), "load_after": os.getloadavg()[0],
        "command": _logged_command(log), "log": log, "finished": time.strftime("%Y-%m-%d %H:%M"), **known})


# ---------------------------------------------------------------------------------------------- Hugging Face

def run_hf(work_dir: str, seed: int, threads: int | None = HF_ACCURACY_THREADS) -> dict:
    """transformers on our run's rows, head, batch order and recipe; its logits tagged and scored by our code."""
    label = f"s{seed}-hf"
    ours_dir = os.path.join(work_dir, "runs", f"s{seed}-ours")
    out = fresh_dir(os.path.join(work_dir, "runs", label))
    train_rows = features_file(ours_dir, "train")
    order = make_order(work_dir, train_rows, seed, int(count_rows(train_rows) / BATCH * EPOCHS))
    command = [sys.executable, "-m", "bench._hf_ner", f"--init={init_folder(work_dir, seed)}",
               f"--train={train_rows}", f"--eval={features_file(ours_dir, 'eval')}",
               f"--predict={features_file(ours_dir, 'predict')}", f"--seed={seed}", f"--order={order}",
               f"--out={out}", f"--learning_rate={LEARNING_RATE}", f"--num_train_epochs={EPOCHS}",
               *([f"--threads={threads}"] if threads else [])]
    log, commit, load = out + ".log", git_commit(), os.getloadavg()[0]
    code, wall, line = run_logged(command, log)
    if code or not line:
        return save_result(work_dir, label, {"error": f"exit {code}: {log_tail(log)}", "log": log})
    tagging = os.path.join(out, "tagging.log")
    code, _, losses = run_logged([sys.executable, "-m", "bench._ner_runs", f"--logits_dir={out}",
                                  f"--ours_dir={ours_dir}", f"--data_dir={data_dir(work_dir)}"], tagging)
    if code or not losses:
        return save_result(work_dir, label, {"error": f"tagging exit {code}: {log_tail(tagging)}", "log": tagging})
    return save_result(work_dir, label, {
        "framework": "hf", "seed": seed, "scores": figures(out), "wall_s": wall, **json.loads(line),
        **json.loads(losses), "smoke_documents": SMOKE_DOCUMENTS, "commit": commit, "cpu": read_cpu().label(),
        "load_before": load, "load_after": os.getloadavg()[0], "log": log, "finished": time.strftime("%Y-%m-%d %H:%M")})


def tag_logits(logits_dir: str, ours_dir: str, conll_dir: str, out: str | None = None) -> dict[str, float]:
    """HF's logits of each split through our program's TaggingTask (its windows of the same sentences, argmax at
    each word's first sub-token, the predictions files, written to `out`, by default `logits_dir`); the mean word
    loss of each split."""
    from bert_tf.tasks.ner.program import NerOptions, make_task  # TensorFlow: only in this subprocess

    task = make_task(NerOptions(data_dir=conll_dir, output_dir=ours_dir, vocab_file=os.path.join(MINILM, "vocab.txt"),
                                label_list=",".join(conll_labels()), max_seq_length=MAX_SEQ_LENGTH))
    losses = {}
    for split in ("eval", "predict"):
        sentences = task.examples(split)
        logits = np.load(os.path.join(logits_dir, f"logits-{split}.npy"))
        losses[f"{split}_loss"] = task.postprocess(split, sentences, {"logits": logits},
                                                   out or logits_dir)["eval_loss"]
    return losses


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Tag and score Hugging Face logits with our TaggingTask.")
    p.add_argument("--logits_dir", required=True, help="bench/_hf_ner.py's output: logits-eval/predict.npy")
    p.add_argument("--ours_dir", required=True, help="the run of ours whose rows HF predicted")
    p.add_argument("--data_dir", required=True, help="the CoNLL files of that run")
    p.add_argument("--out", default=None, help="where the predictions files go (default: --logits_dir)")
    args = p.parse_args(argv)
    losses = tag_logits(args.logits_dir, args.ours_dir, args.data_dir, args.out)
    if args.out:
        with open(os.path.join(args.out, "losses.json"), "w", encoding="utf-8") as f:
            json.dump(losses, f)
    print("RESULT " + json.dumps(losses), flush=True)


if __name__ == "__main__":
    main()
