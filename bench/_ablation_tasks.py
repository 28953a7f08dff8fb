"""The fine-tuning side of the ablation study (bench/bench_ablations.py): each pre-trained variant (and a random
init) fine-tuned by our programs on MRPC, SST-2, a SQuAD v1.1 article split and CoNLL-2003 (fine-tuned and
feature-based), with data cut to this machine's scale; and run_swag.py on the multiple-choice proxy set.

Every run is one process of the real program, scored from the files it writes; its result is saved as
WORK/results/TASK-VARIANT-sSEED.json, so an interrupted study resumes where it stopped.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import sys

from bench import _ner_runs, _squad_runs
from bench._ablation_pretrain import HELD_OUT_BOOK, ModelFiles, Variant, _run, checkpoint, read_results
from bench._classifier_runs import GLUE, ROOT, SHARED, fresh_dir, load_result, log_tail, run_logged, save_result
from bert_tf.tasks.ner import conlleval


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The fine-tuning recipe every variant shares, and the data cut to this machine's scale."""

    learning_rate: float = 1e-4
    epochs: float = 2.0
    batch: int = 32
    mrpc_examples: int | None = 2000  # None: all 3,667
    sst2_examples: int | None = 5000
    squad_questions: int = 600  # of each half: training and evaluation
    ner_train_documents: int = 300  # of 946: 4,381 sentences (40 gave 29 steps, too few to leave the O tag)
    ner_eval_documents: int = 25
    ner_epochs: float = 3.0
    lstm_units: int = 64
    feature_learning_rate: float = 1e-3
    feature_epochs: float = 4.0
    swag_train_examples: int | None = None  # None: all 5,085 (1,000 gave 125 steps, one seed's luck)


@dataclasses.dataclass(frozen=True)
class Task:
    """A column of the study: which program, what it is scored by."""

    name: str
    column: str
    score: str  # the reported figure's key in the saved scores


TASKS = {t.name: t for t in (
    Task("mrpc", "MRPC", "accuracy"),
    Task("sst2", "SST-2", "accuracy"),
    Task("squad", "SQuAD F1", "f1"),
    Task("ner_ft", "NER FT", "f1"),
    Task("ner_fb", "NER FB", "f1"),
)}


# ---------------------------------------------------------------------------------------------- data at scale

def glue_dir(work_dir: str, task: str, examples: int | None) -> str:
    """A GLUE task's folder with train.tsv cut to its first `examples` rows (the header kept; None: the shared
    folder itself); dev.tsv whole."""
    source = os.path.join(GLUE, task)
    if examples is None:
        return source
    folder = os.path.join(work_dir, "data", f"{task}-first-{examples}")
    if not os.path.exists(os.path.join(folder, "dev.tsv")):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(source, "train.tsv"), encoding="utf-8") as f:
            lines = f.readlines()[:examples + 1]
        with open(os.path.join(folder, "train.tsv"), "w", encoding="utf-8") as f:
            f.writelines(lines)
        shutil.copyfile(os.path.join(source, "dev.tsv"), os.path.join(folder, "dev.tsv.tmp"))
        os.replace(os.path.join(folder, "dev.tsv.tmp"), os.path.join(folder, "dev.tsv"))
    return folder


def squad_files(work_dir: str, recipe: Recipe) -> tuple[str, str]:
    """(train, eval) SQuAD v1.1 files: the benchmark's article split's two halves, each cut to its first whole
    paragraphs holding at most recipe.squad_questions questions (articles differ tenfold in questions)."""
    halves = _squad_runs.split_by_article(work_dir, _squad_runs.VERSIONS["v1.1"])
    cut = []
    for path in halves:
        target = path.replace(".json", f"-first{recipe.squad_questions}q.json")
        if not os.path.exists(target):
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            with open(target + ".tmp", "w", encoding="utf-8") as f:
                json.dump({**data, "data": first_questions(data["data"], recipe.squad_questions)}, f)
            os.replace(target + ".tmp", target)
        cut.append(target)
    return cut[0], cut[1]


def first_questions(articles: list[dict], limit: int) -> list[dict]:
    """The articles' first whole paragraphs, in order, while their questions number at most `limit`."""
    kept, count = [], 0
    for article in articles:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if count + len(paragraph["qas"]) > limit:
                break
            paragraphs.append(paragraph)
            count += len(paragraph["qas"])
        if paragraphs:
            kept.append({**article, "paragraphs": paragraphs})
        if len(paragraphs) < len(article["paragraphs"]):
            break
    return kept


