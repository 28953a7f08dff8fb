"""The runs of the SQuAD benchmark (bench/bench_squad.py): the article split, initial weights, our program, the
Hugging Face process scored through our program's replay, and the saved results that make every phase resumable."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import sys
import time

import numpy as np

from bench._classifier_runs import (MINILM, SHARED, bert_config, fresh_dir, git_commit, log_seconds, log_tail,
                                    make_order, minilm_config, minilm_with_head, run_logged, save_result, truncated_normal)
from bench._cpu import read_cpu
from bert_tf.data.tfrecord import read_examples

BATCH = 32
LEARNING_RATE = 3e-5
EPOCHS = 2.0
MAX_SEQ_LENGTH, DOC_STRIDE = 384, 128
HF_ACCURACY_THREADS = 1  # as the classifier benchmark: 2 torch threads crawl beside another busy process
SMOKE_ARTICLES: int | None = None  # --smoke_articles: each half cut to its first N articles (smoke tests only)


@dataclasses.dataclass(frozen=True)
class Version:
    """A SQuAD version as this benchmark runs it: its dev file and whether it has unanswerable questions."""

    name: str
    dev_file: str
    with_negative: bool

    @property
    def scores(self) -> tuple[str, ...]:
        if self.with_negative:
            return ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_exact", "best_f1", "best_f1_thresh")
        return ("exact_match", "f1")


VERSIONS = {v.name: v for v in (Version("v1.1", "dev-v1.1.json", False), Version("v2.0", "dev-v2.0.json", True))}


# ---------------------------------------------------------------------------------------------- set-up

def split_by_article(work_dir: str, version: Version) -> tuple[str, str]:
    """(train, eval) SQuAD files: the dev file's first half of articles and the rest, top-level fields kept."""
    folder = os.path.join(work_dir, "data")
    train, evaluate = (os.path.join(folder, f"{version.name}-{part}.json") for part in ("train", "eval"))
    if not (os.path.exists(train) and os.path.exists(evaluate)):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(SHARED, "data", "squad", version.dev_file), encoding="utf-8") as f:
            dev = json.load(f)
        half = len(dev["data"]) // 2
        for path, articles in ((train, dev["data"][:half]), (evaluate, dev["data"][half:])):
            articles = articles[:SMOKE_ARTICLES] if SMOKE_ARTICLES else articles
            if path == train:
                articles = first_answers_only(articles)
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                json.dump({**dev, "data": articles}, f)
            os.replace(path + ".tmp", path)
    return train, evaluate


def first_answers_only(articles: list[dict]) -> list[dict]:
    """The articles with each question's answers cut to the first, as training files have them (dev questions
    carry up to 3 annotators' answers; the original trains on exactly one, transformers' run_qa.py on the first)."""
    return [{**article, "paragraphs": [{**paragraph, "qas": [{**qa, "answers": qa["answers"][:1]}
                                                             for qa in paragraph["qas"]]}
                                       for paragraph in article["paragraphs"]]} for article in articles]


def speed_predict_file(work_dir: str, version: Version, articles: int = 2) -> str:
    """The eval half's first `articles` articles: the prediction set of the speed phase."""
    path = os.path.join(work_dir, "data", f"{version.name}-speed.json")
    if not os.path.exists(path):
        with open(split_by_article(work_dir, version)[1], encoding="utf-8") as f:
            dev = json.load(f)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({**dev, "data": dev["data"][:articles]}, f)
        os.replace(path + ".tmp", path)
    return path


def init_folder(work_dir: str, seed: int) -> str:
    """A Hugging Face BertForQuestionAnswering folder: MiniLM's weights plus a seeded span head.

    `qa_outputs.weight` [2, hidden] truncated normal with stddev initializer_range (the original's initializer of
    cls/squad/output_weights), `qa_outputs.bias` zeros; our loader maps them to cls/squad/*.
    """
    config = minilm_config()
    head = {"qa_outputs.weight": truncated_normal(np.random.default_rng(seed), (2, config["hidden_size"]),
                                                  config["initializer_range"]),
            "qa_outputs.bias": np.zeros(2, np.float32)}
    return minilm_with_head(os.path.join(work_dir, "init", f"s{seed}"), head,
                            {"architectures": ["BertForQuestionAnswering"]})


# ---------------------------------------------------------------------------------------------- our program

def program_flags(work_dir: str, version: Version, output_dir: str, predict_file: str,
                  config: str | None = None) -> list[str]:
    """Our program's options shared by training, prediction and replay: vocab, windows, version, files; `config`:
    another bert_config.json than MiniLM's (the fidelity check's, dropout off)."""
    flags = [f"--vocab_file={os.path.join(MINILM, 'vocab.txt')}",
             f"--bert_config_file={config or bert_config(work_dir)}",
             f"--max_seq_length={MAX_SEQ_LENGTH}", f"--doc_stride={DOC_STRIDE}", f"--predict_file={predict_file}",
             f"--output_dir={output_dir}"]
    return flags + (["--version_2_with_negative"] if version.with_negative else [])


