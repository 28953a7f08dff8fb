"""Shapes, configs, synthetic batches, FLOP counts and step timing shared by the model benchmark's processes.

Imports neither TensorFlow nor torch, so a process that times one library loads only that library. Every model is
wrapped in a `Runner`: one call of `forward()` or `train_step()` processes one full batch and returns only when the
work is done, so wall-clock time per call is the step time.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Dims:
    """BERT architecture sizes."""
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position: int = 512
    type_vocab_size: int = 2


@dataclasses.dataclass(frozen=True)
class Shape:
    """Batch shape of one pre-training step."""
    batch_size: int
    seq_len: int
    num_masked: int


@dataclasses.dataclass
class Runner:
    """One model ready to time: forward = inference (no dropout, heads included); train_step = full update."""
    name: str
    forward: Callable[[], object]
    train_step: Callable[[], object]
    forward_flops_per_seq: float
    note: str = ""


LEARNING_RATE = 1e-4
WEIGHT_DECAY = 0.01

CONFIGS = {
    "small": Dims(vocab_size=30522, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024),
    "base": Dims(vocab_size=30522, hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
    "tiny": Dims(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128, max_position=64),
}


def make_batch(dims: Dims, shape: Shape, seed: int = 0) -> dict[str, np.ndarray]:
    """Random pre-training batch in the original BERT feature layout (int32; weights float32)."""
    rng = np.random.default_rng(seed)
    b, t, p = shape.batch_size, shape.seq_len, shape.num_masked
    input_mask = np.ones((b, t), np.int32)
    input_mask[: b // 2, t - t // 8:] = 0  # some padding, as in real data
    segment_ids = np.zeros((b, t), np.int32)
    segment_ids[:, t // 2:] = 1
    positions = np.stack([np.sort(rng.choice(np.arange(1, t - t // 8), p, replace=False)) for _ in range(b)])
    return {
        "input_ids": rng.integers(0, dims.vocab_size, (b, t), dtype=np.int32),
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(0, dims.vocab_size, (b, p), dtype=np.int32),
        "masked_lm_weights": np.ones((b, p), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (b,), dtype=np.int32),
    }


def forward_flops_per_seq(dims: Dims, shape: Shape, mlm_positions: int | None = None) -> float:
    """Analytic multiply-add FLOPs (2 per MAC) of one BERT pre-training forward pass, per sequence.

    Embedding lookups, softmax, layer norm and element-wise work are not counted. `mlm_positions` is how many
    positions the MLM head runs on (default: the gathered masked positions; the stock HF head uses all of them).
    """
    t, h, i = shape.seq_len, dims.hidden_size, dims.intermediate_size
    per_layer = 2 * t * h * (4 * h + 2 * i) + 2 * 2 * t * t * h  # QKV + output + FFN; scores + context
    positions = shape.num_masked if mlm_positions is None else mlm_positions
    mlm = 2 * positions * h * (h + dims.vocab_size)  # transform dense + tied vocabulary projection
    pooler_and_nsp = 2 * h * h + 2 * h * 2
    return float(dims.num_layers * per_layer + pooler_and_nsp + mlm)


def time_steps(fn: Callable[[], object], steps: int, warmup: int) -> list[float]:
    """Seconds of each of `steps` timed calls of `fn`, after `warmup` untimed calls (tracing, caches)."""
    for _ in range(warmup):
        fn()
    result = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        result.append(time.perf_counter() - start)
    return result
