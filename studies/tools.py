"""Set-up steps of studies, each a small program run as a study's run like any other (`python -m studies.tools
COMMAND ...`): the inputs a user would prepare by hand before calling our programs.

    python -m studies.tools seeded_head --task_labels=2 --seed=1 --out=DIR        # MiniLM + a seeded classifier
    python -m studies.tools seeded_head --head=span --seed=1 --out=DIR               # MiniLM + a seeded span head
    python -m studies.tools glue_subset --src=GLUE/MRPC --train_rows=64 --dev_rows=32 --out=DIR
    python -m studies.tools squad_split --src=dev-v1.1.json --out=DIR [--max_questions=48]
    python -m studies.tools conll_subset --src=CONLL2003 --out=DIR --documents=3
    python -m studies.tools random_encoder --config=bert_config.json --seed=1 --out=DIR
    python -m studies.tools multiple_choice_subset --src=PROXY_SET --train_rows=32 --dev_rows=32 --out=DIR
    python -m studies.tools bert_config --base=configs/bert_mini_config.json --vocab_size=8000 --out=DIR
    python -m studies.tools sst2_text --src=GLUE/SST-2 --out=DIR                  # SST-2's sentences, no labels
    python -m studies.tools reset_pooler --src=EXPORT --seed=1 --out=DIR          # the pooler drawn again
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil

import numpy as np


def truncated_normal(rng: np.random.Generator, shape: tuple[int, ...], stddev: float) -> np.ndarray:
    """Normal samples redrawn until within two standard deviations (tf.truncated_normal's law)."""
    values = rng.normal(0.0, stddev, size=shape)
    outside = np.abs(values) > 2 * stddev
    while outside.any():
        values[outside] = rng.normal(0.0, stddev, size=int(outside.sum()))
        outside = np.abs(values) > 2 * stddev
    return values.astype(np.float32)


HEADS = {"classifier": "BertForSequenceClassification", "span": "BertForQuestionAnswering",
         "tagger": "BertForTokenClassification"}


def seeded_head(base: str, num_labels: int, seed: int, out: str, head: str = "classifier",
                labels: list[str] | None = None) -> None:
    """A Hugging Face BertForSequenceClassification (`head` "classifier"), BertForQuestionAnswering ("span") or
    BertForTokenClassification ("tagger", one output per name of `labels`) folder at `out`: the backbone of `base`
    under `bert.`, a head drawn from `seed` (truncated normal, stddev initializer_range, as the original
    initialises output_weights and cls/squad/output_weights; bias zeros), its vocab, its casing
    (tokenizer_config.json, when `base` has one) and its config.json. Our loader and transformers read the same
    file, so both sides of a parity run start from the same weights."""
    from safetensors.numpy import load_file, save_file

    with open(os.path.join(base, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    weights = {("bert." + k if not k.startswith("bert.") else k): v
               for k, v in load_file(os.path.join(base, "model.safetensors")).items()
               if not k.endswith("position_ids")}
    names = labels or [f"LABEL_{i}" for i in range(num_labels)]
    name, outputs = ("qa_outputs", 2) if head == "span" else ("classifier", len(names))
    weights[f"{name}.weight"] = truncated_normal(np.random.default_rng(seed), (outputs, config["hidden_size"]),
                                                 config["initializer_range"])
    weights[f"{name}.bias"] = np.zeros(outputs, np.float32)
    config.update(architectures=[HEADS[head]])
    if head != "span":
        config.update(id2label={str(i): n for i, n in enumerate(names)}, label2id={n: i for i, n in enumerate(names)})
    if head == "classifier" and num_labels == 1:
        config["problem_type"] = "regression"
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(base, "vocab.txt"), out)
    if os.path.exists(os.path.join(base, "tokenizer_config.json")):  # do_lower_case: our casing check reads it
        shutil.copy(os.path.join(base, "tokenizer_config.json"), out)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    save_file(weights, os.path.join(out, "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(os.path.join(out, "model.safetensors.tmp"), os.path.join(out, "model.safetensors"))


def head_lines(src: str, dst: str, rows: int | None) -> None:
    """The header line and the first `rows` data lines of a tsv (all of them when `rows` is None)."""
    with open(src, encoding="utf-8", newline="") as f:
        lines = f.readlines()
    with open(dst, "w", encoding="utf-8", newline="") as f:
        f.writelines(lines if rows is None else lines[:rows + 1])


def glue_subset(src: str, out: str, train_rows: int | None, dev_rows: int | None) -> None:
    """A GLUE task folder whose train.tsv and dev.tsv keep their first rows (the other files as they are)."""
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(src)):
        rows = {"train.tsv": train_rows, "dev.tsv": dev_rows}.get(name)
        if name.endswith(".tsv"):
            head_lines(os.path.join(src, name), os.path.join(out, name), rows)


def first_questions(articles: list[dict], limit: int | None, first_answer: bool,
                    whole_paragraphs: bool = False) -> list[dict]:
    """The articles' first `limit` questions (all when None), articles and paragraphs left without a question
    dropped; `whole_paragraphs`: only whole paragraphs, up to the first that would pass `limit`; `first_answer`:
    each question's answers cut to the first, as training files have them (dev questions carry up to 3
    annotators' answers; the original trains on exactly one, transformers' run_qa.py on the first)."""
    kept, left = [], limit if limit is not None else sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    for article in articles:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if whole_paragraphs and len(paragraph["qas"]) > left:
                left = 0
            qas = [{**qa, "answers": qa["answers"][:1]} if first_answer else qa for qa in paragraph["qas"]][:left]
            left -= len(qas)
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        if paragraphs:
            kept.append({**article, "paragraphs": paragraphs})
    return kept


def squad_split(src: str, out: str, max_questions: int | None, whole_paragraphs: bool = False,
                extra_train: str | None = None) -> None:
    """OUT/train.json and OUT/eval.json: a SQuAD dev file split by article, its first half of articles for
    training (first answers only) and the rest for evaluation, each cut to its first `max_questions` questions.
    No SQuAD train set is in the shared data, so the dev file gives both, never sharing an article.
    `extra_train`: another SQuAD file whose articles in neither half (by title) are added to training (v1.1's dev
    file holds 13 articles that v2.0's does not)."""
    with open(src, encoding="utf-8") as f:
        dev = json.load(f)
    half = len(dev["data"]) // 2
    if extra_train:
        with open(extra_train, encoding="utf-8") as f:
            titles = {article["title"] for article in dev["data"]}
            extra = [a for a in json.load(f)["data"] if a["title"] not in titles]
        dev = {**dev, "data": dev["data"][:half] + extra + dev["data"][half:]}
        half += len(extra)
    os.makedirs(out, exist_ok=True)
    for name, articles, first in (("train", dev["data"][:half], True), ("eval", dev["data"][half:], False)):
        with open(os.path.join(out, name + ".json.tmp"), "w", encoding="utf-8") as f:
            json.dump({**dev, "data": first_questions(articles, max_questions, first, whole_paragraphs)}, f)
        os.replace(os.path.join(out, name + ".json.tmp"), os.path.join(out, name + ".json"))


def conll_subset(src: str, out: str, documents: int, eval_documents: int | None = None) -> None:
    """A CoNLL-2003 folder whose train.txt keeps its first `documents` documents, valid.txt and test.txt their
    first `eval_documents` (default: as many)."""
    marker = "-DOCSTART-"
    os.makedirs(out, exist_ok=True)
    for name in ("train.txt", "valid.txt", "test.txt"):
        count = documents if name == "train.txt" or eval_documents is None else eval_documents
        with open(os.path.join(src, name), encoding="utf-8") as f:
            parts = f.read().split(marker)  # "", then each document after its marker
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(marker.join(parts[:count + 1]))


def random_encoder(config: str, seed: int, out: str) -> None:
    """An original-format checkpoint folder at `out` of a BERT encoder at the original's initialisation (truncated
    normal, the config's initializer_range) drawn from `seed`: the frozen encoder of a feature-based control row
    (what the BiLSTM learns without pre-trained features)."""
    import keras

    from bert_tf.checkpoints import export_original_folder
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig

    bert_config = BertConfig.from_json_file(config)
    keras.utils.set_random_seed(seed)
    model = BertModel(bert_config, name="bert")
    ids = np.zeros((1, 8), np.int32)
    model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": ids}, training=False)
    export_original_folder(model, bert_config, out)


def multiple_choice_subset(src: str, out: str, train_rows: int | None, dev_rows: int | None) -> None:
    """A SWAG-layout folder (train.csv, val.csv, test.csv) whose files keep their header and first rows (train.csv
    `train_rows`, the others `dev_rows`; None: all), read as CSV (a quoted field may hold a line break)."""
    os.makedirs(out, exist_ok=True)
    for name, rows in (("train.csv", train_rows), ("val.csv", dev_rows), ("test.csv", dev_rows)):
        if not os.path.exists(os.path.join(src, name)):
            continue
        with open(os.path.join(src, name), encoding="utf-8", newline="") as f:
            found = list(csv.reader(f))
        with open(os.path.join(out, name), "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(found if rows is None else found[:rows + 1])


def bert_config(base: str, out: str, vocab_size: int) -> None:
    """OUT/bert_config.json: the config `base` with another vocab_size (a model for a learned vocab)."""
    with open(base, encoding="utf-8") as f:
        config = json.load(f)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump({**config, "vocab_size": vocab_size}, f, indent=2, sort_keys=True)


SHARDS = 20  # prepare_corpus's default split: document i in shard i mod 20, the last shard held out


def sst2_text(src: str, out: str, lines_per_document: int = 10) -> None:
    """SST-2's training sentences without their labels (dev.tsv is never read) as prepare_corpus's 20 shards:
    documents of `lines_per_document` consecutive lines (train.tsv's phrases come in no order; a document is what
    create_pretraining_data packs from), document i in shard i mod 20, so that every 20th is held out."""
    with open(os.path.join(src, "train.tsv"), encoding="utf-8") as f:
        lines = [line.split("\t")[0].strip() for line in list(f)[1:]]
    documents = [lines[i:i + lines_per_document] for i in range(0, len(lines), lines_per_document)]
    os.makedirs(out, exist_ok=True)
    for shard in range(SHARDS):
        with open(os.path.join(out, f"corpus-{shard:05d}-of-{SHARDS:05d}.txt"), "w", encoding="utf-8") as f:
            f.write("".join("\n".join(document) + "\n\n" for document in documents[shard::SHARDS]))


def reset_pooler(src: str, seed: int, out: str) -> None:
    """A copy of the original-format export `src` with the pooler (trained by next-sentence prediction, a task
    that fine-tuning does not share) drawn again from the original's initializer (truncated normal kernel of the
    config's initializer_range, zero bias) from `seed`; the embeddings, layers and heads kept (Zhang et al. 2021,
    "Revisiting Few-sample BERT Fine-tuning")."""
    from bert_tf.checkpoints.tf1 import read_tf1_checkpoint, write_tf1_checkpoint

    with open(os.path.join(src, "bert_config.json"), encoding="utf-8") as f:
        stddev = json.load(f)["initializer_range"]
    weights, rng = read_tf1_checkpoint(os.path.join(src, "bert_model.ckpt")), np.random.default_rng(seed)
    for name in [n for n in weights if n.startswith("bert/pooler/")]:
        weights[name] = (np.zeros(weights[name].shape, np.float32) if name.endswith("bias")
                         else truncated_normal(rng, weights[name].shape, stddev))
    os.makedirs(out, exist_ok=True)
    write_tf1_checkpoint(weights, os.path.join(out, "bert_model.ckpt"))
    for name in os.listdir(src):
        if not name.startswith("bert_model.ckpt") and os.path.isfile(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.tools", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    head = commands.add_parser("seeded_head", help="a Hugging Face classifier or span-model folder, seeded head")
    head.add_argument("--base", required=True, help="Hugging Face BERT folder (config.json, model.safetensors)")
    head.add_argument("--head", choices=tuple(HEADS), default="classifier")
    head.add_argument("--num_labels", type=int, default=2, help="the classifier's labels (1: regression)")
    head.add_argument("--label_list", default=None, help="the tagger's (or classifier's) label names, comma list")
    head.add_argument("--seed", type=int, required=True)
    head.add_argument("--out", required=True)
    subset = commands.add_parser("glue_subset", help="a GLUE task folder cut to its first rows")
    subset.add_argument("--src", required=True)
    subset.add_argument("--out", required=True)
    subset.add_argument("--train_rows", type=int, default=None)
    subset.add_argument("--dev_rows", type=int, default=None)
    split = commands.add_parser("squad_split", help="a SQuAD dev file split by article into train and eval")
    split.add_argument("--src", required=True)
    split.add_argument("--out", required=True)
    split.add_argument("--max_questions", type=int, default=None, help="each half's first questions only")
    split.add_argument("--whole_paragraphs", action="store_true", help="with --max_questions: whole paragraphs")
    split.add_argument("--extra_train", default=None, help="a SQuAD file whose other articles join training")
    conll = commands.add_parser("conll_subset", help="a CoNLL-2003 folder cut to its first documents")
    conll.add_argument("--src", required=True)
    conll.add_argument("--out", required=True)
    conll.add_argument("--documents", type=int, required=True, help="train.txt's first documents")
    conll.add_argument("--eval_documents", type=int, default=None, help="valid.txt's and test.txt's")
    encoder = commands.add_parser("random_encoder", help="an original-format encoder at random initialisation")
    encoder.add_argument("--config", required=True, help="bert_config.json")
    encoder.add_argument("--seed", type=int, required=True)
    encoder.add_argument("--out", required=True)
    choice = commands.add_parser("multiple_choice_subset", help="a SWAG-layout folder cut to its first rows")
    choice.add_argument("--src", required=True)
    choice.add_argument("--out", required=True)
    choice.add_argument("--train_rows", type=int, default=None)
    choice.add_argument("--dev_rows", type=int, default=None, help="val.csv's and test.csv's")
    config = commands.add_parser("bert_config", help="a BERT config with another vocab size")
    config.add_argument("--base", required=True, help="bert_config.json")
    config.add_argument("--vocab_size", type=int, required=True)
    config.add_argument("--out", required=True)
    text = commands.add_parser("sst2_text", help="SST-2's training sentences, no labels, as corpus shards")
    text.add_argument("--src", required=True, help="the GLUE SST-2 folder")
    text.add_argument("--out", required=True)
    text.add_argument("--lines_per_document", type=int, default=10)
    pooler = commands.add_parser("reset_pooler", help="an export with its pooler drawn again")
    pooler.add_argument("--src", required=True, help="an original-format export folder")
    pooler.add_argument("--seed", type=int, required=True)
    pooler.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    commands_run = {
        "seeded_head": lambda: seeded_head(args.base, args.num_labels, args.seed, args.out, args.head,
                                           args.label_list.split(",") if args.label_list else None),
        "glue_subset": lambda: glue_subset(args.src, args.out, args.train_rows, args.dev_rows),
        "squad_split": lambda: squad_split(args.src, args.out, args.max_questions, args.whole_paragraphs,
                                           args.extra_train),
        "conll_subset": lambda: conll_subset(args.src, args.out, args.documents, args.eval_documents),
        "random_encoder": lambda: random_encoder(args.config, args.seed, args.out),
        "multiple_choice_subset": lambda: multiple_choice_subset(args.src, args.out, args.train_rows, args.dev_rows),
        "bert_config": lambda: bert_config(args.base, args.out, args.vocab_size),
        "sst2_text": lambda: sst2_text(args.src, args.out, args.lines_per_document),
        "reset_pooler": lambda: reset_pooler(args.src, args.seed, args.out)}
    commands_run[args.command]()


if __name__ == "__main__":
    main()