def training_flags(work_dir: str, seed: int, train_file: str, epochs: float = EPOCHS) -> list[str]:
    """The issue's recipe: lr 3e-5, batch 32, 2 epochs, warmup 10%, from the seeded head folder."""
    return ["--do_train", f"--train_file={train_file}", f"--init_checkpoint={init_folder(work_dir, seed)}",
            f"--learning_rate={LEARNING_RATE}", f"--train_batch_size={BATCH}", f"--num_train_epochs={epochs}",
            "--warmup_proportion=0.1", f"--seed={seed}"]


PREDICTED = re.compile(r"predicted (\d+) examples in ([\d.]+) s \(([\d.]+) examples/s(?:, ([\d.]+) after the first)?")


PROGRAM_STEPS_PER_LOOP = 100  # the program's --steps_per_loop default
STEP_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ .*\] step (\d+)/(\d+) \|", re.MULTILINE)


def loop_ends(text: str, steps_per_loop: int) -> list[tuple[int, float]]:
    """(step, log seconds) of the progress lines that end a training loop (every `steps_per_loop` steps and the
    last); lines inside a long loop, which come every ~30 s, are left out."""
    ends = []
    for match in STEP_LINE.finditer(text):
        step, total = int(match[1]), int(match[2])
        if step % steps_per_loop == 0 or step == total:
            ends.append((step, log_seconds(match[0])))
    return ends


def log_rates(log_path: str, steps_per_loop: int = PROGRAM_STEPS_PER_LOOP, skip_loops: int = 1) -> dict:
    """Our program's own timings from its log: training examples/s from the log's timestamps between the end of
    loop `skip_loops` (the first loop traces) and the last step, steps, and prediction seconds and examples/s
    (after the first batch when logged)."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    ends = loop_ends(text, steps_per_loop)
    found: dict = {"train_steps": ends[-1][0] if ends else None}
    rows = re.search(r"Training on (\d+) rows", text)
    if rows:
        found["train_rows"] = int(rows[1])
    if len(ends) > skip_loops:
        (first_step, first_time), (last_step, last_time) = ends[skip_loops - 1] if skip_loops else (0, None), ends[-1]
        if first_time is not None and last_step > first_step:
            seconds = (last_time - first_time) % 86400
            found.update(train_examples_per_s=(last_step - first_step) * BATCH / seconds,
                         train_timed_steps=last_step - first_step)
    training = training_seconds_of(text)
    if training is not None:
        found["train_s"] = training
    predicted = PREDICTED.findall(text)
    if predicted:
        rows, seconds, overall, after_first = predicted[-1]
        found.update(predict_rows=int(rows), predict_s=float(seconds),
                     predict_examples_per_s=float(after_first or overall))
    return found


def training_seconds_of(text: str) -> float | None:
    """Seconds from the 'Training on' line to the last step's line."""
    start = re.search(r"^.*Training on \d+ rows.*$", text, re.MULTILINE)
    steps = list(STEP_LINE.finditer(text))
    if not (start and steps):
        return None
    return (log_seconds(steps[-1][0]) - log_seconds(start[0])) % 86400


def official_figures(output_dir: str, version: Version) -> dict[str, float]:
    """The figures of eval_results.json that the report lists."""
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        figures = json.load(f)
    return {key: float(figures[key]) for key in version.scores if key in figures}


def run_ours(work_dir: str, version: Version, seed: int) -> dict:
    """Our program: fine-tune on the first half of the articles, predict and evaluate the rest."""
    label = f"{version.name}-s{seed}-ours"
    train_file, eval_file = split_by_article(work_dir, version)
    output_dir = fresh_dir(os.path.join(work_dir, "runs", label))
    command = [sys.executable, "-m", "bert_tf.tasks.squad.program", "--do_predict",
               *program_flags(work_dir, version, output_dir, eval_file), *training_flags(work_dir, seed, train_file)]
    log, commit, load = output_dir + ".log", git_commit(), os.getloadavg()[0]
    code, wall, _ = run_logged(command, log)
    if code:
        return save_result(work_dir, label, {"error": f"exit {code}: {log_tail(log)}", "log": log})
    return record_ours(work_dir, version, seed, {"wall_s": wall, "commit": commit, "load_before": load})


