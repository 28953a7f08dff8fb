"""extract_features: per-token hidden states of chosen encoder layers, as the original wrote them.

Same semantics as the original release's `extract_features.py`: one example per input line,
`A ||| B` is a sentence pair, `[CLS] A [SEP] (B [SEP])` truncated the original's way (the longer
side loses its last token first), padded to `max_seq_length`; the output is JSON lines with the
original's keys, `linex_index` spelling included, and values rounded to 6 decimals by Python's
`round` exactly like the original.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from typing import Iterable, Iterator, Sequence

import numpy as np

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.model import custom_ops
from bert_tf.text import tokenization
from bert_tf.text.packing import pack
from bert_tf.data.atomic_io import atomic_write

_PAIR_RE = re.compile(r"^(.*) \|\|\| (.*)$")


class FeatureExtractionError(BertTfError, ValueError):
    """A bad --layers, --input_file, --max_seq_length or --batch_size; the message names it."""


@dataclasses.dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str | None = None


@dataclasses.dataclass
class InputFeatures:
    unique_id: int
    tokens: list[str]
    input_ids: list[int]
    input_mask: list[int]
    input_type_ids: list[int]


def parse_layers(layers: str) -> list[int]:
    """'-1,-2,-3,-4' -> [-1, -2, -3, -4]; ValueError naming the flag on bad input."""
    try:
        return [int(x) for x in layers.split(",")]
    except ValueError:
        raise FeatureExtractionError(f"--layers must be comma-separated integers, got {layers!r}") from None


def read_examples(input_file: str | os.PathLike) -> list[InputExample]:
    """One example per line (stripped); a line `A ||| B` is a pair. unique_id = line number."""
    try:
        with open(input_file, "rb") as f:
            lines = [tokenization.convert_to_unicode(line) for line in f]
    except OSError as e:
        raise FeatureExtractionError(f"--input_file {os.fspath(input_file)}: cannot read ({e.strerror})") from None
    examples = []
    for unique_id, line in enumerate(lines):
        line = line.strip()
        match = _PAIR_RE.match(line)
        if match is None:
            examples.append(InputExample(unique_id, line))
        else:
            examples.append(InputExample(unique_id, match.group(1), match.group(2)))
    return examples


def validate_layer_indexes(layer_indexes: Sequence[int], num_layers: int) -> None:
    """Python-style indexes into the encoder layers, like the original's `all_layers[i]`."""
    bad = [i for i in layer_indexes if not -num_layers <= i < num_layers]
    if bad:
        raise FeatureExtractionError(f"--layers {bad} out of range for a model with {num_layers} layers")


def convert_example(example: InputExample, seq_length: int,
                    tokenizer: tokenization.FullTokenizer) -> InputFeatures:
    """Tokenize, truncate, add [CLS]/[SEP], segment ids and zero padding for one example."""
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    packed = pack(tokenizer.tokenize(example.text_a), tokens_b, seq_length, tokenizer)
    return InputFeatures(example.unique_id, packed.tokens, packed.input_ids, packed.input_mask,
                         packed.segment_ids)


def convert_examples_to_features(examples: Iterable[InputExample], seq_length: int,
                                 tokenizer: tokenization.FullTokenizer) -> list[InputFeatures]:
    """The original's convert_examples_to_features (without its log lines)."""
    if seq_length < 3:
        raise FeatureExtractionError(f"--max_seq_length must be at least 3, got {seq_length}")
    return [convert_example(example, seq_length, tokenizer) for example in examples]


def _batches(features: Sequence[InputFeatures], batch_size: int) -> Iterator[Sequence[InputFeatures]]:
    for start in range(0, len(features), batch_size):
        yield features[start:start + batch_size]


