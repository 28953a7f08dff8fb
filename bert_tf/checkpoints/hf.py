"""Hugging Face BERT weights and config.json <-> the original BERT's TF1-named weights and bert_config.json.

The canonical in-memory form of a checkpoint in bert_tf is a dict of numpy arrays keyed by the
ORIGINAL TF1 variable names (`bert/encoder/layer_0/attention/self/query/kernel`, ...). This module
converts a Hugging Face `state_dict` (from `model.safetensors` or `pytorch_model.bin`) into that
dict and back, and translates `config.json` <-> `bert_config.json` keeping the activation numerics.

Layout differences handled here:
  * torch Linear weights are [out, in]; TF1 dense kernels are [in, out] (transposed);
  * LayerNorm `weight`/`bias` (or legacy `gamma`/`beta`) -> `gamma`/`beta`;
  * the MLM decoder weight is tied to the word embeddings (never stored twice); its bias is
    `cls.predictions.bias` (or `cls.predictions.decoder.bias`) -> `cls/predictions/output_bias`;
  * the NSP / classifier / SQuAD output weights are [num_outputs, hidden] in both worlds.
"""
from __future__ import annotations

import json
import os
import re
from typing import Mapping

import numpy as np

import bert_tf._env  # noqa: F401  (the bert_tf.checkpoints package imports keras)
from bert_tf.checkpoints.weight_files import check_weight_values, read_weight_files
from bert_tf.model.hf_config import HFConversionError, hf_config_to_original, original_config_to_hf  # noqa: F401

# The config.json keys that decide the weights' shapes.
_SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
              "max_position_embeddings", "type_vocab_size")

# HF buffers that carry no learned values.
_IGNORED_HF = re.compile(r"(^|\.)(position_ids|token_type_ids)$")
# TF1 variables that are training state, not model weights.
_IGNORED_TF1 = re.compile(r"(/adam_[mv]$|^global_step$|/Adam(_1)?$)")


# --------------------------------------------------------------------------- names

_LAYER_PARTS = {
    # HF module path inside encoder.layer.N -> TF1 scope inside layer_N
    "attention.self.query": "attention/self/query",
    "attention.self.key": "attention/self/key",
    "attention.self.value": "attention/self/value",
    "attention.output.dense": "attention/output/dense",
    "attention.output.LayerNorm": "attention/output/LayerNorm",
    "intermediate.dense": "intermediate/dense",
    "output.dense": "output/dense",
    "output.LayerNorm": "output/LayerNorm",
}
_FIXED = {
    # HF name (without "bert." prefix for bert.* names) -> (TF1 name, transpose)
    "embeddings.word_embeddings.weight": ("bert/embeddings/word_embeddings", False),
    "embeddings.position_embeddings.weight": ("bert/embeddings/position_embeddings", False),
    "embeddings.token_type_embeddings.weight": ("bert/embeddings/token_type_embeddings", False),
    "cls.predictions.bias": ("cls/predictions/output_bias", False),
    "cls.predictions.decoder.bias": ("cls/predictions/output_bias", False),
    "cls.seq_relationship.weight": ("cls/seq_relationship/output_weights", False),
    "cls.seq_relationship.bias": ("cls/seq_relationship/output_bias", False),
    # run_classifier.py / run_squad.py heads
    "classifier.weight": ("output_weights", False),
    "classifier.bias": ("output_bias", False),
    "qa_outputs.weight": ("cls/squad/output_weights", False),
    "qa_outputs.bias": ("cls/squad/output_bias", False),
}
# BertForTokenClassification names its head like BertForSequenceClassification; ours (the original has
# no tagging head) lives under its own scope, bert_tf.model.heads.TOKEN_CLASSIFICATION_SCOPE.
TOKEN_CLASSIFICATION = "BertForTokenClassification"
_TOKEN_CLASSIFIER = {
    "classifier.weight": ("cls/token_classification/output_weights", False),
    "classifier.bias": ("cls/token_classification/output_bias", False),
}
# BertForMultipleChoice too (classifier.weight [1, hidden]); ours: bert_tf.model.heads.MULTIPLE_CHOICE_SCOPE.
MULTIPLE_CHOICE = "BertForMultipleChoice"
_MULTIPLE_CHOICE = {
    "classifier.weight": ("cls/multiple_choice/output_weights", False),
    "classifier.bias": ("cls/multiple_choice/output_bias", False),
}
_CLASSIFIER_OF = {TOKEN_CLASSIFICATION: _TOKEN_CLASSIFIER, MULTIPLE_CHOICE: _MULTIPLE_CHOICE}
_MODULES = {
    # HF module path -> TF1 scope, for Linear / LayerNorm modules outside the layers
    "embeddings.LayerNorm": "bert/embeddings/LayerNorm",
    "pooler.dense": "bert/pooler/dense",
    "cls.predictions.transform.dense": "cls/predictions/transform/dense",
    "cls.predictions.transform.LayerNorm": "cls/predictions/transform/LayerNorm",
}
_TIED_DECODER = "cls.predictions.decoder.weight"
_INVERSE_LAYER_PARTS = {v: k for k, v in _LAYER_PARTS.items()}
_HF_KIND = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}
_LAYER_RE = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias|gamma|beta)$")
_MODULE_RE = re.compile(r"^(.+)\.(weight|bias|gamma|beta)$")


