"""The Hugging Face side of the SQuAD benchmark: transformers' BertForQuestionAnswering on torch CPU.

Trained with the original run_squad recipe on exactly the windows our program cached (its TFRecords, read with
bert_tf.data.tfrecord's pure-Python reader; no TensorFlow in this process but with --mask_keys, which draws our
run's dropout masks with TensorFlow's random ops, bench/_shared_masks.py) and in the batch order our tf.data
pipeline draws (`--order`, bench/_batch_order.py): the original's AdamWeightDecay, warmup and linear decay, and
global-norm clipping at 1.0 (the optimizer, schedule and clipping of bench/_hf_classifier.py); the loss is
transformers' own, the mean of the start and end cross-entropies over every position, as the original's.
Windows stay padded to max_seq_length, as transformers' run_qa.py pads them by default and as our program does
for SQuAD (the n-best search sees every position).

    python -m bench._hf_squad --init=DIR --train=T.tfrecord --predict=P.tfrecord --seed=1 --order=O.npy --out=DIR
    python -m bench._hf_squad ... --speed   # warm-up + timed training steps, then timed prediction

Writes OUT/raw_logits.jsonl (our program's raw-logits format: unique_id, start_logits, end_logits), which our
program turns into predictions and the official figures with `--raw_logits_file`, and OUT/result.json.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch

from bench._hf_classifier import (add_dropout_argument, add_recipe_arguments, batch_indices, clip_by_global_norm,
                                  dropout_overrides, learning_rate, make_optimizer, run_main)
from bench._shared_masks import SharedMasks
from bert_tf.data.tfrecord import read_examples

INPUTS = {"input_ids": "input_ids", "input_mask": "attention_mask", "segment_ids": "token_type_ids"}
PROGRESS_STEPS = 10


def read_windows(path: str, training: bool) -> dict[str, torch.Tensor]:
    """Our cached windows as tensors: the model inputs, plus start/end positions (training) or unique ids."""
    rows = list(read_examples(path))
    data = {name: torch.tensor([row[key] for row in rows], dtype=torch.long) for key, name in INPUTS.items()}
    for key in ("start_positions", "end_positions") if training else ("unique_ids",):
        data[key] = torch.tensor([row[key][0] for row in rows], dtype=torch.long)
    return data


def load_model(init: str, dropout: float | None = None, eager: bool = False):
    """BertForQuestionAnswering from a Hugging Face folder (with its qa_outputs head); `dropout` overrides the
    config's hidden and attention dropout; `eager`: attention outside torch's fused kernel, whose dropout would not
    go through torch.nn.functional.dropout (shared masks)."""
    import transformers

    kwargs = {"attn_implementation": "eager"} if eager else {}
    return transformers.BertForQuestionAnswering.from_pretrained(init, **dropout_overrides(dropout), **kwargs)


def train(model, data: dict[str, torch.Tensor], order: np.ndarray, args: argparse.Namespace, num_train_steps: int,
          first: int = 0, masks: SharedMasks | None = None) -> tuple[list[float], list[float]]:
    """Runs the steps of `order` (global step numbers from `first`); (each step's loss, each step's seconds).
    `masks`: our run's dropout masks instead of torch's."""
    model.train()
    optimizer = make_optimizer(model, args.learning_rate)
    params = [p for p in model.parameters() if p.requires_grad]
    num_warmup = int(num_train_steps * args.warmup_proportion)
    losses, seconds = [], []
    for offset, rows in enumerate(order):
        began = time.perf_counter()
        index = torch.from_numpy(rows)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(first + offset, args.learning_rate, num_train_steps, num_warmup)
        if masks:
            masks.begin_step(first + offset)
        out = model(**{name: data[name][index] for name in INPUTS.values()},
                    start_positions=data["start_positions"][index], end_positions=data["end_positions"][index])
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        clip_by_global_norm(params, 1.0)
        optimizer.step()
        losses.append(out.loss.item())
        seconds.append(time.perf_counter() - began)
        if (offset + 1) % PROGRESS_STEPS == 0:
            recent = seconds[-PROGRESS_STEPS:]
            print(f"step {first + offset + 1}/{num_train_steps} | loss {np.mean(losses[-PROGRESS_STEPS:]):.4f} | "
                  f"{len(recent) * len(rows) / sum(recent):.2f} seq/s", flush=True)
    return losses, seconds


def predict(model, data: dict[str, torch.Tensor], batch_size: int, limit: int | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """(start logits, end logits) [rows, seq] of the windows (the first `limit`), in order, dropout off."""
    model.eval()
    count = len(data["unique_ids"]) if limit is None else limit
    starts, ends = [], []
    with torch.inference_mode():
        for start in range(0, count, batch_size):
            sl = slice(start, min(start + batch_size, count))
            out = model(**{name: data[name][sl] for name in INPUTS.values()})
            starts.append(out.start_logits.float().numpy())
            ends.append(out.end_logits.float().numpy())
    return np.concatenate(starts), np.concatenate(ends)


def write_raw_logits(path: str, unique_ids: torch.Tensor, starts: np.ndarray, ends: np.ndarray) -> None:
    """One JSON line per window, as our program's raw_logits.jsonl."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for uid, start, end in zip(unique_ids.tolist(), starts, ends):
            f.write(json.dumps({"unique_id": uid, "start_logits": [float(v) for v in start],
                                "end_logits": [float(v) for v in end]}) + "\n")
    os.replace(path + ".tmp", path)


