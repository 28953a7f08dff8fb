"""Exact (erf) GELU: training-step and inference throughput of the MiniLM-L6-H384 shape, one process per measurement.

The model is run_classifier's (BertClassifierModel, 2 labels) with MiniLM-L6-H384's sizes (L=6, H=384, A=12, I=1536,
vocab 30522, hidden_act gelu_exact) and random weights; batch 32 x seq 128 of random ids, an eighth of them padding
in half the rows. Training step = forward with dropout, cross-entropy, gradients, clipping to global norm 1 and
AdamWeightDecay (run_classifier's step); forward = inference. Variants, i.e. how `gelu_exact` is computed:

    fused      bert_tf's `gelu_exact` as it stands (the BertGeluErf kernels where training in float32 on CPU)
    composite  0.5x(1 + erf(x/sqrt 2)) in TensorFlow ops (bert_tf's formula before the kernel)
    nn_gelu    tf.nn.gelu(x, approximate=False), i.e. 0.5x erfc(-x/sqrt 2)

Rounds alternate the variants (A B A B ...), each measurement a fresh process with TensorFlow's thread defaults:
`--warmup` untimed then `--steps` timed steps. A process's figure is batch / its median step time (a busy moment
of the shared machine lengthens a few steps, not the median; the mean is printed beside it); the summary gives the
median and the best of the processes' figures per variant.

    python bench/bench_gelu.py --phase train --variants fused,composite --rounds 3
    python bench/bench_gelu.py --phase forward --variants composite,nn_gelu --rounds 3
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("fused", "composite", "nn_gelu")


def _patch_gelu_exact(variant: str) -> None:
    """Makes `hidden_act: gelu_exact` build `variant`'s formula (models built afterwards only)."""
    import tensorflow as tf
    from bert_tf.model import activations

    formulas = {"composite": lambda x: 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0))),
                "nn_gelu": lambda x: tf.nn.gelu(x, approximate=False)}
    if variant in formulas:
        activations._ACTIVATIONS["gelu_exact"] = formulas[variant]


def measure(variant: str, phase: str, batch_size: int, seq_len: int, warmup: int, steps: int) -> list[float]:
    """Seconds of each of `steps` timed steps of `phase` after `warmup` untimed ones, in this process."""
    import numpy as np
    import tensorflow as tf
    from bert_tf.model.configs import BertConfig
    from bert_tf.model.heads import BertClassifierModel
    from bert_tf.training.optimization import AdamWeightDecay

    _patch_gelu_exact(variant)
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, hidden_act="gelu_exact", type_vocab_size=2)
    model = BertClassifierModel(config, num_labels=2)
    rng = np.random.default_rng(0)
    mask = np.ones((batch_size, seq_len), np.int32)
    mask[: batch_size // 2, seq_len - seq_len // 8:] = 0
    batch = {"input_ids": tf.constant(rng.integers(0, 30522, (batch_size, seq_len), dtype=np.int32)),
             "input_mask": tf.constant(mask), "segment_ids": tf.zeros((batch_size, seq_len), tf.int32)}
    labels = tf.constant(rng.integers(0, 2, batch_size, dtype=np.int32))
    optimizer = AdamWeightDecay(learning_rate=2e-5, weight_decay_rate=0.01)
    optimizer.build(model.trainable_variables)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, model.trainable_variables), 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def forward():
        return model(batch, training=False)["logits"]

    step = train_step if phase == "train" else forward
    for _ in range(warmup):
        step().numpy()
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step().numpy()
        seconds.append(time.perf_counter() - start)
    return seconds


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def drive(args: argparse.Namespace) -> None:
    """Runs `--rounds` rounds of one fresh process per variant and prints each figure and the medians."""
    results: dict[str, list[float]] = {v: [] for v in args.variants}
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    for round_ in range(args.rounds):
        for variant in args.variants:
            load_before = _load()
            command = [sys.executable, os.path.abspath(__file__), "--worker", variant, "--phase", args.phase,
                       "--batch_size", str(args.batch_size), "--seq_len", str(args.seq_len),
                       "--warmup", str(args.warmup), "--steps", str(args.steps)]
            out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
            seconds = json.loads(out.strip().splitlines()[-1])["step_seconds"]
            value = args.batch_size / statistics.median(seconds)
            results[variant].append(value)
            print(f"round {round_ + 1} {args.phase} {variant}: {value:.2f} examples/s at the median step "
                  f"({args.batch_size / statistics.mean(seconds):.2f} at the mean; load {load_before}->{_load()})",
                  flush=True)
    for variant, values in results.items():
        print(f"{args.phase} {variant}: median {statistics.median(values):.2f}, best {max(values):.2f} examples/s "
              f"({', '.join(f'{v:.2f}' for v in values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--phase", choices=("train", "forward"), default="train")
    parser.add_argument("--variants", type=lambda s: s.split(","), default=["fused", "composite"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--worker", choices=VARIANTS, help="(internal) measure this variant in this process")
    args = parser.parse_args()
    if args.worker:
        seconds = measure(args.worker, args.phase, args.batch_size, args.seq_len, args.warmup, args.steps)
        print(json.dumps({"step_seconds": seconds}))
        return
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    drive(args)


if __name__ == "__main__":
    main()
