"""Read and write the original's TF1 checkpoints (tf.train.Saver V2 bundles).

Reading keeps model variables only: Adam slots (`*/adam_m`, `*/adam_v`) and `global_step`
are skipped. Writing produces a bundle that `tf.train.load_checkpoint` and the original
code's `init_from_checkpoint` read by the same names. A missing, cut or corrupt .index or .data
file is one CheckpointError naming it (TensorFlow's reader says "Read less bytes than requested").
"""
from __future__ import annotations

import glob
import os
import re
from typing import Callable, Mapping

import numpy as np

import bert_tf._env  # noqa: F401
from bert_tf.data.atomic_io import atomic_prefix, write_failure
from bert_tf.errors import BertTfError
import tensorflow as tf


class CheckpointError(BertTfError, ValueError):
    """A path that is not a readable TF1 checkpoint, or weights that cannot be written."""


_SKIPPED_SUFFIXES = ("/adam_m", "/adam_v")
_SKIPPED_NAMES = ("global_step",)
_DATA_SUFFIX = re.compile(r"\.data-\d{5}-of-\d{5}$")
_MISSING_DATA = re.compile(r"(\S+\.data-\d{5}-of-\d{5}); No such file")


def is_model_variable(name: str) -> bool:
    """False for optimizer slots and the step counter, which a model does not hold."""
    return not (name in _SKIPPED_NAMES or name.endswith(_SKIPPED_SUFFIXES))


def resolve_checkpoint_prefix(path: str | os.PathLike) -> str:
    """Prefix, `.index`/`.data-*` file, or a folder holding one checkpoint -> the prefix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(glob.glob(os.path.join(glob.escape(path), "*.index")))
        if len(indexes) != 1:
            found = "no" if not indexes else f"{len(indexes)} ({', '.join(indexes)})"
            raise CheckpointError(f"{path}: folder holds {found} TF1 checkpoint .index files; "
                                  f"pass the checkpoint prefix")
        return indexes[0][: -len(".index")]
    if path.endswith(".index"):
        path = path[: -len(".index")]
    else:
        path = _DATA_SUFFIX.sub("", path)
    if not os.path.isfile(path + ".index"):
        raise CheckpointError(f"{path}: not a TF1 checkpoint (no {os.path.basename(path)}.index)")
    return path


def read_tf1_checkpoint(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """All model variables of a TF1 checkpoint, by their TF1 names."""
    return _read_tensors(resolve_checkpoint_prefix(path), is_model_variable)


def read_tf1_optimizer_state(path: str | os.PathLike) -> tuple[dict[str, dict[str, np.ndarray]], int | None]:
    """The original optimizer's state in a TF1 checkpoint: ({"adam_m": {variable name: array},
    "adam_v": {...}}, global_step or None)."""
    tensors = _read_tensors(resolve_checkpoint_prefix(path),
                            lambda name: name == "global_step" or name.rpartition("/")[2] in ("adam_m", "adam_v"))
    slots: dict[str, dict[str, np.ndarray]] = {"adam_m": {}, "adam_v": {}}
    for name, value in tensors.items():
        owner, _, slot = name.rpartition("/")
        if slot in slots:
            slots[slot][owner] = value
    step = int(tensors["global_step"]) if "global_step" in tensors else None
    return slots, step


def _read_tensors(prefix: str, keep: Callable[[str], bool]) -> dict[str, np.ndarray]:
    """The tensors of the checkpoint at `prefix` whose names `keep(name)` accepts; a missing,
    truncated or corrupt file is one CheckpointError naming it."""
    name = None
    try:
        reader = tf.train.load_checkpoint(prefix)
        tensors = {}
        for name in sorted(reader.get_variable_to_shape_map()):
            if keep(name):
                tensors[name] = reader.get_tensor(name)
        return tensors
    except IndexError:  # the reader's "Read less bytes than requested": a cut data file
        data_files = sorted(glob.glob(glob.escape(prefix) + ".data-*-of-*"))
        sizes = ", ".join(f"{os.path.getsize(f)} bytes" for f in data_files)
        raise CheckpointError(f"{', '.join(data_files)}: truncated ({sizes}): variable {name!r} "
                              f"ends past the end of the data") from None
    except (tf.errors.OpError, ValueError) as e:
        message = getattr(e, "message", None) or str(e)
        missing = _MISSING_DATA.search(message)
        if missing and not os.path.exists(missing[1]):
            raise CheckpointError(f"{missing[1]}: missing (a data file of {prefix}.index)") from None
        raise CheckpointError(f"{prefix}: cannot read TF1 checkpoint: "
                              f"{message.splitlines()[0] if message else type(e).__name__}"
                              ) from None


def write_tf1_checkpoint(weights: Mapping[str, np.ndarray], prefix: str | os.PathLike) -> None:
    """Writes `weights` as a V2 bundle at `prefix` (.index + .data-00000-of-00001).

    Written under a temporary prefix in the same folder, then renamed into place.
    """
    prefix = os.fspath(prefix)
    if not weights:
        raise CheckpointError(f"{prefix}: no weights to write")
    folder = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(folder, exist_ok=True)
    names = sorted(weights)
    tensors = []
    for name in names:
        value = np.asarray(weights[name])
        if value.dtype == object:
            raise CheckpointError(f"{prefix}: variable {name!r} is not a numeric array")
        tensors.append(tf.convert_to_tensor(value))
    # Data shards first, index last: a reader that sees the index sees complete data.
    try:
        with atomic_prefix(prefix, last_suffix=".index") as tmp:
            tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                              tensors=tensors)
    except (tf.errors.OpError, OSError) as e:
        raise CheckpointError(f"cannot write {prefix}: {write_failure(e)} (nothing of it was kept)") from None
