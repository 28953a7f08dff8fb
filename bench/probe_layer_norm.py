"""LayerNorm in TensorFlow ops: the original's arithmetic against a centred form, for speed and agreement (issue #18).

The original (tf.nn.moments + tf.nn.batch_normalization, kept by bert_tf.model.layers.LayerNorm) evaluates
    x * (gamma * rsqrt(var + eps)) + (beta - mean * gamma * rsqrt(var + eps))
and the centred form, the same function up to round-off and the same variance bit for bit,
    (x - mean) * (gamma * rsqrt(var + eps)) + beta.
This times 12 chained normalisations of each in a tf.function (one fresh process per form and round, TensorFlow's
default threads), at BERT-Base's batch-32 shape and MiniLM's batch-1 short-input shape, and reports each form's
largest distance from a float64 evaluation and between its eager and graph (grappler-optimised) outputs, which is
what a SavedModel runs against what the Python model computes eagerly.

    python bench/probe_layer_norm.py --rounds=2
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._report import comma_list  # noqa: E402
from bench._shapes import alternating_processes, time_steps  # noqa: E402

FORMS = ("original", "centred")
SHAPES = {"bert_base_b32": (32, 128, 768), "minilm_b1_short": (1, 25, 384)}
EPSILON = 1e-12
CHAIN = 12


def layer_norm(form: str, x, gamma, beta):
    import tensorflow as tf

    if form == "original":
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, EPSILON)
    centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True)
    return centred * (tf.math.rsqrt(variance + EPSILON) * gamma) + beta


def measure(form: str, shape: str, calls: int) -> dict:
    """ms per normalisation, and the largest float32 distances (from float64; eager vs graph) of one of them."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    dims = SHAPES[shape]
    x = (rng.standard_normal(dims) * 3 + 1).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, dims[-1]).astype(np.float32)
    beta = rng.standard_normal(dims[-1]).astype(np.float32)
    weights = [tf.Variable(gamma), tf.Variable(beta)]

    @tf.function
    def chain(t):
        for _ in range(CHAIN):
            t = layer_norm(form, t, *weights)
        return t

    once = tf.function(lambda t: layer_norm(form, t, *weights))
    graph, eager = once(tf.constant(x)).numpy(), layer_norm(form, tf.constant(x), *weights).numpy()
    exact = layer_norm("original", *(tf.constant(v.astype(np.float64)) for v in (x, gamma, beta))).numpy()
    seconds = time_steps(lambda: chain(tf.constant(x)).numpy(), calls, warmup=5)
    return {"ms": statistics.median(seconds) * 1e3 / CHAIN, "vs_float64": float(np.abs(graph - exact).max()),
            "eager_vs_graph": float(np.abs(graph - eager).max())}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--calls", type=int, default=60)
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child, args.calls)))
        return
    for shape in comma_list(args.shapes):
        runs = alternating_processes(__file__, FORMS, args.rounds,
                                     lambda form: [form, shape, "--calls", str(args.calls)])
        for form, results in runs.items():
            ms = [r["ms"] for r in results]
            print(f"{shape} {form}: {statistics.median(ms):.3f} ms per LayerNorm "
                  f"({', '.join(f'{v:.3f}' for v in ms)}); max |y - float64| {results[0]['vs_float64']:.2e}; "
                  f"max |eager - graph| {results[0]['eager_vs_graph']:.2e}", flush=True)


if __name__ == "__main__":
    main()