def rate(rows: int, seconds: list[float], skip: int) -> float:
    """Examples/s over the steps after the first `skip` (warm-up)."""
    timed = seconds[skip:] or seconds
    return rows * len(timed) / sum(timed)


def run_accuracy(args: argparse.Namespace) -> dict:
    """Full fine-tuning with the recipe, then prediction of every window; timings of each part."""
    train_data, predict_data = read_windows(args.train, True), read_windows(args.predict, False)
    rows = len(train_data["input_ids"])
    num_train_steps = int(rows / args.train_batch_size * args.num_train_epochs)  # finetune.train_steps
    order = batch_indices(rows, num_train_steps, args.train_batch_size, args.seed, args.order)
    masks = SharedMasks.from_file(args.mask_keys) if args.mask_keys else None
    model = load_model(args.init, args.dropout, eager=masks is not None)
    if masks:
        masks.install()
    start = time.perf_counter()
    losses, seconds = train(model, train_data, order, args, num_train_steps, masks=masks)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    starts, ends = predict(model, predict_data, args.predict_batch_size)
    predict_s = time.perf_counter() - start
    write_raw_logits(os.path.join(args.out, "raw_logits.jsonl"), predict_data["unique_ids"], starts, ends)
    windows = len(starts)
    return {"train_rows": rows, "train_steps": num_train_steps, "train_s": train_s,
            "train_examples_per_s": rate(args.train_batch_size, seconds, 5), "predict_s": predict_s,
            "predict_rows": windows, "predict_examples_per_s": windows / predict_s,
            "loss_first": losses[0] if losses else None,
            "loss_last_10": float(np.mean(losses[-10:])) if losses else None,
            "attention": model.config._attn_implementation, "losses": losses}


def run_speed(args: argparse.Namespace) -> dict:
    """Training examples/s over timed steps after warm-up, and prediction examples/s over --speed_predict_rows."""
    train_data, predict_data = read_windows(args.train, True), read_windows(args.predict, False)
    rows = len(train_data["input_ids"])
    num_train_steps = int(rows / args.train_batch_size * args.num_train_epochs)
    order = batch_indices(rows, args.warmup_steps + args.timed_steps, args.train_batch_size, args.seed, args.order)
    model = load_model(args.init)
    _, seconds = train(model, train_data, order, args, num_train_steps)
    limit = min(args.speed_predict_rows, len(predict_data["unique_ids"]))
    predict(model, predict_data, args.predict_batch_size, limit=args.predict_batch_size)  # warm-up batch
    start = time.perf_counter()
    predict(model, predict_data, args.predict_batch_size, limit=limit)
    predict_s = time.perf_counter() - start
    return {"train_examples_per_s": rate(args.train_batch_size, seconds, args.warmup_steps),
            "timed_steps": args.timed_steps, "predict_examples_per_s": limit / predict_s, "predict_rows": limit,
            "predict_s": predict_s, "attention": model.config._attn_implementation}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="Hugging Face BERT folder with a qa_outputs head")
    p.add_argument("--train", required=True, help="our cached training windows (TFRecord)")
    p.add_argument("--predict", required=True, help="our cached prediction windows (TFRecord)")
    add_recipe_arguments(p, learning_rate=3e-5, epochs=2.0)
    add_dropout_argument(p)
    p.add_argument("--mask_keys", help="JSON list of our run's dropout keys (bench/_shared_masks.py): train with "
                                       "the masks our run drew")
    p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--timed_steps", type=int, default=10)
    p.add_argument("--speed_predict_rows", type=int, default=400, help="windows of the timed prediction")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_main(args, run_speed if args.speed else run_accuracy, quiet_keys=("losses",))


if __name__ == "__main__":
    main()
