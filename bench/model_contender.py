"""One timed window of one contender of the model speed study (studies/tables/speed_model.py), in its own process.

A window builds the model, runs `warmup` untimed forward passes then `steps` timed ones, then `warmup` untimed
training steps then `steps` timed ones, and writes OUT/result.json with the per-step seconds. The study runs one
such process per contender and window, the contenders alternating, so that no two libraries' thread pools ever
share the cores and a busy moment on the shared machine hits every contender alike. Threads are each library's
default (TensorFlow: intra-op = all cores; torch: one per core).

    python -m bench.model_contender --contender=ours --config=small --out=DIR
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bench._shapes import (CONFIGS, LEARNING_RATE, WEIGHT_DECAY, Dims, Runner, Shape, forward_flops_per_seq,
                           make_batch, time_steps)
from bench.result import report

CONTENDERS = ("ours", "keras_hub", "hf_torch", "hf_torch_gathered")


def build_ours(dims: Dims, shape: Shape, batch: dict[str, np.ndarray], jit_compile: bool) -> Runner:
    """Our BertModel + masked-LM head at gathered positions + NSP head, with the original's losses and
    optimizer (bert_tf.training.optimization.AdamWeightDecay, what run_pretraining uses; no clipping, as the
    peers)."""
    from bench import _keras_peers
    from bert_tf.model import heads
    from bert_tf.pretraining.objective import PRETRAINING
    from bert_tf.training.objectives import total_loss
    from bert_tf.model.configs import BertConfig
    from bert_tf.training.optimization import AdamWeightDecay

    config = BertConfig(vocab_size=dims.vocab_size, hidden_size=dims.hidden_size,
                        num_hidden_layers=dims.num_layers, num_attention_heads=dims.num_heads,
                        intermediate_size=dims.intermediate_size, max_position_embeddings=dims.max_position,
                        type_vocab_size=dims.type_vocab_size)
    model = heads.BertPretrainingModel(config)

    def logits(b, training):
        outputs = model(b, training=training)
        return outputs["masked_lm_logits"], outputs["next_sentence_logits"]

    def loss(b, training):
        losses, _ = PRETRAINING.terms_fn(model, b, training)
        return total_loss(list(losses.values()))

    optimizer = AdamWeightDecay(learning_rate=LEARNING_RATE, weight_decay_rate=WEIGHT_DECAY)
    forward, train_step = _keras_peers.keras_runner_steps(model, logits, batch, jit_compile, loss, optimizer)
    return Runner("bert_tf (ours)" + (" (XLA)" if jit_compile else ""), forward, train_step,
                  forward_flops_per_seq(dims, shape))


def build(contender: str, dims: Dims, shape: Shape, batch: dict[str, np.ndarray], jit_compile: bool) -> Runner:
    """The Runner of one contender; only that contender's library is imported."""
    if contender == "ours":
        return build_ours(dims, shape, batch, jit_compile)
    if contender == "keras_hub":
        from bench._keras_peers import build_keras_hub
        return build_keras_hub(dims, shape, batch, jit_compile)
    from bench._torch_peer import build_hf_torch
    return build_hf_torch(dims, shape, batch, gathered=contender == "hf_torch_gathered")


def threads_note(contender: str) -> str:
    """The thread setting the contender's library runs with (its default, never set by us)."""
    if contender.startswith("hf_torch"):
        import torch
        return f"torch threads {torch.get_num_threads()} (default)"
    import tensorflow as tf
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    return f"TF intra-op {intra or 'default = all cores'}"


def run_window(contender: str, config: str, shape: Shape, steps: int, warmup: int, jit_compile: bool) -> dict:
    """Builds the contender and times its forward and training steps; returns per-step seconds and notes."""
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    dims = CONFIGS[config]
    runner = build(contender, dims, shape, make_batch(dims, shape), jit_compile)
    forward_s = time_steps(runner.forward, steps, warmup)
    losses: list[float] = []
    train_s = time_steps(lambda: losses.append(float(runner.train_step())), steps, warmup)
    return {"contender": contender, "name": runner.name, "config": config,
            "forward_s": forward_s, "train_s": train_s, "batch_size": shape.batch_size,
            "forward_flops_per_seq": runner.forward_flops_per_seq, "loss_first": losses[0], "loss_last": losses[-1],
            "note": "; ".join(n for n in (runner.note, threads_note(contender)) if n),
            "load_start": load_start, "load_end": os.getloadavg()[0], "wall_s": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contender", required=True, choices=CONTENDERS)
    p.add_argument("--config", required=True, choices=sorted(CONFIGS))
    p.add_argument("--steps", type=int, default=3, help="timed steps per phase")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps before each phase (tracing, caches)")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--num_masked", type=int, default=20)
    p.add_argument("--jit_compile", action="store_true", help="XLA-compile the Keras models' tf.functions")
    p.add_argument("--out", required=True, help="the folder of result.json")
    args = p.parse_args(argv)
    shape = Shape(args.batch_size, args.seq_len, args.num_masked)
    result = run_window(args.contender, args.config, shape, args.steps, args.warmup, args.jit_compile)
    return report(args.out, result)


if __name__ == "__main__":
    main()
