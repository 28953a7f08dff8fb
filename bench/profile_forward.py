"""Where one contender's forward pass spends its time, by op class: tf.profiler for the Keras models, torch.profiler
for Hugging Face. One contender per process, as in the benchmark, so the two libraries never share the cores.

    python bench/profile_forward.py --contender ours --config small
    ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 python bench/profile_forward.py --contender hf_torch_gathered

Prints, per forward pass: milliseconds of wall time, then the summed op time by class (attention, matmul, layout,
layer norm, GELU, embedding/gather, other) and the ten costliest op types. Op times are summed over the threads
that ran them, so with inter-op parallelism their sum can exceed the wall time.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._cpu import read_cpu  # noqa: E402
from bench._shapes import CONFIGS, Shape, make_batch  # noqa: E402
from bench.model_contender import CONTENDERS, build  # noqa: E402

CLASSES = (("attention", r"batchmatmul|einsum|softmax|bmm|scaled_dot_product|flash_attention"),
           ("matmul", r"matmul|addmm|^aten::mm$|linear"),
           ("layout", r"transpose|reshape|permute|contiguous|clone|copy|expand"),
           ("layer norm", r"layer_?norm|fusedbatchnorm|mean|variance|rsqrt|squareddifference"),
           ("GELU", r"gelu|erf"),
           ("embedding/gather", r"gather|embedding|index_select|onehot"))


def op_class(op_type: str) -> str:
    lowered = op_type.lower()
    return next((name for name, pattern in CLASSES if re.search(pattern, lowered)), "other")


def tf_op_seconds(forward, calls: int) -> dict[str, float]:
    """Op type -> seconds summed over executor threads, from a tf.profiler trace of `calls` forward passes."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="bert_tf_profile_")
    tf.profiler.experimental.start(logdir)
    for _ in range(calls):
        forward()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1], "rb") as handle:
        space.ParseFromString(handle.read())
    seconds: dict[str, float] = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                if ":" in meta.name and meta.display_name:
                    seconds[meta.display_name] += event.duration_ps * 1e-12 / calls
    return dict(seconds)


def torch_op_seconds(forward, calls: int) -> dict[str, float]:
    """aten op -> self CPU seconds per forward, from torch.profiler over `calls` forward passes."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            forward()
    return {e.key: e.self_cpu_time_total * 1e-6 / calls for e in prof.key_averages() if e.key.startswith("aten::")}


def report(contender: str, config: str, wall_ms: float, ops: dict[str, float]) -> str:
    by_class: dict[str, float] = collections.Counter()
    for op, seconds in ops.items():
        by_class[op_class(op)] += seconds
    total = sum(by_class.values()) or 1.0
    lines = [f"{contender} {config} on {read_cpu().label()} "
             f"(ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')}): forward {wall_ms:.1f} ms wall, "
             f"ops {1e3 * total:.1f} ms summed, load {os.getloadavg()[0]:.2f}"]
    lines += [f"  {name:18s} {1e3 * s:8.1f} ms {100 * s / total:5.1f}%" for name, s in by_class.most_common()]
    lines += ["  top ops: " + ", ".join(f"{op} {1e3 * s:.1f}" for op, s in
                                        sorted(ops.items(), key=lambda kv: -kv[1])[:10])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contender", required=True, choices=CONTENDERS)
    p.add_argument("--config", default="small", choices=sorted(CONFIGS))
    p.add_argument("--calls", type=int, default=3, help="profiled forward passes (after 2 warm-up)")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--num_masked", type=int, default=20)
    args = p.parse_args(argv)
    dims, shape = CONFIGS[args.config], Shape(args.batch_size, args.seq_len, args.num_masked)
    runner = build(args.contender, dims, shape, make_batch(dims, shape), jit_compile=False)
    for _ in range(2):
        runner.forward()
    start = time.perf_counter()
    for _ in range(args.calls):
        runner.forward()
    wall_ms = 1e3 * (time.perf_counter() - start) / args.calls
    profile = torch_op_seconds if args.contender.startswith("hf_torch") else tf_op_seconds
    text = report(args.contender, args.config, wall_ms, profile(runner.forward, args.calls))
    print(text, flush=True)
    return text


if __name__ == "__main__":
    main()
