"""Which files hold a Hugging Face model's tensors, and reading them without trusting them.

A model folder holds `model.safetensors` or `pytorch_model.bin` (read by bert_tf.checkpoints.torch_bin,
never torch.load), or shards listed by `model.safetensors.index.json` / `pytorch_model.bin.index.json`.
An index is checked before any shard is opened: its `weight_map` must send tensor names to shard files
that are plain file names in the index's own folder (no `../`, no absolute path), that exist, and that
are not an index themselves (an index naming itself would be read forever). Each shard must hold the
tensors the index assigns to it, and no tensor may come from two files.

`check_weight_values` is the check every tensor loaded as a model weight passes: floating point and
finite. Nothing is cast: an integer or bool tensor where a weight belongs is refused, not converted.
"""
from __future__ import annotations

import json
import os
from typing import Iterator

import numpy as np

from bert_tf.errors import BertTfError
from bert_tf.checkpoints.torch_bin import load_torch_bin

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
INDEX_SUFFIX = ".index.json"


class WeightFileError(BertTfError, ValueError):
    """A weights file or shard index that cannot be read as a model's tensors (the message names it)."""


def read_weight_files(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(file, its tensors) for each tensor file of a model folder, a shard index or one weights file."""
    path = _weights_path(os.fspath(path))
    if not path.endswith(INDEX_SUFFIX):
        yield path, read_weight_file(path)
        return
    seen: dict[str, str] = {}
    for shard, names in _shards(path).items():
        tensors = read_weight_file(shard)
        absent = sorted(set(names) - set(tensors))
        if absent:
            raise WeightFileError(f"{path}: assigns {absent[0]} to {shard}, which does not hold it")
        twice = next((name for name in tensors if name in seen), None)
        if twice is not None:
            raise WeightFileError(f"{path}: tensor {twice} is in both {seen[twice]} and {shard}")
        seen.update(dict.fromkeys(tensors, shard))
        yield shard, tensors


def read_weight_file(path: str) -> dict[str, np.ndarray]:
    """The tensors of one `.safetensors` or zip-format `.bin` file as numpy arrays."""
    if path.endswith(".bin"):
        return load_torch_bin(path)
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    try:
        return load_file(path)
    except (SafetensorError, OSError, TypeError, ValueError, KeyError, AttributeError) as e:
        raise WeightFileError(f"{path}: cannot read safetensors file ({type(e).__name__}: {e})") from None


def check_weight_values(path: str, name: str, value: np.ndarray) -> None:
    """Refuses a model weight that is not floating point or holds NaN/Inf, in one line naming `path`
    (its file) and the tensor; a weight is never cast, so an integer or bool tensor is an error."""
    if not _is_float(value.dtype):
        raise WeightFileError(f"{path}: tensor {name} is {value.dtype}, not floating point "
                              "(a model weight; it is not cast)")
    finite = np.isfinite(value)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        where = [int(i) for i in np.unravel_index(bad[0], value.shape)]
        raise WeightFileError(f"{path}: tensor {name} holds {bad.size} NaN or Inf value(s), the first "
                              f"at {where}")


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _weights_path(path: str) -> str:
    """The weights file or index of a folder (the first of WEIGHT_FILES present), else `path` itself."""
    if not os.path.isdir(path):
        return path
    for name in WEIGHT_FILES:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    raise WeightFileError(f"{path}: no {', '.join(WEIGHT_FILES)} in this folder")


def _shards(index: str) -> dict[str, list[str]]:
    """Shard file -> the tensor names the index assigns to it, every shard checked (module docstring)."""
    by_shard: dict[str, list[str]] = {}
    for name, shard in _weight_map(index).items():
        by_shard.setdefault(shard, []).append(name)
    folder = os.path.dirname(index)
    for shard in by_shard:
        if shard in ("", ".", "..") or "/" in shard or os.sep in shard:
            raise WeightFileError(f"{index}: shard {shard!r} is not a file name in the index's folder")
        if shard.endswith(INDEX_SUFFIX):
            raise WeightFileError(f"{index}: names an index ({shard}) as a shard; shards hold tensors")
        if not os.path.isfile(os.path.join(folder, shard)):
            raise WeightFileError(f"{index}: shard {shard} is missing from {folder or '.'}")
    return {os.path.join(folder, shard): names for shard, names in sorted(by_shard.items())}


def _weight_map(index: str) -> dict[str, str]:
    try:
        with open(index, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise WeightFileError(f"{index}: cannot read shard index ({e})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise WeightFileError(f"{index}: no \"weight_map\" of tensor name -> shard file in this index")
    bad = next((k for k, v in weight_map.items() if not isinstance(v, str)), None)
    if bad is not None:
        raise WeightFileError(f"{index}: weight_map sends {bad} to {weight_map[bad]!r}, not a file name")
    return weight_map
