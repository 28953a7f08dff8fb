"""The floor under batch-1 latency: an encoder's dense matmuls alone, in TensorFlow and in ONNX Runtime.

At batch 1 on short inputs (~25 tokens) a BERT encoder is its 4L dense matmuls (fused QKV, attention output,
intermediate, output) on a 25-row matrix; everything else is a few percent. This times exactly those matmuls,
chained as in the encoder (random weights, a ReLU between intermediate and output so nothing is folded away), in
each engine's own kernels, one process per measurement with the library's default threads:

    tf          tf.function, oneDNN (TensorFlow's default kernels on x86)
    tf_xla      tf.function(jit_compile=True)
    tf_xla_const  tf.function(jit_compile=True) with the weights as graph constants (what a SavedModel with frozen
                weights would run): XLA may then lay them out at compile time
    tf_eigen    tf.function with TF_ENABLE_ONEDNN_OPTS=0 (Eigen's kernels)
    tf_bias     tf.function, each product followed by its bias (tf.nn.bias_add, as in the model): oneDNN's fused
                MatMul + BiasAdd
    tf_bias_const  tf_bias with weights and biases as graph constants: the fused op then reorders each weight into
                oneDNN's blocked layout once and keeps it, instead of packing it on every call (the plain MatMul of
                tf_xla_const's graph without XLA gets no such cache)
    tf_ksplit   tf.function, each matmul as two on the halves of its inner dimension, summed: two independent
                ops, each streaming half the weights, that the inter-op pool can run on both cores at once
    tf_nsplit   tf.function, each weight stored as two column halves, the two products concatenated
    tf_msplit   tf.function, each product on the two halves of the rows, concatenated (the weights as they are)
    tf_wt       tf.function, the chain transposed: weights stored as [out, in], activations as [features, rows],
                each product W·X, so the big matrix is the left operand and the few rows the right one
    tf_conv     tf.function, each product a 1x1 Conv2D (oneDNN's convolution kernels instead of its inner product):
                activations as a [1, 1, rows, features] image, weights as [1, 1, in, out] filters
    tf_conv_const  tf_conv with the filters as graph constants (oneDNN then keeps them reordered)
    tf_1thread  tf with one intra-op thread: no work shared between the cores, so no hand-off between them either
    onnxruntime the same chain as an ONNX graph (MatMul nodes), ORT_ENABLE_ALL, MLAS kernels

What it shows: whether any TensorFlow kernel path can reach a peer's end-to-end latency, since a SavedModel
loaded by plain TensorFlow can only run TensorFlow's kernels.

    python bench/bench_encoder_gemms.py --rows=13,25,128 --rounds=3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._report import comma_list, known_names, write_section  # noqa: E402
from bench._shapes import child_json, time_steps  # noqa: E402

SHAPES = {"minilm": (6, 384, 1536), "bert_base": (12, 768, 3072)}  # layers, hidden, intermediate
ENGINES = ("tf", "tf_xla", "tf_xla_const", "tf_eigen", "tf_bias", "tf_bias_const", "tf_ksplit", "tf_nsplit",
           "tf_msplit", "tf_wt", "tf_conv", "tf_conv_const", "tf_1thread", "onnxruntime")


def weight_shapes(model: str) -> list[tuple[int, int]]:
    layers, hidden, inter = SHAPES[model]
    return [(hidden, 3 * hidden), (hidden, hidden), (hidden, inter), (inter, hidden)] * layers


def gflop(model: str, rows: int) -> float:
    return 2 * rows * sum(k * n for k, n in weight_shapes(model)) / 1e9


def tf_chain(weights, jit_compile: bool = False, split: str = "", constants: bool = False, biases=None,
             transposed: bool = False, conv: bool = False):
    """The chain as a tf.function; `split` "k", "n" or "m" computes each product as two half products; `constants`:
    the weights embedded in the graph instead of read from variables; `biases`: one per weight, added to its
    product; `transposed`: the whole chain as its transpose (weights [out, in], activations [features, rows]);
    `conv`: each product as a 1x1 convolution."""
    import tensorflow as tf

    if conv:
        weights = [w.reshape(1, 1, *w.shape) for w in weights]

    if biases is not None:
        weights = list(zip(weights, biases))
    if constants:
        variables = weights  # numpy arrays: tracing turns each into a Const node
    elif split == "n":
        variables = [(tf.Variable(w[:, :w.shape[1] // 2]), tf.Variable(w[:, w.shape[1] // 2:])) for w in weights]
    elif biases is not None:
        variables = [(tf.Variable(w), tf.Variable(b)) for w, b in weights]
    else:
        variables = [tf.Variable(w.T.copy() if transposed else w) for w in weights]

    def product(x, w):
        if transposed:
            return tf.matmul(w, x)
        if conv:
            return tf.nn.conv2d(x, w, 1, "VALID")
        if biases is not None:
            return tf.nn.bias_add(tf.matmul(x, w[0]), w[1])
        if split == "k":
            half = w.shape[0] // 2  # first-axis slices of a variable share its buffer: no copy
            w = tf.convert_to_tensor(w)
            return tf.matmul(x[:, :half], w[:half]) + tf.matmul(x[:, half:], w[half:])
        if split == "n":
            return tf.concat([tf.matmul(x, w[0]), tf.matmul(x, w[1])], axis=-1)
        if split == "m":
            half = (tf.shape(x)[0] + 1) // 2
            return tf.concat([tf.matmul(x[:half], w), tf.matmul(x[half:], w)], axis=0)
        return tf.matmul(x, w)

    @tf.function(jit_compile=jit_compile)
    def chain(x):
        features = x.shape[-1]
        outputs, x = [], tf.transpose(x) if transposed else tf.reshape(x, [1, 1, -1, features]) if conv else x
        for i in range(0, len(variables), 4):
            qkv, attention_output, intermediate, output = variables[i:i + 4]
            outputs.append(product(x, qkv))
            hidden = tf.nn.relu(product(product(x, attention_output), intermediate))
            x = product(hidden, output)
        return (tf.transpose(x) if transposed else tf.reshape(x, [-1, features]) if conv else x), outputs

    return chain


def onnx_chain(weights):
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, outputs, x = [], [], [], "x"
    for i, w in enumerate(weights):
        initializers.append(numpy_helper.from_array(w, f"w{i}"))
    for layer in range(len(weights) // 4):
        w = [f"w{4 * layer + j}" for j in range(4)]
        nodes += [helper.make_node("MatMul", [x, w[0]], [f"qkv{layer}"]),
                  helper.make_node("MatMul", [x, w[1]], [f"att{layer}"]),
                  helper.make_node("MatMul", [f"att{layer}", w[2]], [f"pre{layer}"]),
                  helper.make_node("Relu", [f"pre{layer}"], [f"act{layer}"]),
                  helper.make_node("MatMul", [f"act{layer}", w[3]], [f"out{layer}"])]
        outputs.append(f"qkv{layer}")
        x = f"out{layer}"
    graph = helper.make_graph(nodes, "encoder_gemms",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, weights[0].shape[0]])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs + [x]],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})


def measure(engine: str, model: str, rows: int, calls: int, warmup: int) -> dict:
    """Median ms per chained call of `engine` in this process."""
    import numpy as np

    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal(s) * 0.02).astype(np.float32) for s in weight_shapes(model)]
    x = rng.standard_normal((rows, weights[0].shape[0])).astype(np.float32)  # the same for every engine
    biases = ([(rng.standard_normal(w.shape[1]) * 0.02).astype(np.float32) for w in weights]
              if engine.startswith("tf_bias") else None)
    if engine == "tf_1thread":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
    run = (onnx_chain(weights) if engine == "onnxruntime" else
           tf_chain(weights, jit_compile=engine.startswith("tf_xla"),
                    split=engine[3] if engine.endswith("split") else "", constants=engine.endswith("const"),
                    biases=biases, transposed=engine == "tf_wt",
                    conv=engine.startswith("tf_conv")))
    seconds = time_steps(lambda: run(x), calls, warmup)
    return {"ms": statistics.median(seconds) * 1e3, "load": os.getloadavg()[0]}


def measure_in_process(engine: str, model: str, rows: int, calls: int) -> dict:
    return child_json(__file__, [engine, "--models", model, "--rows", str(rows), "--calls", str(calls)],
                      {"TF_ENABLE_ONEDNN_OPTS": "0"} if engine == "tf_eigen" else None)


def report(results: dict, args: argparse.Namespace) -> str:
    from bench._cpu import read_cpu

    lines = ["## The encoder's matmuls alone: TensorFlow's kernels vs ONNX Runtime's (issue #18)\n",
             "Median ms per call of the encoder's 4L dense matmuls chained as in the model (fused QKV, attention "
             "output, intermediate, output; random float32 weights), rows = tokens of one batch-1 input; each "
             f"figure the median over {args.rounds} fresh processes (in brackets), {args.calls} timed calls each, "
             "library default threads; the engines alternate within each round. tf_ksplit / tf_nsplit / tf_msplit: "
             "every product as two half products (inner / output dimension / row halves), independent ops that TensorFlow's "
             "inter-op pool may run on both cores at once. CPU: "
             f"{read_cpu().label()}.\n",
             "| shape | rows | GFLOP | " + " | ".join(args.engines) + " |",
             "|---|---:|---:|" + "---:|" * len(args.engines)]
    for model in args.models:
        for rows in args.rows:
            cells = []
            for engine in args.engines:
                values = [r["ms"] for r in results[model][str(rows)][engine]]
                cells.append(f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")
            lines.append(f"| {model} | {rows} | {gflop(model, rows):.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="minilm,bert_base")
    p.add_argument("--rows", default="13,25,128")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--no_write", action="store_true")
    args = p.parse_args(argv)
    args.models = known_names(p, comma_list(args.models), SHAPES, "model")
    args.rows = comma_list(args.rows, int)
    args.engines = known_names(p, comma_list(args.engines), ENGINES, "engine")
    if args.child:
        print(json.dumps(measure(args.child, args.models[0], args.rows[0], args.calls, warmup=20)))
        return
    results: dict = {m: {str(r): {e: [] for e in args.engines} for r in args.rows} for m in args.models}
    for round_index in range(args.rounds):
        for model in args.models:
            for rows in args.rows:
                calls = args.calls if gflop(model, rows) < 5 else max(20, args.calls // 10)
                for engine in args.engines:
                    figure = measure_in_process(engine, model, rows, calls)
                    results[model][str(rows)][engine].append(figure)
                    print(f"round {round_index + 1} {model} rows={rows} {engine}: {figure['ms']:.2f} ms "
                          f"(load {figure['load']:.2f})", flush=True)
    body = report(results, args)
    print("\n" + body)
    if not args.no_write:
        write_section("encoder_gemms", body)


if __name__ == "__main__":
    main()