def conll_dir(work_dir: str, recipe: Recipe) -> str:
    """CoNLL-2003 train.txt and valid.txt cut to their first documents (the study scores dev only)."""
    folder = os.path.join(work_dir, "data", f"conll-{recipe.ner_train_documents}-{recipe.ner_eval_documents}")
    for name, count in (("train.txt", recipe.ner_train_documents), ("valid.txt", recipe.ner_eval_documents)):
        _ner_runs.first_documents(os.path.join(_ner_runs.CONLL, name), os.path.join(folder, name), count)
    return folder


def swag_dir(work_dir: str, recipe: Recipe) -> str:
    """The multiple-choice proxy set from the held-out book (make_multiple_choice.py), train.csv cut to its
    first recipe.swag_train_examples examples (None: whole); val.csv whole."""
    full = os.path.join(work_dir, "data", "multiple_choice")
    if not os.path.exists(os.path.join(full, "val.csv")):
        _run([sys.executable, os.path.join(ROOT, "data_prep", "make_multiple_choice.py"),
              f"--input={os.path.join(SHARED, 'data', 'corpus', 'books', HELD_OUT_BOOK)}", f"--output_dir={full}"],
             os.path.join(work_dir, "logs", "multiple_choice.log"))
    if recipe.swag_train_examples is None:
        return full
    folder = f"{full}-first-{recipe.swag_train_examples}"
    if not os.path.exists(os.path.join(folder, "val.csv")):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(full, "train.csv"), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))[:recipe.swag_train_examples + 1]
        with open(os.path.join(folder, "train.csv"), "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(rows)
        shutil.copyfile(os.path.join(full, "val.csv"), os.path.join(folder, "val.csv.tmp"))
        os.replace(os.path.join(folder, "val.csv.tmp"), os.path.join(folder, "val.csv"))
    return folder


def prepare_data(work_dir: str, recipe: Recipe, names: list[str]) -> None:
    """Every data file the tasks `names` read, written before runs go in parallel (no two write one file)."""
    for name in names:
        {"mrpc": lambda: glue_dir(work_dir, "MRPC", recipe.mrpc_examples),
         "sst2": lambda: glue_dir(work_dir, "SST-2", recipe.sst2_examples),
         "squad": lambda: squad_files(work_dir, recipe), "swag": lambda: swag_dir(work_dir, recipe),
         "ner_ft": lambda: conll_dir(work_dir, recipe), "ner_fb": lambda: conll_dir(work_dir, recipe)}[name]()


# ---------------------------------------------------------------------------------------------- commands

def _model_flags(work_dir: str, files: ModelFiles, variant: Variant, recipe: Recipe, seed: int, output_dir: str,
                 learning_rate: float | None = None, epochs: float | None = None) -> list[str]:
    """What every fine-tuning command shares: the model files (the variant's export, or none: random init), the
    recipe, the seed; an LTR model keeps its causal mask, as the paper did."""
    init = checkpoint(work_dir, variant)
    flags = [f"--vocab_file={files.vocab}", f"--bert_config_file={files.config}", f"--output_dir={output_dir}",
             "--do_train",
             f"--train_batch_size={recipe.batch}", f"--learning_rate={learning_rate or recipe.learning_rate}",
             f"--num_train_epochs={epochs or recipe.epochs}", "--warmup_proportion=0.1", f"--seed={seed}"]
    flags += [f"--init_checkpoint={init}"] if init else []
    return flags + (["--causal_attention"] if variant.objective == "ltr" else [])


def command(task: str, work_dir: str, files: ModelFiles, variant: Variant, recipe: Recipe, seed: int,
            output_dir: str) -> list[str]:
    """The program and options of one study run."""
    model = _model_flags(work_dir, files, variant, recipe, seed, output_dir,
                         epochs=recipe.ner_epochs if task == "ner_ft" else None)
    if task in ("mrpc", "sst2"):
        data = (glue_dir(work_dir, "MRPC", recipe.mrpc_examples) if task == "mrpc"
                else glue_dir(work_dir, "SST-2", recipe.sst2_examples))
        return [sys.executable, "-m", "bert_tf.tasks.classifier",
                f"--task_name={'MRPC' if task == 'mrpc' else 'SST-2'}", f"--data_dir={data}",
                "--do_eval", f"--max_seq_length={128 if task == 'mrpc' else 64}", *model]
    if task == "squad":
        train, evaluate = squad_files(work_dir, recipe)
        return [sys.executable, "-m", "bert_tf.tasks.squad.program", f"--train_file={train}", "--do_predict",
                f"--predict_file={evaluate}", "--max_seq_length=128", "--doc_stride=96", "--max_query_length=32",
                *model]
    ner = [sys.executable, "-m", "bert_tf.tasks.ner.program", f"--data_dir={conll_dir(work_dir, recipe)}",
           f"--label_list={','.join(_ner_runs.conll_labels())}", "--do_eval", "--max_seq_length=128"]
    if task == "ner_ft":
        return [*ner, *model]
    frozen = os.path.join(work_dir, "frozen", variant.name if variant.pretrained else f"{variant.name}-s{seed}")
    encoder = [] if variant.pretrained else [f"--init_checkpoint={random_encoder(work_dir, files, seed)}"]
    return [*ner, *_model_flags(work_dir, files, variant, recipe, seed, output_dir, recipe.feature_learning_rate,
                                recipe.feature_epochs), *encoder,
            "--mode=feature_based", "--features=concat_last_four", f"--lstm_units={recipe.lstm_units}",
            f"--feature_cache_dir={frozen}"]


def random_encoder(work_dir: str, files: ModelFiles, seed: int) -> str:
    """An encoder at the original's initialisation (truncated normal, the config's initializer_range) drawn from
    `seed`, as an original-format folder: the frozen encoder of random init's feature-based row, the control that
    shows what pre-trained features add over the BiLSTM alone."""
    folder = os.path.join(work_dir, "random_encoder", f"s{seed}")
    if not os.path.exists(os.path.join(folder, "bert_model.ckpt.index")):
        import keras
        import numpy as np

        from bert_tf.checkpoints import export_original_folder
        from bert_tf.model.bert import BertModel
        from bert_tf.model.configs import BertConfig

        config = BertConfig.from_json_file(files.config)
        keras.utils.set_random_seed(seed)
        model = BertModel(config, name="bert")
        ids = np.zeros((1, 8), np.int32)
        model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": ids}, training=False)
        export_original_folder(model, config, folder)
    return folder


def scores(task: str, output_dir: str) -> dict[str, float]:
    """The run's dev figures, read from the files the program wrote (percentages)."""
    if task in ("mrpc", "sst2", "swag"):
        found = read_results(os.path.join(output_dir, "eval_results.txt"))
        return {"accuracy": 100 * found["eval_accuracy"], **({"f1": 100 * found["f1"]} if "f1" in found else {})}
    if task == "squad":
        with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
            found = json.load(f)
        return {"exact_match": found["exact_match"], "f1": found["f1"]}
    result = conlleval.evaluate(conlleval.read_predictions(os.path.join(output_dir, "eval_predictions.txt")))
    return {"f1": result.f1, "precision": result.precision, "recall": result.recall}


def run(task: str, work_dir: str, files: ModelFiles, variant: Variant, recipe: Recipe, seed: int, env: dict) -> dict:
    """One fine-tuning run of the study (skipped when its result is saved); its dev scores and wall time, saved."""
    return _scored_run(work_dir, task, variant.name, seed, env,
                       lambda output_dir: command(task, work_dir, files, variant, recipe, seed, output_dir))


def run_swag(work_dir: str, name: str, init: str | None, config: str, vocab: str, recipe: Recipe, seed: int,
             env: dict) -> dict:
    """run_swag.py on the proxy set from `init` (None: random init of `config`); accuracy on val.csv."""
    def swag_command(output_dir: str) -> list[str]:
        flags = [sys.executable, os.path.join(ROOT, "run_swag.py"), "--task_name=swag",
                 f"--data_dir={swag_dir(work_dir, recipe)}", f"--vocab_file={vocab}", f"--bert_config_file={config}",
                 f"--output_dir={output_dir}", "--do_train", "--do_eval", "--max_seq_length=128",
                 "--train_batch_size=16", f"--learning_rate={recipe.learning_rate}",
                 f"--num_train_epochs={recipe.epochs}", "--warmup_proportion=0.1", f"--seed={seed}"]
        return flags + ([f"--init_checkpoint={init}"] if init else [])

    return _scored_run(work_dir, "swag", name, seed, env, swag_command)


def _scored_run(work_dir: str, task: str, variant: str, seed: int, env: dict, make_command) -> dict:
    """`make_command(output_dir)` run once in a fresh WORK/finetune/TASK-VARIANT-sSEED and scored from its files;
    the result saved (a saved one is returned without running); the folder removed, its log kept."""
    name = f"{task}-{variant}-s{seed}"
    saved = load_result(work_dir, name)
    if saved:
        return saved
    output_dir = fresh_dir(os.path.join(work_dir, "finetune", name))
    code, wall, _ = run_logged(make_command(output_dir), output_dir + ".log", env)
    facts = {"task": task, "variant": variant, "seed": seed, "wall_s": round(wall, 1)}
    if code:
        return save_result(work_dir, name, facts | {"error": f"exit {code}: {log_tail(output_dir + '.log')}"})
    result = save_result(work_dir, name, facts | {"scores": scores(task, output_dir)})
    shutil.rmtree(output_dir, ignore_errors=True)  # checkpoints and caches: the scores are kept
    return result
