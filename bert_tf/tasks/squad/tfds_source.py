"""SQuAD through TensorFlow Datasets (`--tfds_name=squad/v1.1` or `squad/v2.0`), for users who have it prepared.

tfds stores one record per question (id, title, context, question, answers; v2.0 adds is_impossible).
run_squad reads SQuAD json, so a prepared split is written back into that shape once: articles by
title and paragraphs by context in the order tfds gives them, each question with its answers. The
file goes to OUTPUT_DIR/tfds/, named by the dataset, the split and a hash of tfds's data files, so
changed data gets a new file; from there the program is the same as with --train_file/--predict_file
(windows, features cache, predictions, official evaluation). Nothing is downloaded or prepared here.
"""
from __future__ import annotations

import hashlib
import os

from bert_tf.data.atomic_io import write_json_atomic
from bert_tf.data.files import file_sha256
from bert_tf.tasks.squad.data import SquadDataError
from bert_tf.tasks.tfds_data import TfdsDataError, prepared_builder, read_split, split_files

VERSION_2 = {"squad/v1.1": False, "squad/v2.0": True}
SPLITS = {"train": "train", "predict": "validation"}
FOLDER = "tfds"


def is_version_2(tfds_name: str) -> bool:
    """Whether the tfds SQuAD config is v2.0 (has unanswerable questions); an unknown name is an error."""
    base = tfds_name.split(":")[0]
    if base not in VERSION_2:
        raise SquadDataError(f"--tfds_name={tfds_name} is not one of {', '.join(VERSION_2)} (optionally :VERSION)")
    return VERSION_2[base]


def squad_json_from_tfds(tfds_name: str, split: str, data_dir: str | None, output_dir: str) -> str:
    """The path of a SQuAD json holding the tfds split ("train" or "predict" = tfds's validation),
    written under OUTPUT_DIR/tfds/ unless already there."""
    version_2 = is_version_2(tfds_name)
    try:
        builder = prepared_builder(tfds_name, data_dir)
        files = split_files(builder, SPLITS[split])
    except TfdsDataError as e:
        raise SquadDataError(str(e)) from None
    key = hashlib.sha256("".join(file_sha256(path) for path in files).encode()).hexdigest()[:16]
    name = tfds_name.split(":")[0].replace("/", "-")
    path = os.path.join(output_dir, FOLDER, f"{name}-{SPLITS[split]}-{key}.json")
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomic(path, {"version": name.split("-v")[-1], "data": _articles(read_split(builder, SPLITS[split]),
                                                                                    version_2)},
                          indent=None, sort_keys=False)
    return path


def _articles(records: list[dict], version_2: bool) -> list[dict]:
    """tfds question records as SQuAD's data list: articles by title, paragraphs by context, in first-seen order."""
    articles: dict[str, dict[str, list]] = {}
    for record in records:
        answers = record["answers"]
        qa = {"id": _text(record["id"]), "question": _text(record["question"]),
              "answers": [{"text": _text(text), "answer_start": int(start)}
                          for text, start in zip(answers["text"], answers["answer_start"])]}
        if version_2:
            qa["is_impossible"] = bool(record["is_impossible"])
        paragraphs = articles.setdefault(_text(record["title"]), {})
        paragraphs.setdefault(_text(record["context"]), []).append(qa)
    return [{"title": title, "paragraphs": [{"context": context, "qas": qas} for context, qas in paragraphs.items()]}
            for title, paragraphs in articles.items()]


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