def extract_layers(model, features: Sequence[InputFeatures], layer_indexes: Sequence[int],
                   batch_size: int = 32) -> Iterator[tuple[InputFeatures, list[np.ndarray]]]:
    """Yield (feature, [layer output [num_tokens, hidden] for each layer index]) in input order.

    Every batch is padded to `batch_size` rows so one traced graph serves the whole file.
    """
    if batch_size < 1:
        raise FeatureExtractionError(f"--batch_size must be positive, got {batch_size}")

    @tf.function(reduce_retracing=True)
    def run(inputs):
        with custom_ops.program_inference():
            layers = model(inputs, training=False)["encoder_outputs"]
        return [layers[i] for i in layer_indexes]

    for batch in _batches(features, batch_size):
        rows = list(batch) + [batch[-1]] * (batch_size - len(batch))
        inputs = {
            "input_ids": tf.constant([f.input_ids for f in rows], tf.int32),
            "input_mask": tf.constant([f.input_mask for f in rows], tf.int32),
            "segment_ids": tf.constant([f.input_type_ids for f in rows], tf.int32),
        }
        outputs = [o.numpy() for o in run(inputs)]
        for row, feature in enumerate(batch):
            n = len(feature.tokens)
            yield feature, [o[row, :n] for o in outputs]


def round6(values: np.ndarray) -> np.ndarray:
    """Python's `round(float(x), 6)` for every element, vectorized, bit-identical.

    rint(x * 1e6) / 1e6 is the correctly rounded result unless x * 1e6 lands within float error
    of a .5 tie (or is too large to be exact); those few elements go through Python's round.
    """
    v = np.asarray(values, dtype=np.float64)
    scaled = v * 1e6
    out = np.rint(scaled) / 1e6
    with np.errstate(invalid="ignore"):  # inf/nan fall in `unsure` and go through round()
        unsure = (np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-6) | ~(np.abs(scaled) < 2.0**50)
    for index in zip(*np.nonzero(unsure)):
        out[index] = round(float(v[index]), 6)
    return out


def feature_json(feature: InputFeatures, layer_indexes: Sequence[int],
                 layer_outputs: Sequence[np.ndarray]) -> str:
    """One output line: the original's key order, `linex_index`, values round(float(x), 6)."""
    per_layer = [round6(o).tolist() for o in layer_outputs]
    tokens = []
    for i, token in enumerate(feature.tokens):
        layers = [collections.OrderedDict(index=index, values=values[i])
                  for index, values in zip(layer_indexes, per_layer)]
        tokens.append(collections.OrderedDict(token=token, layers=layers))
    return json.dumps(collections.OrderedDict(linex_index=feature.unique_id, features=tokens), allow_nan=False)


def check_finite(feature: InputFeatures, layer_indexes: Sequence[int], layer_outputs: Sequence[np.ndarray],
                 input_file: str = "--input_file") -> None:
    """FeatureExtractionError naming the input line and layer when an output holds NaN or infinity.

    JSON has neither (the original wrote `NaN`, which JSON readers refuse); such values come from
    broken weights, so the run stops instead of writing them.
    """
    for index, values in zip(layer_indexes, layer_outputs):
        if not np.isfinite(values).all():
            bad = "NaN" if np.isnan(values).any() else "infinity"
            raise FeatureExtractionError(
                f"{input_file}:{feature.unique_id + 1}: layer {index} of the model's output holds {bad}, which "
                "JSON cannot hold; are the weights of --init_checkpoint sound?")


def write_features_json(output_file: str | os.PathLike,
                        results: Iterable[tuple[InputFeatures, list[np.ndarray]]],
                        layer_indexes: Sequence[int], input_file: str = "--input_file") -> int:
    """Write JSON lines to a temporary file beside `output_file`, then rename; returns the count.

    Nothing is written when an output holds NaN or infinity (`check_finite`; `input_file` names the
    input in that error)."""
    count = 0
    with atomic_write(output_file) as writer:
        for feature, outputs in results:
            check_finite(feature, layer_indexes, outputs, input_file)
            writer.write(feature_json(feature, layer_indexes, outputs) + "\n")
            count += 1
    return count
