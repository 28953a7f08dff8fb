"""What a model folder given as --init_checkpoint says about the run: config, vocab and casing.

A user who points --init_checkpoint at Google's release folder (bert_config.json, vocab.txt,
bert_model.ckpt.*) or at a Hugging Face folder (config.json, vocab.txt, tokenizer_config.json,
model.safetensors) need not repeat its config and vocab: they are taken from the folder (and the
config of a training run's ckpt-N from its model_config.json). Given
anyway, they are checked against it: a vocab file that differs from the folder's, or a
--do_lower_case that contradicts the folder's tokenizer_config.json or a released checkpoint's
name, is one readable error instead of a silently wrong model.
"""
from __future__ import annotations

import dataclasses
import json
import os

from bert_tf.checkpoints.tf1 import CheckpointError
from bert_tf.data.files import file_sha256

CONFIG_NAMES = ("bert_config.json", "config.json")
# A bert_tf training folder's record of the architecture its checkpoints (ckpt-N) were written for.
MODEL_CONFIG = "model_config.json"
# A classifier's or tagger's label names, one per line in output order: written by the fine-tuning
# programs beside their export, read by bert-tf-convert (Hugging Face's id2label) and bert-tf-export.
LABELS_FILE = "label_list.txt"


def labels_text(labels) -> str:
    """The label_list.txt text of `labels`."""
    return "".join(label + "\n" for label in labels)


def read_labels(folder: str) -> list[str] | None:
    """The label names of label_list.txt in `folder`, None when it has none."""
    path = os.path.join(folder, LABELS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The config and vocab a run uses."""

    bert_config_file: str | None
    vocab_file: str | None


def model_folder(init_checkpoint: str | None) -> str | None:
    """The folder holding the --init_checkpoint model (the path itself, or the folder of a TF1 prefix)."""
    if not init_checkpoint:
        return None
    if os.path.isdir(init_checkpoint):
        return init_checkpoint
    folder = os.path.dirname(init_checkpoint) or "."
    return folder if os.path.isdir(folder) else None


def resolve_model_files(init_checkpoint: str | None, bert_config_file: str | None, vocab_file: str | None,
                        do_lower_case: bool | None = None) -> ModelFiles:
    """The run's config and vocab: the flags where given (checked against the folder), else the folder's."""
    from bert_tf.text.tokenization import validate_case_matches_checkpoint

    folder = model_folder(init_checkpoint)
    if do_lower_case is not None:
        validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    if folder is None:
        return ModelFiles(bert_config_file, vocab_file)
    if bert_config_file is None:
        bert_config_file = next((os.path.join(folder, name) for name in (*CONFIG_NAMES, MODEL_CONFIG)
                                 if os.path.isfile(os.path.join(folder, name))), None)
    folder_vocab = os.path.join(folder, "vocab.txt")
    if os.path.isfile(folder_vocab) and _is_hugging_face(folder):
        if vocab_file is None:
            vocab_file = folder_vocab
        elif file_sha256(vocab_file) != file_sha256(folder_vocab):
            raise CheckpointError(f"--vocab_file={vocab_file} differs from {folder_vocab}, the vocab the "
                                  f"--init_checkpoint model was trained with; drop --vocab_file to use the folder's")
        if do_lower_case is not None:
            _check_hf_casing(folder, do_lower_case)
    elif vocab_file is None and os.path.isfile(folder_vocab):
        vocab_file = folder_vocab
    return ModelFiles(bert_config_file, vocab_file)


def _is_hugging_face(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "config.json"))


def _check_hf_casing(folder: str, do_lower_case: bool) -> None:
    path = os.path.join(folder, "tokenizer_config.json")
    try:
        with open(path, encoding="utf-8") as f:
            folder_lower = json.load(f).get("do_lower_case")
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(folder_lower, bool) and folder_lower != do_lower_case:
        raise CheckpointError(f"--do_lower_case={do_lower_case} contradicts {path} (do_lower_case: "
                              f"{str(folder_lower).lower()}); pass --do_lower_case={folder_lower}")
