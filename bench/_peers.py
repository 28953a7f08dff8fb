"""Shared pieces of bench_model.py: shapes, synthetic batches, FLOP counts, timing, and the peer models.

Every model is wrapped in a `Runner`: one call of `forward()` or `train_step()` processes one full batch and
returns only when the work is done, so wall-clock time per call is the step time.
"""
from __future__ import annotations

import dataclasses
import gc
import os
import statistics
import time
from typing import Callable

import numpy as np

import bert_tf._env  # noqa: F401
import tensorflow as tf

import keras


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


def time_windows(fn: Callable[[], object], steps: int, windows: int, warmup: int) -> list[float]:
    """Seconds per call of `fn` in each of `windows` timed windows of `steps` calls, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    result = []
    for _ in range(windows):
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        result.append((time.perf_counter() - start) / steps)
    return result


def median_seq_per_s(seconds_per_step: list[float], batch_size: int) -> float:
    return statistics.median(batch_size / s for s in seconds_per_step)


def let_threads_idle(seconds: float = 1.0) -> None:
    """Sleeps so that the previous framework's spinning worker threads (TF, OpenMP, OpenBLAS) go to sleep.

    TensorFlow, torch and numpy each keep their own pool of busy-waiting threads; on a small machine the pool
    that just finished steals cores from the next framework's first steps.
    """
    time.sleep(seconds)


def release_memory() -> None:
    """Drops Keras graph state and collects garbage between models."""
    keras.backend.clear_session()
    gc.collect()


# ---------------------------------------------------------------------------------------------- Keras (TF)

def keras_pretraining_loss(mlm_logits, nsp_logits, batch) -> tf.Tensor:
    """The original BERT loss: weighted mean MLM cross-entropy (+1e-5 in the denominator) + mean NSP loss."""
    mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["masked_lm_ids"], tf.cast(mlm_logits, tf.float32))
    weights = batch["masked_lm_weights"]
    mlm_loss = tf.reduce_sum(mlm_ce * weights) / (tf.reduce_sum(weights) + 1e-5)
    nsp_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["next_sentence_labels"],
                                                            tf.cast(nsp_logits, tf.float32))
    return mlm_loss + tf.reduce_mean(nsp_ce)


def make_keras_adamw() -> keras.optimizers.AdamW:
    """AdamW with the original's decay exclusions (LayerNorm and biases)."""
    optimizer = keras.optimizers.AdamW(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY, epsilon=1e-6)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "layer_norm", "LayerNorm"])
    return optimizer


def keras_runner_steps(model: keras.Model, logits_fn: Callable[[dict, bool], tuple], batch: dict[str, np.ndarray],
                       jit_compile: bool, loss_fn: Callable[[dict, bool], tf.Tensor] | None = None,
                       optimizer: keras.optimizers.Optimizer | None = None) -> tuple[Callable, Callable]:
    """tf.function forward and train step of a Keras pre-training model.

    `logits_fn(batch, training)` runs the model and returns (mlm_logits [B, P, V], nsp_logits [B, 2]);
    `loss_fn(batch, training)`, if given, returns the scalar loss instead of our copy of the original's formula;
    `optimizer` defaults to Keras' AdamW with the original's decay exclusions.
    """
    tensors = {k: tf.constant(v) for k, v in batch.items()}
    optimizer = optimizer or make_keras_adamw()
    optimizer.build(model.trainable_variables)

    def default_loss(batch_tensors, training):
        return keras_pretraining_loss(*logits_fn(batch_tensors, training), batch_tensors)

    compute_loss = loss_fn or default_loss

    @tf.function(jit_compile=jit_compile)
    def forward(batch_tensors):
        mlm_logits, nsp_logits = logits_fn(batch_tensors, False)
        return tf.reduce_sum(nsp_logits) + tf.reduce_sum(mlm_logits[:, 0, :1])

    @tf.function(jit_compile=jit_compile)
    def train_step(batch_tensors):
        with tf.GradientTape() as tape:
            loss = compute_loss(batch_tensors, True)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return (lambda: forward(tensors).numpy()), (lambda: train_step(tensors).numpy())