def finished_ours(work_dir: str, version: Version, seed: int) -> bool:
    """Whether our run of (version, seed) completed without its result being saved (its bench process was stopped
    while the program went on): its log, which starts with the command the benchmark gave, reports the official
    evaluation, and eval_results.json is there."""
    output_dir = os.path.join(work_dir, "runs", f"{version.name}-s{seed}-ours")
    try:
        with open(output_dir + ".log", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return (text.startswith("$ ") and "] Official evaluation (eval_results.json)" in text
            and os.path.exists(os.path.join(output_dir, "eval_results.json")))


def record_ours(work_dir: str, version: Version, seed: int, known: dict | None = None) -> dict:
    """Saves the result of our finished run: official figures, its log's rates, and what the caller knows (wall
    time, commit, load); the wall time is taken from the log's first and last timestamps when not known."""
    label = f"{version.name}-s{seed}-ours"
    output_dir = os.path.join(work_dir, "runs", label)
    log = output_dir + ".log"
    known = dict(known or {})
    if "wall_s" not in known:
        with open(log, encoding="utf-8", errors="replace") as f:
            stamps = [s for s in map(log_seconds, f) if s is not None]
        known["wall_s"] = (stamps[-1] - stamps[0]) % 86400 if stamps else None
    return save_result(work_dir, label, {
        "framework": "ours", "version": version.name, "seed": seed, "scores": official_figures(output_dir, version),
        **log_rates(log), "commit": git_commit(), "cpu": read_cpu().label(), "load_after": os.getloadavg()[0],
        "log": log, "finished": time.strftime("%Y-%m-%d %H:%M"), **known})


def features_file(output_dir: str, version: Version, split: str) -> str:
    """Our cached windows of `split` ("train" or "predict") in a run's output folder."""
    task = "squad_v2" if version.with_negative else "squad"
    found = sorted(glob.glob(os.path.join(output_dir, "features", f"{task}-{split}-*.tfrecord")))
    if not found:
        raise FileNotFoundError(f"no cached {split} windows in {output_dir}")
    return found[-1]


def replay(work_dir: str, version: Version, output_dir: str, predict_file: str) -> tuple[int, str]:
    """Our program's --raw_logits_file mode on OUTPUT_DIR/raw_logits.jsonl: predictions and official figures by the
    same post-processing as our runs; (exit code, log path)."""
    log = os.path.join(output_dir, "replay.log")
    command = [sys.executable, "-m", "bert_tf.tasks.squad.program",
               f"--raw_logits_file={os.path.join(output_dir, 'raw_logits.jsonl')}",
               *program_flags(work_dir, version, output_dir, predict_file)]
    code, _, _ = run_logged(command, log)
    return code, log


def hf_command(work_dir: str, version: Version, ours_dir: str, seed: int, out: str, threads: int | None,
               *extra: str) -> list[str]:
    """bench/_hf_squad.py on the windows of our run in `ours_dir`, in our batch order for `seed`, with the recipe."""
    train_windows = features_file(ours_dir, version, "train")
    rows = sum(1 for _ in read_examples(train_windows))
    order = make_order(work_dir, train_windows, seed, int(rows / BATCH * EPOCHS))
    return [sys.executable, "-m", "bench._hf_squad", f"--init={init_folder(work_dir, seed)}",
            f"--train={train_windows}", f"--predict={features_file(ours_dir, version, 'predict')}",
            f"--seed={seed}", f"--order={order}", f"--out={out}", f"--learning_rate={LEARNING_RATE}",
            f"--num_train_epochs={EPOCHS}", *([f"--threads={threads}"] if threads else []), *extra]


def mask_keys_file(work_dir: str, ours_dir: str) -> str:
    """OURS_DIR/mask_keys.json: the dropout keys of our run in `ours_dir`, in the order its forward pass calls them
    (bench/_shared_masks.py), read from its latest checkpoint into a span model of the run's config."""
    import tensorflow as tf

    from bench._shared_masks import keys_from_checkpoint
    from bert_tf.model.heads import BertSpanModel

    path = os.path.join(ours_dir, "mask_keys.json")
    if not os.path.exists(path):
        with open(os.path.join(ours_dir, "model_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        keys = keys_from_checkpoint(tf.train.latest_checkpoint(ours_dir), BertSpanModel(config))
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(keys, f)
        os.replace(path + ".tmp", path)
    return path


def run_hf(work_dir: str, version: Version, seed: int, threads: int | None = HF_ACCURACY_THREADS,
           shared_masks: bool = False) -> dict:
    """transformers on our run's windows, head, batch order and recipe; scored through our replay. `shared_masks`:
    with the dropout masks our run drew (label ...-hf_masks), instead of torch's own."""
    label = f"{version.name}-s{seed}-{'hf_masks' if shared_masks else 'hf'}"
    ours_dir = os.path.join(work_dir, "runs", f"{version.name}-s{seed}-ours")
    extra = [f"--mask_keys={mask_keys_file(work_dir, ours_dir)}"] if shared_masks else []
    out = fresh_dir(os.path.join(work_dir, "runs", label))
    command = hf_command(work_dir, version, ours_dir, seed, out, threads, *extra)
    log, commit, load = out + ".log", git_commit(), os.getloadavg()[0]
    code, wall, line = run_logged(command, log)
    if code or not line:
        return save_result(work_dir, label, {"error": f"exit {code}: {log_tail(log)}", "log": log})
    code, replay_log = replay(work_dir, version, out, split_by_article(work_dir, version)[1])
    if code:
        return save_result(work_dir, label, {"error": f"replay exit {code}: {log_tail(replay_log)}", "log": log})
    return save_result(work_dir, label, {
        "framework": "hf", "version": version.name, "seed": seed, "shared_masks": shared_masks,
        "scores": official_figures(out, version), "wall_s": wall, **json.loads(line), "commit": commit,
        "cpu": read_cpu().label(), "load_before": load, "load_after": os.getloadavg()[0], "log": log,
        "finished": time.strftime("%Y-%m-%d %H:%M")})