def _strip_prefix(name: str) -> str:
    return name[len("bert."):] if name.startswith("bert.") else name


def _param_name(scope: str, kind: str) -> tuple[str, bool]:
    """TF1 variable name and transpose flag for an HF parameter `kind` of the module at `scope`."""
    if scope.endswith("LayerNorm"):
        return scope + ("/gamma" if kind in ("weight", "gamma") else "/beta"), False
    return scope + ("/kernel" if kind == "weight" else "/bias"), kind == "weight"


def hf_name_to_tf1(name: str, architecture: str | None = None) -> tuple[str, bool] | None:
    """(TF1 name, transpose?) for one Hugging Face parameter name, or None if it is not BERT's.
    `architecture` (config.json's) tells a token classifier's or multiple-choice head's `classifier.*` from a
    sequence classifier's."""
    short = _strip_prefix(name)
    own_head = _CLASSIFIER_OF.get(architecture, {})
    if short in own_head:
        return own_head[short]
    if short in _FIXED:
        return _FIXED[short]
    match = _LAYER_RE.match(short)
    if match:
        layer, module, kind = match.groups()
        if module in _LAYER_PARTS:
            return _param_name(f"bert/encoder/layer_{layer}/{_LAYER_PARTS[module]}", kind)
        return None
    match = _MODULE_RE.match(short)
    if match and match.group(1) in _MODULES:
        return _param_name(_MODULES[match.group(1)], match.group(2))
    return None


def tf1_name_to_hf(name: str, *, prefixed: bool) -> tuple[str, bool] | None:
    """(HF name, transpose?) for one TF1 variable name; `prefixed` adds `bert.` to backbone names."""
    match = re.match(r"^bert/encoder/layer_(\d+)/(.+)/(kernel|bias|gamma|beta)$", name)
    if match and match.group(2) in _INVERSE_LAYER_PARTS:
        layer, scope, kind = match.groups()
        hf = f"encoder.layer.{layer}.{_INVERSE_LAYER_PARTS[scope]}.{_HF_KIND[kind]}"
        return (("bert." + hf) if prefixed else hf), kind == "kernel"
    for hf_scope, tf1_scope in _MODULES.items():
        if name.startswith(tf1_scope + "/"):
            kind = name[len(tf1_scope) + 1:]
            if kind in _HF_KIND:
                hf = f"{hf_scope}.{_HF_KIND[kind]}"
                backbone = not hf_scope.startswith("cls.")
                return (("bert." + hf) if prefixed and backbone else hf), kind == "kernel"
    for hf, (tf1, _) in [*_FIXED.items(), *_TOKEN_CLASSIFIER.items(), *_MULTIPLE_CHOICE.items()]:
        if tf1 == name and hf != "cls.predictions.decoder.bias":
            backbone = hf.startswith("embeddings.")
            return (("bert." + hf) if prefixed and backbone else hf), False
    return None


