"""Whole-model latency with the weights read from variables or frozen into the graph as constants (issue #18).

oneDNN reorders a weight into its blocked layout once and caches it only where the weight of a fused MatMul +
BiasAdd is a graph constant; read from a variable, it is packed again on every call, which dominates at batch 1
(`bench_encoder_gemms.py`, engines tf_bias and tf_bias_const). This times `BertClassifierModel` itself (random
init, seed 1, 2 labels) in a `tf.function` over token ids, both ways, one fresh process per variant and round,
and checks that the frozen graph gives the same probabilities. A probe, not the shipped export: tokenization is
not included and the doc's figures are typed from its output.

    python bench/probe_frozen_weights.py --models=minilm,bert_base --tokens=24 --rounds=2
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._classifier_runs import minilm_config  # noqa: E402
from bench.inference_setup import BERT_BASE  # noqa: E402
from bench._report import comma_list  # noqa: E402
from bench._shapes import alternating_processes, time_steps  # noqa: E402

MODELS = ("minilm", "bert_base")  # the inference bench's shapes: MiniLM-L6's config, and BERT-Base's sizes on it

VARIANTS = ("variables", "frozen")


def model_function(model_name: str, variant: str):
    """(function of the three int32 [batch, seq] inputs -> probabilities, the variables' version of it)."""
    import keras
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from bert_tf.checkpoints.hf import hf_config_to_original
    from bert_tf.model.heads import BertClassifierModel

    keras.utils.set_random_seed(1)
    config = hf_config_to_original(minilm_config() | (BERT_BASE if model_name == "bert_base" else {}))
    model = BertClassifierModel(config, num_labels=2)
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec, spec])
    def probabilities(input_ids, input_mask, segment_ids):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        return model(features, training=False)["probabilities"]

    if variant == "variables":
        return probabilities, probabilities
    return convert_variables_to_constants_v2(probabilities.get_concrete_function()), probabilities


def measure(model_name: str, variant: str, batch: int, tokens: int, calls: int, warmup: int) -> dict:
    import numpy as np
    import tensorflow as tf

    run, reference = model_function(model_name, variant)
    rng = np.random.default_rng(0)
    inputs = [tf.constant(rng.integers(1000, 30000, size=(batch, tokens)), tf.int32),
              tf.ones((batch, tokens), tf.int32), tf.zeros((batch, tokens), tf.int32)]
    delta = float(np.max(np.abs(np.asarray(run(*inputs)) - np.asarray(reference(*inputs)))))
    seconds = time_steps(lambda: np.asarray(run(*inputs)), calls, warmup)
    return {"ms": statistics.median(seconds) * 1e3, "max_abs_delta": delta}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--child", nargs=2, metavar=("MODEL", "VARIANT"))
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child, args.batch, args.tokens, args.calls, warmup=max(2, args.calls // 10))))
        return
    for model_name in comma_list(args.models):
        figures = alternating_processes(__file__, VARIANTS, args.rounds, lambda variant: [
            model_name, variant, f"--batch={args.batch}", f"--tokens={args.tokens}", f"--calls={args.calls}"])
        for variant, runs in figures.items():
            ms = [run["ms"] for run in runs]
            print(f"{model_name} batch {args.batch} x {args.tokens} tokens, {variant}: "
                  f"median {statistics.median(ms):.2f} ms ({', '.join(f'{m:.2f}' for m in ms)}); max |dp| vs variables "
                  f"{max(run['max_abs_delta'] for run in runs):.1e}")


if __name__ == "__main__":
    main()