def build_keras_hub(dims: Dims, shape: Shape, batch: dict[str, np.ndarray], jit_compile: bool) -> Runner:
    """KerasHub BertBackbone + MaskedLMHead (tied, gathered positions) + a Dense(2) NSP head on the pooled output."""
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=dims.vocab_size, num_layers=dims.num_layers, num_heads=dims.num_heads,
        hidden_dim=dims.hidden_size, intermediate_dim=dims.intermediate_size, dropout=0.1,
        max_sequence_length=dims.max_position, num_segments=dims.type_vocab_size)
    mlm_head = keras_hub.layers.MaskedLMHead(token_embedding=backbone.token_embedding,
                                             intermediate_activation="gelu", name="mlm_head")
    nsp_head = keras.layers.Dense(2, name="nsp_head")
    inputs = {"token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
              "segment_ids": keras.Input((None,), dtype="int32", name="segment_ids"),
              "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask"),
              "mask_positions": keras.Input((None,), dtype="int32", name="mask_positions")}
    features = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    outputs = (mlm_head(features["sequence_output"], mask_positions=inputs["mask_positions"]),
               nsp_head(features["pooled_output"]))
    model = keras.Model(inputs, outputs)

    def to_inputs(b):
        return {"token_ids": b["input_ids"], "segment_ids": b["segment_ids"], "padding_mask": b["input_mask"],
                "mask_positions": b["masked_lm_positions"]}

    forward, train_step = keras_runner_steps(model, lambda b, training: model(to_inputs(b), training=training),
                                             batch, jit_compile)
    return Runner("KerasHub BertBackbone + MaskedLMHead" + (" (XLA)" if jit_compile else ""), forward, train_step,
                  forward_flops_per_seq(dims, shape))


# ---------------------------------------------------------------------------------------------- HF torch

def build_hf_torch(dims: Dims, shape: Shape, batch: dict[str, np.ndarray], gathered: bool) -> Runner:
    """transformers BertForPreTraining on torch CPU; `gathered` applies the MLM head only at the masked positions."""
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=dims.vocab_size, hidden_size=dims.hidden_size, num_hidden_layers=dims.num_layers,
        num_attention_heads=dims.num_heads, intermediate_size=dims.intermediate_size, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=dims.max_position,
        type_vocab_size=dims.type_vocab_size)
    model = transformers.BertForPreTraining(config)
    t = {k: torch.from_numpy(v).long() if v.dtype == np.int32 else torch.from_numpy(v) for k, v in batch.items()}
    optimizer = _torch_adamw(model)

    def heads(input_ids_kwargs):
        if not gathered:
            out = model(**input_ids_kwargs)
            return out.prediction_logits, out.seq_relationship_logits
        sequence, pooled = model.bert(**input_ids_kwargs, return_dict=False)[:2]
        index = t["masked_lm_positions"][..., None].expand(-1, -1, sequence.shape[-1])
        return model.cls.predictions(sequence.gather(1, index)), model.cls.seq_relationship(pooled)

    model_inputs = {"input_ids": t["input_ids"], "attention_mask": t["input_mask"], "token_type_ids": t["segment_ids"]}

    labels = torch.full_like(t["input_ids"], -100).scatter_(1, t["masked_lm_positions"], t["masked_lm_ids"])

    def loss_fn():
        if not gathered:  # the stock path: HF's own loss over [B, T] labels, -100 where not masked
            return model(**model_inputs, labels=labels, next_sentence_label=t["next_sentence_labels"]).loss
        mlm_logits, nsp_logits = heads(model_inputs)
        mlm_ce = torch.nn.functional.cross_entropy(mlm_logits.flatten(0, 1), t["masked_lm_ids"].flatten(),
                                                   reduction="none")
        weights = t["masked_lm_weights"].flatten()
        mlm_loss = (mlm_ce * weights).sum() / (weights.sum() + 1e-5)
        return mlm_loss + torch.nn.functional.cross_entropy(nsp_logits, t["next_sentence_labels"])

    def forward():
        model.eval()
        with torch.inference_mode():
            mlm_logits, nsp_logits = heads(model_inputs)
        return float(nsp_logits.sum())

    def train_step():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        return loss.item()

    mlm_positions = None if gathered else shape.seq_len
    name = "HF torch BertForPreTraining" + (" (MLM head gathered)" if gathered else " (stock full-vocab MLM head)")
    return Runner(name, forward, train_step, forward_flops_per_seq(dims, shape, mlm_positions),
                  note=f"attn={model.config._attn_implementation}, threads={torch.get_num_threads()}")


def _torch_adamw(model) -> "torch.optim.AdamW":
    """torch AdamW with no decay on biases and LayerNorm weights, as the original."""
    import torch

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if "bias" in name or "LayerNorm" in name else decay).append(param)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}], lr=LEARNING_RATE, eps=1e-6)
