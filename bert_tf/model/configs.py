"""BertConfig: the model hyper-parameters, read from and written to `bert_config.json`.

Same keys and defaults as the original `modeling.BertConfig`, plus one optional key of ours:
`causal_attention` (default false: the original's bidirectional encoder; true: each position attends
only to itself and the positions before it, the paper's "LTR & No NSP" ablation). It is written only
when true, so a config without it reads and writes exactly as the original's (the original's
`BertConfig.from_dict` keeps an unknown key as an attribute and ignores it). Unlike the original, values are
type-checked when read and `validate()` catches the mistakes the original let through silently
(a vocab file longer than `vocab_size` gave NaN losses; a sequence longer than the position
table failed deep inside TensorFlow).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

from bert_tf.errors import BertTfError
from bert_tf.data.atomic_io import atomic_write
from bert_tf.model.activations import KNOWN_ACTIVATIONS
from bert_tf.model.hf_config import hf_config_to_original


class ConfigError(BertTfError, ValueError):
    """A bert_config.json (or dict) that cannot describe a valid BERT model."""


_INT_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size")
_FLOAT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


@dataclasses.dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder (the original's `bert_config.json` keys)."""

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    causal_attention: bool = False
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<dict>") -> "BertConfig":
        """Builds a config from a json-style dict; unknown keys are kept in `extra`."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"{source}: expected a JSON object, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        if "vocab_size" not in d:
            raise ConfigError(f"{source}: missing required key 'vocab_size'")
        kwargs: dict[str, Any] = {}
        for key in known:
            if key not in d:
                continue
            kwargs[key] = _checked_value(key, d[key], source)
        extra = {k: v for k, v in d.items() if k not in known}
        config = cls(**kwargs, extra=dict(extra))
        config._check_consistency(source)
        return config

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads a `bert_config.json` (or a Hugging Face BERT `config.json`, translated: its "gelu" is
        the exact erf form); errors name the file and the key."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e})") from None
        if isinstance(data, dict) and _is_hugging_face_config(data, path):
            data = hf_config_to_original(data, source=path)
        return cls.from_dict(data, source=path)

    def to_dict(self) -> dict[str, Any]:
        """The json dict, unknown keys from the source included (written back unchanged)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        if not self.causal_attention:  # the original's keys only, unless the model is left-to-right
            del d["causal_attention"]
        for k, v in self.extra.items():
            d.setdefault(k, v)
        return d

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes the json to a temporary name in the same folder, then renames it."""
        with atomic_write(path) as f:
            f.write(self.to_json_string())

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def validate(self, vocab_file: str | os.PathLike | None = None,
                 max_seq_length: int | None = None, source: str = "bert_config") -> None:
        """Checks the config against a vocab file and a sequence length; raises ConfigError."""
        self._check_consistency(source)
        if vocab_file is not None:
            vocab_file = os.fspath(vocab_file)
            try:
                with open(vocab_file, encoding="utf-8") as f:
                    n = sum(1 for line in f if line.strip())
            except OSError as e:
                raise ConfigError(f"{vocab_file}: cannot read vocab file ({e})") from None
            if n > self.vocab_size:
                raise ConfigError(
                    f"{vocab_file}: vocab file has {n} tokens but {source} 'vocab_size' is "
                    f"{self.vocab_size}; token ids >= vocab_size would index past the embedding "
                    f"table (the original silently produced NaN)")
        if max_seq_length is not None and max_seq_length > self.max_position_embeddings:
            raise ConfigError(
                f"--max_seq_length={max_seq_length} is longer than the model's positions: {source} "
                f"'max_position_embeddings' is {self.max_position_embeddings}")

    def _check_consistency(self, source: str) -> None:
        for key in _INT_KEYS:
            _checked_value(key, getattr(self, key), source)
            if getattr(self, key) <= 0:
                raise ConfigError(f"{source}: '{key}' must be positive, got {getattr(self, key)}")
        for key in (*_FLOAT_KEYS, "hidden_act", "causal_attention"):
            _checked_value(key, getattr(self, key), source)
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ConfigError(f"{source}: '{key}' must be in [0, 1), got {getattr(self, key)}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"{source}: 'hidden_size' ({self.hidden_size}) is not a multiple of "
                f"'num_attention_heads' ({self.num_attention_heads})")
        if self.hidden_act.lower() not in KNOWN_ACTIVATIONS:
            raise ConfigError(
                f"{source}: unknown 'hidden_act' {self.hidden_act!r}; known: "
                f"{', '.join(sorted(KNOWN_ACTIVATIONS))}")


def _checked_value(key: str, value: Any, source: str) -> Any:
    """Type-checks one known key: ints must be ints, floats numbers, hidden_act a string, causal_attention a bool."""
    if key in _INT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{source}: '{key}' must be an integer, got {value!r}")
        return value
    if key in _FLOAT_KEYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: '{key}' must be a number, got {value!r}")
        return float(value)
    if key == "causal_attention":
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: 'causal_attention' must be true or false, got {value!r}")
        return value
    if key == "hidden_act":
        if not isinstance(value, str):
            raise ConfigError(f"{source}: 'hidden_act' must be a string, got {value!r}")
        return value
    return value


def _is_hugging_face_config(data: Mapping[str, Any], path: str) -> bool:
    """A config written by transformers (its version stamp), or a `config.json` naming a model_type;
    a `bert_config.json` is the original's format even with extra keys."""
    return "transformers_version" in data or ("model_type" in data and os.path.basename(path) == "config.json")
