"""Which task a checkpoint was fine-tuned for, read from its head's weights, and that model loaded.

bert-tf-export writes one end-to-end SavedModel per head it finds, under the names of the programs'
heads (TF1 names; a Hugging Face folder's BertFor* weights are mapped to them first):

    output_weights [labels, hidden]                        classifier   run_classifier.py
    cls/squad/output_weights [2, hidden]                   squad        run_squad.py
    cls/token_classification/output_weights [labels, h.]   tagger       run_ner.py
    cls/multiple_choice/output_weights [1, hidden]         multiple_choice  run_swag.py
    cls/predictions/*  (the masked-LM head)                fill_mask    a pre-trained checkpoint

A checkpoint without any of them (a bare encoder, or one of our own training checkpoints) gives
the encoder and the preprocessor only.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np

from bert_tf.checkpoints.model_folder import read_labels

CLASSIFIER, SQUAD, TAGGER, MULTIPLE_CHOICE, FILL_MASK = "classifier", "squad", "tagger", "multiple_choice", "fill_mask"
TASKS = (CLASSIFIER, SQUAD, TAGGER, MULTIPLE_CHOICE, FILL_MASK)
_HEADS = (("output_weights", CLASSIFIER), ("cls/squad/output_weights", SQUAD),
          ("cls/token_classification/output_weights", TAGGER), ("cls/multiple_choice/output_weights", MULTIPLE_CHOICE),
          ("cls/predictions/output_bias", FILL_MASK))
_NSP = "cls/seq_relationship/*"


@dataclasses.dataclass(frozen=True)
class Head:
    """The task head of a checkpoint: its kind, output count and label names (classifier, tagger)."""

    task: str
    num_outputs: int
    labels: tuple[str, ...] | None = None
    has_nsp: bool = False


def weight_shapes(checkpoint: str) -> dict[str, tuple[int, ...]]:
    """TF1 name -> shape of every weight of an original checkpoint or a Hugging Face folder ({} for one
    of our training checkpoints, which carries no task head the exporter knows)."""
    import tensorflow as tf

    from bert_tf import checkpoints
    from bert_tf.checkpoints import hf

    if os.path.isdir(checkpoint) and os.path.isfile(os.path.join(checkpoint, "config.json")):
        weights = hf.hf_to_tf1(hf.read_hf_state_dict(checkpoint), source=checkpoint,
                               architecture=hf.folder_architecture(checkpoint))
        return {name: tuple(np.shape(value)) for name, value in weights.items()}
    if not checkpoints.is_tf1_checkpoint(checkpoint):
        return {}
    prefix = checkpoints.resolve_checkpoint_prefix(checkpoint)
    return {name: tuple(shape) for name, shape in tf.train.list_variables(prefix)}


def find_head(checkpoint: str) -> Head | None:
    """The task head of `checkpoint` (None: an encoder only), with the label names stored beside it
    (label_list.txt, or a Hugging Face folder's id2label; LABEL_0, ... when there are none)."""
    shapes = weight_shapes(checkpoint)
    for name, task in _HEADS:
        if name in shapes:
            count = shapes[name][0]
            labels = _label_names(checkpoint, count) if task in (CLASSIFIER, TAGGER) and count > 1 else None
            return Head(task, count, labels, has_nsp="cls/seq_relationship/output_weights" in shapes)
    return None


def _label_names(checkpoint: str, count: int) -> tuple[str, ...]:
    from bert_tf.checkpoints import hf

    folder = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint) or "."
    names = read_labels(folder)
    if names is None and os.path.isfile(os.path.join(folder, "config.json")):
        names = hf.folder_labels(folder)
    if names is None or len(names) != count:
        return tuple(f"LABEL_{i}" for i in range(count))
    return tuple(names)


def build_task_model(head: Head, config):
    """The fine-tuning model of `head` (its weights not loaded yet) and the TF1 names it may lack."""
    from bert_tf.model import heads

    if head.task == CLASSIFIER:
        return heads.BertClassifierModel(config, num_labels=head.num_outputs), ()
    if head.task == SQUAD:
        return heads.BertSpanModel(config), ()
    if head.task == TAGGER:
        return heads.BertTokenClassifierModel(config, num_labels=head.num_outputs), ()
    if head.task == MULTIPLE_CHOICE:
        return heads.BertMultipleChoiceModel(config), ()
    return heads.BertPretrainingModel(config), () if head.has_nsp else (_NSP,)