# --------------------------------------------------------------------------- weights

def hf_to_tf1(state_dict: Mapping[str, np.ndarray], *, source: str = "state dict",
              architecture: str | None = None) -> dict[str, np.ndarray]:
    """Convert a Hugging Face BERT state dict (any BertModel/BertFor* variant) to TF1-named arrays;
    `architecture`: config.json's first "architectures" entry (`folder_architecture`).

    Raises HFConversionError naming every tensor that is not part of BERT, and a tied MLM decoder
    weight that differs from the word embeddings (the original always ties them).
    """
    weights: dict[str, np.ndarray] = {}
    unknown, conflicts = [], []
    decoder = None
    for name, value in state_dict.items():
        value = np.asarray(value)
        if _IGNORED_HF.search(name):
            continue
        if _strip_prefix(name) == _TIED_DECODER:
            decoder = (name, value)
            continue
        target = hf_name_to_tf1(name, architecture)
        if target is None:
            unknown.append(name)
            continue
        tf1, transpose = target
        array = np.ascontiguousarray(value.T) if transpose else value
        if tf1 in weights and not np.array_equal(weights[tf1], array):
            conflicts.append(f"{name} differs from another tensor mapped to {tf1}")
        weights[tf1] = array
    if decoder is not None:
        embeddings = weights.get("bert/embeddings/word_embeddings")
        if embeddings is None or not np.array_equal(embeddings, decoder[1]):
            conflicts.append(f"{decoder[0]} is not tied to the word embeddings (the original BERT "
                             "always ties the MLM decoder to them)")
    if unknown or conflicts:
        lines = [f"cannot convert {source} to the original BERT layout:"]
        if unknown:
            lines.append("  unknown tensors: " + ", ".join(sorted(unknown)))
        lines += ["  " + c for c in conflicts]
        raise HFConversionError("\n".join(lines))
    return weights


def infer_hf_architecture(weights: Mapping[str, np.ndarray]) -> str:
    """The transformers class whose state dict layout matches these TF1-named weights."""
    has_mlm = "cls/predictions/output_bias" in weights
    has_nsp = "cls/seq_relationship/output_weights" in weights
    if has_mlm and has_nsp:
        return "BertForPreTraining"
    if has_mlm:
        return "BertForMaskedLM"
    if has_nsp:
        return "BertForNextSentencePrediction"
    if "output_weights" in weights:
        return "BertForSequenceClassification"
    if "cls/squad/output_weights" in weights:
        return "BertForQuestionAnswering"
    if "cls/token_classification/output_weights" in weights:
        return TOKEN_CLASSIFICATION
    if "cls/multiple_choice/output_weights" in weights:
        return MULTIPLE_CHOICE
    return "BertModel"


def tf1_to_hf(weights: Mapping[str, np.ndarray], *, prefixed: bool | None = None,
              source: str = "checkpoint") -> dict[str, np.ndarray]:
    """Convert TF1-named arrays to a Hugging Face state dict (decoder weight left tied, not duplicated).

    `prefixed` (default: whenever a head is present) puts backbone tensors under `bert.`, as every
    BertFor* class does; a bare BertModel has no prefix. Optimizer slots and global_step are dropped.
    """
    if prefixed is None:
        prefixed = infer_hf_architecture(weights) != "BertModel"
    state: dict[str, np.ndarray] = {}
    unknown = []
    for name, value in weights.items():
        if _IGNORED_TF1.search(name):
            continue
        target = tf1_name_to_hf(name, prefixed=prefixed)
        if target is None:
            unknown.append(name)
            continue
        hf, transpose = target
        value = np.asarray(value)
        state[hf] = np.ascontiguousarray(value.T) if transpose else value
    if unknown:
        raise HFConversionError(f"cannot convert {source} to Hugging Face names: unknown variables "
                                + ", ".join(sorted(unknown)))
    return state


