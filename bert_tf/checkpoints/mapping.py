"""Our Keras variables <-> the original TF1 variable names (bert/..., cls/..., output_*).

Kernels keep the TF1 [in, out] layout. Our fused [H, 3H] query/key/value kernel (and [3H]
bias) is split into the original's three `attention/self/{query,key,value}` variables here.

Mapping is by layer, not by model class: a model's BertModel gives the `bert/...` names, and any
other layer that declares `tf1_variables()` (the heads; a new task's head) gives its own. So a
new task model needs no change here.
"""
from __future__ import annotations

import dataclasses
import fnmatch
from typing import Iterable, Mapping

import numpy as np

import bert_tf._env  # noqa: F401
from bert_tf.errors import BertTfError
from bert_tf.checkpoints.weight_files import check_weight_values
import keras

from bert_tf.model.layers import LayerNorm
from bert_tf.model.bert import BertModel


class CheckpointMismatchError(BertTfError, ValueError):
    """The checkpoint's variables do not match the model's (names and shapes are listed)."""

    def __init__(self, missing=(), unexpected=(), mismatched=(), source: str = "checkpoint"):
        self.missing, self.unexpected, self.mismatched = list(missing), list(unexpected), \
            list(mismatched)
        lines = [f"{source} does not match the model:"]
        if self.missing:
            lines.append(f"  missing from the checkpoint ({len(self.missing)}): "
                         + ", ".join(self.missing))
        if self.unexpected:
            lines.append(f"  not in the model ({len(self.unexpected)}): "
                         + ", ".join(self.unexpected))
        for name, want, got in self.mismatched:
            lines.append(f"  shape mismatch: {name}: model {list(want)}, checkpoint {list(got)}")
        super().__init__("\n".join(lines))


