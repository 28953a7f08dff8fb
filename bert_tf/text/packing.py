"""One or two token sequences packed into BERT's fixed-length input, as every original script did.

    [CLS] A [SEP]            segment ids 0...
    [CLS] A [SEP] B [SEP]    segment ids 0... then 1... for B and its [SEP]

then zero padding to `seq_length`. The original copied `_truncate_seq_pair` and this packing into
run_classifier.py, extract_features.py and run_squad.py; here they are written once.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from bert_tf.options import OptionError


@dataclasses.dataclass(frozen=True)
class PackedInput:
    """The packed tokens and the model's three int inputs (padded to the sequence length)."""

    tokens: list[str]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]


def truncate_seq_pair(tokens_a: list[str], tokens_b: list[str], max_length: int) -> None:
    """Truncate in place, one token at a time from the longer side (from `tokens_b` on ties)."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack(tokens_a: Sequence[str], tokens_b: Sequence[str] | None, seq_length: int, tokenizer) -> PackedInput:
    """Truncates (pairs: the longer side first; singles: the end), adds [CLS]/[SEP], segment ids, padding.

    `tokenizer` converts tokens to ids (`convert_tokens_to_ids`). The inputs are not modified.
    """
    if seq_length < 3:
        raise OptionError(f"--max_seq_length must be at least 3, got {seq_length}")
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else None
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)
    elif len(tokens_a) > seq_length - 2:
        tokens_a = tokens_a[:seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    padding = [0] * (seq_length - len(input_ids))
    return PackedInput(tokens, input_ids + padding, [1] * len(input_ids) + padding, segment_ids + padding)
