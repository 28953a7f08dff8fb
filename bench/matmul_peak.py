"""Float32 matmul GFLOP/s of one library at BERT's own GEMM shapes, in a process of its own.

The shapes are the dense layers of one pre-training forward at batch B x T tokens and P masked positions:
[B*T,H]x[H,H] (Q, K, V, attention output), [B*T,H]x[H,I] (FFN in), [B*T,I]x[I,H] (FFN out) and [B*P,H]x[H,V]
(tied vocabulary projection). Each library runs alone in its process with its own thread defaults, so no other
library's spinning thread pool competes with it. Prints one `RESULT {json}` line for the driver (bench_model.py).

    python bench/matmul_peak.py --library numpy --configs small,base
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench._shapes import CONFIGS, Dims, Shape  # noqa: E402

LIBRARIES = ("tensorflow", "numpy", "torch")


def gemm_shapes(dims: Dims, shape: Shape) -> dict[str, tuple[int, int, int, int]]:
    """name -> (m, k, n, calls per forward) of the dense matmuls of one BERT pre-training forward."""
    tokens, masked = shape.batch_size * shape.seq_len, shape.batch_size * shape.num_masked
    h, i, v, layers = dims.hidden_size, dims.intermediate_size, dims.vocab_size, dims.num_layers
    return {f"[{tokens},{h}]x[{h},{h}]": (tokens, h, h, 4 * layers),
            f"[{tokens},{h}]x[{h},{i}]": (tokens, h, i, layers),
            f"[{tokens},{i}]x[{i},{h}]": (tokens, i, h, layers),
            f"[{masked},{h}]x[{h},{v}]": (masked, h, v, 1)}


def matmul_fn(library: str, a: np.ndarray, b: np.ndarray) -> tuple[Callable[[], object], str]:
    """A call that multiplies a by b in `library` and returns when done, and the library's thread setting."""
    if library == "numpy":
        return (lambda: a @ b), "OpenBLAS default (all cores)"
    if library == "torch":
        import torch
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return (lambda: torch.mm(ta, tb)), f"torch default, {torch.get_num_threads()} threads"
    from bert_tf._env import tf  # TensorFlow, imported quietly
    ta, tb = tf.constant(a), tf.constant(b)
    fn = tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)[0, :1]))
    return (lambda: fn(ta, tb).numpy()), "TensorFlow default (intra-op = all cores)"


def best_seconds(fn: Callable[[], object], repeats: int, min_seconds: float) -> float:
    """Best per-call time over `repeats` timed rounds of at least `min_seconds` each, after one warm-up call."""
    fn()
    calls, best = 1, float("inf")
    start = time.perf_counter()
    fn()
    calls = max(1, int(min_seconds / max(time.perf_counter() - start, 1e-6)))
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def measure(library: str, config_names: list[str], shape: Shape, repeats: int, min_seconds: float) -> dict:
    """Per config: GFLOP/s per GEMM shape and over one forward's mix of them (total FLOPs / total time)."""
    rng = np.random.default_rng(0)
    result: dict = {"library": library, "configs": {}}
    for name in config_names:
        per_shape, flops, seconds = {}, 0.0, 0.0
        for label, (m, k, n, calls) in gemm_shapes(CONFIGS[name], shape).items():
            a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
            fn, threads = matmul_fn(library, a, b)
            s = best_seconds(fn, repeats, min_seconds)
            per_shape[label] = 2.0 * m * k * n / s / 1e9
            flops, seconds = flops + calls * 2.0 * m * k * n, seconds + calls * s
            result["threads"] = threads
        result["configs"][name] = {"per_shape": per_shape, "forward_mix": flops / seconds / 1e9}
    result["load"] = os.getloadavg()[0]
    return result


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--library", required=True, choices=LIBRARIES)
    p.add_argument("--configs", default="small,base")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--num_masked", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min_seconds", type=float, default=0.2, help="length of one timed round")
    args = p.parse_args(argv)
    shape = Shape(args.batch_size, args.seq_len, args.num_masked)
    result = measure(args.library, [c for c in args.configs.split(",") if c], shape, args.repeats,
                     args.min_seconds)
    print("RESULT " + json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
