"""The Hugging Face side of the NER benchmark: transformers' BertForTokenClassification on torch CPU.

Trained with the recipe of bench/_hf_classifier.py (the original's AdamWeightDecay, warmup then linear decay,
global-norm clipping at 1.0, dropout 0.1 from the config) on exactly the rows our run_ner program cached (its
TFRecords, read with bert_tf.data.tfrecord's pure-Python reader; no TensorFlow in this process), in the batch order
our tf.data pipeline draws (`--order`, bench/_batch_order.py). Labels sit on each word's first sub-token; every
position of label weight 0 (context, [CLS]/[SEP], later sub-tokens, padding) gets -100, which transformers'
cross-entropy ignores, so its loss is ours: the mean over the batch's scored words. Training batches are cut to
their longest row, as transformers' run_ner.py pads by default (DataCollatorForTokenClassification).

    python -m bench._hf_ner --init=DIR --train=T.tfrecord --eval=E.tfrecord --predict=P.tfrecord --order=O.npy --out=DIR
    python -m bench._hf_ner --init=DIR --train=T.tfrecord --order=O.npy --out=DIR --speed   # warm-up + timed steps

Writes OUT/logits-eval.npy and OUT/logits-predict.npy ([rows, max_seq_length, labels], the rows in file order,
batch 8), which bench/_ner_runs.py tags and scores with our program's TaggingTask, and OUT/result.json.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
import transformers

from bench._hf_classifier import FEATURES, add_recipe_arguments, batch_indices, predict, run_main, train
from bert_tf.data.tfrecord import read_examples

IGNORED = -100  # transformers' (and torch's) ignore_index


class TokenTagger(transformers.BertForTokenClassification):
    """BertForTokenClassification whose labels are cut to the inputs' length (training batches are cut to their
    longest row by bench/_hf_classifier.batch_inputs, the labels are not)."""

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        if labels is not None and input_ids is not None:
            labels = labels[:, :input_ids.shape[1]]
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               labels=labels, **kwargs)


def read_rows(path: str) -> dict[str, torch.Tensor]:
    """Our cached rows as tensors: the inputs, and `labels` with IGNORED wherever the label weight is 0."""
    rows = list(read_examples(path))
    tensors = {key: torch.tensor([row[key] for row in rows], dtype=torch.long) for key in FEATURES}
    scored = torch.tensor([row["label_weights"] for row in rows]) > 0
    tensors["labels"] = torch.where(scored, torch.tensor([row["label_ids"] for row in rows]), IGNORED)
    return tensors


def timed_train(model, data: dict[str, torch.Tensor], order: np.ndarray, args: argparse.Namespace,
                num_train_steps: int) -> tuple[list[float], list[float]]:
    """bench/_hf_classifier's train (one optimizer for all the steps), and when each step's forward pass began
    (a forward pre-hook) followed by the end of the last step."""
    stamps: list[float] = []
    hook = model.register_forward_pre_hook(lambda *_: stamps.append(time.perf_counter()))
    try:
        losses = train(model, data, order, args, num_train_steps)
    finally:
        hook.remove()
    return losses, stamps + [time.perf_counter()]


def rate(stamps: list[float], batch_size: int, skip: int) -> tuple[float, int]:
    """(rows/s over the steps after the first `skip`, their count); every step when there are no more."""
    skip = skip if len(stamps) - 1 > skip else 0
    steps = len(stamps) - 1 - skip
    return steps * batch_size / (stamps[-1] - stamps[skip]), steps


def fine_tune(args: argparse.Namespace, steps: int | None = None) -> tuple[object, dict, list[float], list[float]]:
    """Loads the init folder and trains on --train: the recipe's steps, or the first `steps` of them."""
    data = read_rows(args.train)
    total = int(len(data["labels"]) / args.train_batch_size * args.num_train_epochs)  # finetune.train_steps
    args.dynamic_padding = not args.pad_to_max_length
    model = TokenTagger.from_pretrained(args.init)
    order = batch_indices(len(data["labels"]), steps or total, args.train_batch_size, args.seed, args.order)
    losses, stamps = timed_train(model, data, order, args, total)
    facts = {"train_rows": len(data["labels"]), "train_steps": len(order), "train_s": stamps[-1] - stamps[0],
             "attention": model.config._attn_implementation, "dynamic_padding": args.dynamic_padding}
    return model, facts, losses, stamps


def run_accuracy(args: argparse.Namespace) -> dict:
    """Full fine-tuning with the recipe, then the logits of every eval and predict row."""
    model, result, losses, stamps = fine_tune(args)
    result["train_examples_per_s"], result["train_timed_steps"] = rate(stamps, args.train_batch_size, 5)
    for split, path in (("eval", args.eval), ("predict", args.predict)):
        rows = read_rows(path)
        began = time.perf_counter()
        logits = predict(model, rows, args.predict_batch_size)  # padded to max_seq_length: file-order rows
        result.update({f"{split}_rows": len(logits), f"{split}_predict_s": time.perf_counter() - began})
        np.save(os.path.join(args.out, f"logits-{split}.npy"), logits.astype(np.float32))
    losses_10 = losses[-10:]
    return result | {"loss_first": losses[0], "loss_last_10": float(np.mean(losses_10)), "losses": losses}


def run_speed(args: argparse.Namespace) -> dict:
    """Training rows/s over --timed_steps after --warmup_steps, in one run of the recipe's optimizer."""
    _, result, _, stamps = fine_tune(args, args.warmup_steps + args.timed_steps)
    result["train_examples_per_s"], result["timed_steps"] = rate(stamps, args.train_batch_size, args.warmup_steps)
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="Hugging Face folder of a BertForTokenClassification")
    p.add_argument("--train", required=True, help="our cached training rows (TFRecord)")
    p.add_argument("--eval", help="our cached dev rows (TFRecord); not with --speed")
    p.add_argument("--predict", help="our cached test rows (TFRecord); not with --speed")
    add_recipe_arguments(p, learning_rate=5e-5, epochs=3.0)
    p.add_argument("--pad_to_max_length", action="store_true",
                   help="train on rows padded to max_seq_length (default: each batch cut to its longest row)")
    p.add_argument("--warmup_steps", type=int, default=2)
    p.add_argument("--timed_steps", type=int, default=10)
    args = p.parse_args(argv)
    if not args.speed and not (args.eval and args.predict):
        p.error("--eval and --predict are needed without --speed")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_main(args, run_speed if args.speed else run_accuracy, quiet_keys=("losses",))


if __name__ == "__main__":
    main()
