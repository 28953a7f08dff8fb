"""Checkpoint I/O: the original TF1 checkpoints (tf1.py) and the name mapping (mapping.py)."""
from __future__ import annotations

import os
from typing import Iterable, Mapping

import bert_tf._env  # noqa: F401
import keras

from bert_tf.checkpoints.mapping import (CheckpointMismatchError, LoadReport, get_tf1_weights,
                                         set_tf1_weights, tf1_values_by_variable)
from bert_tf.checkpoints.tf1 import (CheckpointError, read_tf1_checkpoint, read_tf1_optimizer_state,
                                     resolve_checkpoint_prefix, write_tf1_checkpoint)

__all__ = ["CheckpointError", "CheckpointMismatchError", "LoadReport", "get_tf1_weights",
           "set_tf1_weights", "read_tf1_checkpoint", "write_tf1_checkpoint",
           "load_tf1_checkpoint", "save_tf1_checkpoint", "load_tf1_optimizer_state",
           "is_tf1_checkpoint", "load_init_checkpoint", "export_original_folder"]


def load_tf1_checkpoint(model: keras.Model, path: str | os.PathLike, *,
                        allow_missing: Iterable[str] = (),
                        ignore_unexpected: bool = False) -> LoadReport:
    """Reads an original TF1 checkpoint and assigns it to `model` (names and shapes checked).

    Loading a pretraining checkpoint into a BertModel or a fine-tuning model: pass
    `ignore_unexpected=True` (for cls/*) and e.g. `allow_missing=["output_*"]` for a new head.
    """
    weights = read_tf1_checkpoint(path)
    return set_tf1_weights(model, weights, allow_missing=allow_missing,
                           ignore_unexpected=ignore_unexpected, source=os.fspath(path))


def save_tf1_checkpoint(model: keras.Model, prefix: str | os.PathLike) -> None:
    """Writes the model's weights as an original-format TF1 checkpoint at `prefix`."""
    write_tf1_checkpoint(get_tf1_weights(model), prefix)


def load_tf1_optimizer_state(model: keras.Model, optimizer, path: str | os.PathLike) -> int:
    """Restores the original's Adam slots (`*/adam_m`, `*/adam_v`) and `global_step` from a TF1
    checkpoint into `optimizer` (an AdamWeightDecay, built here for the model's trainable
    variables); returns the step. Every trainable variable must have both slots."""
    slots, step = read_tf1_optimizer_state(path)
    optimizer.build(model.trainable_variables)
    trainable = {id(v) for v in model.trainable_variables}
    for slot_name, arrays in slots.items():
        values = tf1_values_by_variable(model, arrays)
        found = {id(variable) for variable, _ in values}
        missing = [v.path for v in model.trainable_variables if id(v) not in found]
        if missing:
            raise CheckpointError(f"{os.fspath(path)}: no {slot_name} slot for {', '.join(missing)}")
        for variable, value in values:
            if id(variable) in trainable:
                slot = optimizer.slots(variable)[0 if slot_name == "adam_m" else 1]
                slot.assign(value.astype(slot.dtype))
    if step is not None:
        optimizer.iterations.assign(step)
    return step or 0


def is_tf1_checkpoint(path: str | os.PathLike) -> bool:
    """True for an original-format checkpoint (variables named bert/...), False for ours
    (tf.train.Checkpoint: model/...); CheckpointError when `path` is no checkpoint."""
    import tensorflow as tf

    prefix = resolve_checkpoint_prefix(path)
    try:
        names = [name for name, _ in tf.train.list_variables(prefix)]
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: cannot read checkpoint: {getattr(e, 'message', e)}") from None
    return any(name.startswith("bert/") for name in names)


def load_init_checkpoint(model: keras.Model, path: str | os.PathLike, *,
                         allow_missing: Iterable[str] = ()) -> str:
    """Initialises `model` from an original TF1 checkpoint, a Hugging Face BERT folder (config.json and
    model.safetensors or pytorch_model.bin, converted in memory) or one of our training checkpoints
    (e.g. pre-training phase 1 for phase 2; a run of another head gives its encoder when `allow_missing`
    names this model's head). Returns "tf1", "hugging_face" or "bert_tf"."""
    import tensorflow as tf

    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
        from bert_tf.checkpoints import hf

        weights = hf.hf_to_tf1(hf.read_hf_state_dict(path), source=os.fspath(path),
                               architecture=hf.folder_architecture(path))
        set_tf1_weights(model, weights, allow_missing=allow_missing, ignore_unexpected=True,
                        source=os.fspath(path))
        return "hugging_face"
    if is_tf1_checkpoint(path):
        load_tf1_checkpoint(model, path, allow_missing=allow_missing, ignore_unexpected=True)
        return "tf1"
    from bert_tf.checkpoints.restore import CheckpointLacksVariables, restore_checkpoint

    prefix = resolve_checkpoint_prefix(path)
    try:
        restore_checkpoint(tf.train.Checkpoint(model=model), prefix, partial=True)
    except CheckpointLacksVariables:
        from bert_tf.model.bert import encoder_of

        encoder = encoder_of(model)
        if encoder is None or (encoder is not model and not allow_missing):
            raise
        # A run of another model (pre-training, another task): the original reads any checkpoint's bert/
        # variables, so take its encoder whole and leave the new head as initialised.
        restore_checkpoint(tf.train.Checkpoint(model=tf.train.Checkpoint(bert=encoder)), prefix, partial=True)
    return "bert_tf"


def export_original_folder(model: keras.Model, config, folder: str | os.PathLike,
                           vocab_file: str | os.PathLike | None = None, extra_files: Mapping[str, str] | None = None,
                           *, in_place: bool = False) -> None:
    """Writes `folder` as the original release lays it out: bert_config.json, bert_model.ckpt.*
    and vocab.txt (when given), plus `extra_files` ({name: text}); assembled under a temporary name, renamed when complete, after what
    a killed export left is put right (`atomic_folder`: the caller owns `folder`). in_place: written
    straight into `folder`, a temporary folder the caller renames."""
    import shutil

    from bert_tf.data.atomic_io import atomic_folder

    def fill(tmp: str) -> None:
        config.to_json_file(os.path.join(tmp, "bert_config.json"))
        save_tf1_checkpoint(model, os.path.join(tmp, "bert_model.ckpt"))
        if vocab_file:
            shutil.copyfile(vocab_file, os.path.join(tmp, "vocab.txt"))
        for name, text in (extra_files or {}).items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)

    if in_place:
        fill(os.fspath(folder))
    else:
        atomic_folder(folder, True, fill)