# --------------------------------------------------------------------------- config

def head_labels(weights: Mapping[str, np.ndarray], names: list[str] | None = None) -> list[str] | None:
    """The output names of a sequence or token classifier head (`names`, else LABEL_0..), None without one."""
    for head in ("output_weights", "cls/token_classification/output_weights"):
        if head in weights:
            count = int(np.shape(weights[head])[0])
            if names is not None and len(names) != count:
                raise HFConversionError(f"{len(names)} label names for the {count} outputs of {head}")
            return list(names) if names is not None else [f"LABEL_{i}" for i in range(count)]
    return None


# --------------------------------------------------------------------------- files

def read_hf_state_dict(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Tensors of a Hugging Face model folder (or one weights file or shard index) as numpy arrays.

    Reads `model.safetensors`, `pytorch_model.bin` (through the restricted reader of
    bert_tf.checkpoints.torch_bin, never torch.load) or the shards of a `*.index.json`
    (bert_tf.checkpoints.weight_files). This is where every Hugging Face weight enters bert_tf (the
    converter and --init_checkpoint both read through it), so each tensor that maps to a BERT weight
    is checked here, in one line naming its file: floating point, finite and, when config.json lies
    beside the weights, of the shape it implies (encoder layers beyond its num_hidden_layers
    included). Buffers such as `position_ids` (int64) are returned unchecked.
    """
    shapes = _config_shapes(path)
    state: dict[str, np.ndarray] = {}
    for file, tensors in read_weight_files(path):
        for name, value in tensors.items():
            target = _weight_target(name)
            if target is not None:
                check_weight_values(file, name, value)
                if shapes is not None:
                    _check_shape(file, name, value, target, *shapes)
            state[name] = value
    return state


def _weight_target(name: str) -> tuple[str, bool] | None:
    """(TF1 name, transpose?) of a tensor loaded as a BERT weight (the tied decoder is the embeddings)."""
    if _strip_prefix(name) == _TIED_DECODER:
        return "bert/embeddings/word_embeddings", False
    return hf_name_to_tf1(name)


def _config_shapes(path: str | os.PathLike) -> tuple[dict[str, tuple], str] | None:
    """TF1 name -> shape (None: any size) of every weight the config.json beside `path` implies,
    and that config's path; None without a config.json."""
    folder = os.fspath(path) if os.path.isdir(path) else os.path.dirname(os.fspath(path))
    if not os.path.isfile(os.path.join(folder, "config.json")):
        return None
    config_path, config = _config_json(folder)
    sizes = {}
    for key in _SIZE_KEYS:
        value = config.get(key) if isinstance(config, dict) else None
        if type(value) is not int or value <= 0:
            raise HFConversionError(f"{config_path}: {key} is {value!r}, not a positive integer")
        sizes[key] = value
    return {**expected_shapes(sizes), **_head_shapes(sizes["hidden_size"], sizes["vocab_size"])}, config_path


def _head_shapes(h: int, vocab: int) -> dict[str, tuple]:
    """TF1 name -> shape of each head weight; None where the number of labels decides."""
    shapes: dict[str, tuple] = {"cls/predictions/output_bias": (vocab,),
                                "cls/predictions/transform/dense/kernel": (h, h),
                                "cls/predictions/transform/dense/bias": (h,),
                                "cls/predictions/transform/LayerNorm/gamma": (h,),
                                "cls/predictions/transform/LayerNorm/beta": (h,)}
    for scope, outputs in (("cls/seq_relationship/", 2), ("cls/squad/", 2), ("", None),
                           ("cls/token_classification/", None)):
        shapes[scope + "output_weights"], shapes[scope + "output_bias"] = (outputs, h), (outputs,)
    return shapes


def _check_shape(file: str, name: str, value: np.ndarray, target: tuple[str, bool],
                 shapes: Mapping[str, tuple], config_path: str) -> None:
    tf1, transpose = target
    if tf1 not in shapes:  # only encoder layers are open-ended
        raise HFConversionError(f"{file}: tensor {name} is beyond the num_hidden_layers of {config_path}")
    want = shapes[tf1][::-1] if transpose else shapes[tf1]
    if len(want) != value.ndim or any(w is not None and w != n for w, n in zip(want, value.shape)):
        shown = ", ".join("any" if w is None else str(w) for w in want)
        raise HFConversionError(f"{file}: tensor {name} has shape {list(value.shape)}, {config_path} "
                                f"implies [{shown}]")


def read_hf_config(folder: str | os.PathLike) -> dict:
    """The folder's config.json translated to an original bert_config.json dict."""
    path, data = _config_json(folder)
    return hf_config_to_original(data, source=path)


def folder_architecture(folder: str | os.PathLike) -> str | None:
    """The transformers class a folder's config.json names first (None when it names none)."""
    architectures = _config_json(folder)[1].get("architectures") or [None]
    return architectures[0]


def folder_labels(folder: str | os.PathLike) -> list[str] | None:
    """A classifier's label names from config.json's id2label (None when it has none)."""
    id2label = _config_json(folder)[1].get("id2label")
    if not id2label:
        return None
    try:
        return [id2label[str(i)] for i in range(len(id2label))]
    except KeyError:
        raise HFConversionError(f"{os.path.join(os.fspath(folder), 'config.json')}: id2label keys are not "
                                f"0..{len(id2label) - 1}") from None


def _config_json(folder: str | os.PathLike) -> tuple[str, dict]:
    path = os.path.join(os.fspath(folder), "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            return path, json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise HFConversionError(f"{path}: cannot read config ({e})") from None


def expected_shapes(config: Mapping) -> dict[str, tuple[int, ...]]:
    """TF1 name -> shape of every encoder (bert/*) variable an original-format config implies."""
    h, i = int(config["hidden_size"]), int(config["intermediate_size"])
    shapes = {"bert/embeddings/word_embeddings": (int(config["vocab_size"]), h),
              "bert/embeddings/position_embeddings": (int(config["max_position_embeddings"]), h),
              "bert/embeddings/token_type_embeddings": (int(config["type_vocab_size"]), h),
              "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,),
              "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,)}
    dense = {"attention/self/query": (h, h), "attention/self/key": (h, h),
             "attention/self/value": (h, h), "attention/output/dense": (h, h),
             "intermediate/dense": (h, i), "output/dense": (i, h)}
    for layer in range(int(config["num_hidden_layers"])):
        scope = f"bert/encoder/layer_{layer}/"
        for name, shape in dense.items():
            shapes[scope + name + "/kernel"], shapes[scope + name + "/bias"] = shape, shape[1:]
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[scope + norm + "/gamma"] = shapes[scope + norm + "/beta"] = (h,)
    return shapes


def check_against_config(weights: Mapping[str, np.ndarray], config: Mapping, *,
                         source: str = "weights") -> list[str]:
    """HFConversionError naming missing / shape-mismatched encoder variables (heads not checked).

    The pooler may be absent (BertForMaskedLM has none): its names are returned, not refused.
    """
    expected = expected_shapes(config)
    absent = sorted(n for n in expected if n not in weights)
    missing = [n for n in absent if not n.startswith("bert/pooler/")]
    extra = sorted(n for n in weights if n.startswith("bert/") and n not in expected)
    wrong = [f"{n}: config {list(s)}, weights {list(np.shape(weights[n]))}"
             for n, s in sorted(expected.items()) if n in weights and tuple(np.shape(weights[n])) != s]
    if missing or extra or wrong:
        lines = [f"{source} does not match its config:"]
        if missing:
            lines.append("  missing: " + ", ".join(missing))
        if extra:
            lines.append("  not in the config: " + ", ".join(extra))
        lines += ["  shape mismatch: " + w for w in wrong]
        raise HFConversionError("\n".join(lines))
    return [n for n in absent if n.startswith("bert/pooler/")]