@dataclasses.dataclass
class LoadReport:
    """What set_tf1_weights did: names loaded, allowed-missing names, ignored names."""

    loaded: list[str]
    missing: list[str]
    unexpected: list[str]


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One TF1 variable: a Keras variable, or a slice `part` of a fused one's last axis."""

    name: str
    variable: keras.Variable
    part: int | None = None
    parts: int = 1

    def shape(self) -> tuple[int, ...]:
        shape = tuple(self.variable.shape)
        if self.part is None:
            return shape
        return shape[:-1] + (shape[-1] // self.parts,)

    def get(self, source: keras.Variable | None = None) -> np.ndarray:
        """This entry's slice of `source` (default: its own variable), e.g. an optimizer slot."""
        source = self.variable if source is None else source
        value = np.asarray(keras.ops.convert_to_numpy(source.value))
        if self.part is None:
            return value
        size = value.shape[-1] // self.parts
        return value[..., self.part * size:(self.part + 1) * size]


def _dense(prefix: str, kernel, bias) -> list[_Entry]:
    return [_Entry(f"{prefix}/kernel", kernel), _Entry(f"{prefix}/bias", bias)]


def _layer_norm(prefix: str, ln: LayerNorm) -> list[_Entry]:
    return [_Entry(f"{prefix}/LayerNorm/gamma", ln.gamma),
            _Entry(f"{prefix}/LayerNorm/beta", ln.beta)]


def _bert_entries(bert: BertModel, scope: str = "bert") -> list[_Entry]:
    emb = bert.embeddings
    entries = [_Entry(f"{scope}/embeddings/word_embeddings", emb.word_embeddings),
               _Entry(f"{scope}/embeddings/token_type_embeddings", emb.token_type_embeddings),
               _Entry(f"{scope}/embeddings/position_embeddings", emb.position_embeddings),
               *_layer_norm(f"{scope}/embeddings", emb.layer_norm)]
    for i, layer in enumerate(bert.encoder_layers):
        p = f"{scope}/encoder/layer_{i}"
        for part, qkv in enumerate(("query", "key", "value")):
            entries.append(_Entry(f"{p}/attention/self/{qkv}/kernel", layer.qkv_kernel, part, 3))
            entries.append(_Entry(f"{p}/attention/self/{qkv}/bias", layer.qkv_bias, part, 3))
        entries += _dense(f"{p}/attention/output/dense", layer.attention_output_kernel,
                          layer.attention_output_bias)
        entries += _layer_norm(f"{p}/attention/output", layer.attention_layer_norm)
        entries += _dense(f"{p}/intermediate/dense", layer.intermediate_kernel,
                          layer.intermediate_bias)
        entries += _dense(f"{p}/output/dense", layer.output_kernel, layer.output_bias)
        entries += _layer_norm(f"{p}/output", layer.output_layer_norm)
    entries += _dense(f"{scope}/pooler/dense", bert.pooler.kernel, bert.pooler.bias)
    return entries


def _entries(model: keras.Model) -> list[_Entry]:
    """Every TF1-named variable of `model`: its BertModel's, then each head's, in layer order."""
    if isinstance(model, BertModel):
        return _bert_entries(model)
    entries = _layer_entries(model)
    if not entries:
        raise TypeError(f"no TF1 name mapping for {type(model).__name__}: it holds no BertModel and "
                        f"no layer with tf1_variables()")
    return entries


def _layer_entries(layer: keras.layers.Layer) -> list[_Entry]:
    entries = []
    for child in layer._flatten_layers(include_self=False, recursive=False):
        if isinstance(child, BertModel):
            entries += _bert_entries(child)
        elif hasattr(child, "tf1_variables"):
            entries += [_Entry(name, variable) for name, variable in child.tf1_variables()]
        else:
            entries += _layer_entries(child)
    return entries


def get_tf1_weights(model: keras.Model, companion=None) -> dict[str, np.ndarray]:
    """The model's weights keyed by the original TF1 names (kernels [in, out]).

    `companion(variable)`, if given, returns a same-shaped variable to read instead (an optimizer
    slot), so slots are named and split exactly as their weights.
    """
    if companion is None:
        return {e.name: e.get() for e in _entries(model)}
    return {e.name: e.get(companion(e.variable)) for e in _entries(model)}


def _allowed(name: str, patterns: Iterable[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


def set_tf1_weights(model: keras.Model, weights: Mapping[str, np.ndarray], *,
                    allow_missing: Iterable[str] = (), ignore_unexpected: bool = False,
                    source: str = "checkpoint") -> LoadReport:
    """Assigns TF1-named arrays to the model after checking every name and shape.

    `allow_missing`: names (or fnmatch patterns such as "cls/*") that may be absent; those
    variables keep their current (initial) values. Unexpected names are an error unless
    `ignore_unexpected`. A weight that is not floating point or not finite is refused, never cast.
    Nothing is assigned when any check fails.
    """
    allow_missing = tuple(allow_missing)
    entries = _entries(model)
    names = {e.name for e in entries}
    missing = [e.name for e in entries if e.name not in weights]
    not_allowed = [n for n in missing if not _allowed(n, allow_missing)]
    unexpected = sorted(n for n in weights if n not in names)
    mismatched = [(e.name, e.shape(), tuple(np.shape(weights[e.name])))
                  for e in entries if e.name in weights
                  and tuple(np.shape(weights[e.name])) != e.shape()]
    if not_allowed or mismatched or (unexpected and not ignore_unexpected):
        raise CheckpointMismatchError(not_allowed, [] if ignore_unexpected else unexpected,
                                      mismatched, source)
    for e in entries:
        if e.name in weights:
            check_weight_values(source, e.name, np.asarray(weights[e.name]))
    loaded = []
    for variable, value, names in _values_by_variable(entries, weights):
        variable.assign(value.astype(variable.dtype))
        loaded += names
    return LoadReport(loaded=loaded, missing=missing, unexpected=unexpected)


def _values_by_variable(entries: list[_Entry], weights: Mapping[str, np.ndarray]):
    """(Keras variable, its full value, TF1 names used) for each variable with a name in `weights`.

    A fused variable is built from all its parts; absent parts keep the variable's current value.
    """
    by_variable: dict[int, list[_Entry]] = {}
    for e in entries:
        by_variable.setdefault(id(e.variable), []).append(e)
    for group in by_variable.values():
        present = [e for e in group if e.name in weights]
        if not present:
            continue
        if group[0].part is None:
            value = np.asarray(weights[group[0].name])
        else:
            pieces = [np.asarray(weights[e.name]) if e.name in weights else e.get()
                      for e in sorted(group, key=lambda e: e.part)]
            value = np.concatenate(pieces, axis=-1)
        yield group[0].variable, value, [e.name for e in present]


def tf1_values_by_variable(model: keras.Model, weights: Mapping[str, np.ndarray]
                           ) -> list[tuple[keras.Variable, np.ndarray]]:
    """Pairs each model variable with its value assembled from TF1-named arrays (no assignment).

    For arrays shaped like the weights but that are not the weights, e.g. the original's
    `adam_m`/`adam_v` optimizer slots keyed by their variable's name.
    """
    entries = _entries(model)
    unknown = sorted(set(weights) - {e.name for e in entries})
    fused_present = {id(e.variable) for e in entries if e.part is not None and e.name in weights}
    partial = [e.name for e in entries if id(e.variable) in fused_present and e.name not in weights]
    if unknown or partial:
        raise CheckpointMismatchError(missing=partial, unexpected=unknown)
    return [(variable, value) for variable, value, _ in _values_by_variable(entries, weights)]
