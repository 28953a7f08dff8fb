"""The Hugging Face side of the classifier benchmark: transformers' BertForSequenceClassification on torch CPU.

Trained with the original run_classifier recipe on exactly the feature rows our program cached (its TFRecords, read
with bert_tf.data.tfrecord's pure-Python reader; no TensorFlow in this process): the original's AdamWeightDecay (no
bias correction, weight decay 0.01 except LayerNorm and biases), linear warmup then linear decay to 0 with the
update after n steps at the schedule's step n+1 (as ours and the original), global-norm clipping at 1.0 as
`tf.clip_by_global_norm`, dropout 0.1 from the config, and either the batch order our tf.data pipeline draws
(`--order`, from bench/_batch_order.py) or freshly shuffled epochs seeded with `--seed`.

    python -m bench._hf_classifier --init=DIR --train=T.tfrecord --dev=D.tfrecord --num_labels=2 --seed=1 --out=DIR
    python -m bench._hf_classifier ... --speed   # 5 warm-up + 40 timed training steps, then timed prediction

Batches are padded to the features' max_seq_length, as transformers' run_glue.py does by default
(`pad_to_max_length=True`); with `--dynamic_padding` every training and prediction batch is cut to its longest row,
what `DataCollatorWithPadding` does by default (pad to the longest, no multiple; prediction in input order).

Writes OUT/eval_results.tsv (class probabilities per line; the score for regression) and OUT/result.json.
torch keeps its default thread count (one per core), as a user gets it, unless --threads says otherwise (the
accuracy runs use 1: on a 2-core machine shared with another busy process, torch's 2 OpenMP threads wait on each
other at every op and train 3-4x slower than 1 thread).
"""
from __future__ import annotations

import argparse
import math
import os
import time
from typing import Callable, Iterable

import numpy as np
import torch

from bench.result import report
from bert_tf.data.tfrecord import read_examples

FEATURES = ("input_ids", "input_mask", "segment_ids")
NO_DECAY = ("LayerNorm", "layer_norm", "bias")  # the original's exclude_from_weight_decay
PROGRESS_STEPS = 25


def batch_inputs(data: dict[str, torch.Tensor], rows, trim: bool) -> dict[str, torch.Tensor]:
    """The model inputs of `rows` (an index tensor or a slice), cut to the longest row's length when `trim`."""
    mask = data["input_mask"][rows]
    length = int(mask.sum(dim=1).max()) if trim else mask.shape[1]
    return {"input_ids": data["input_ids"][rows][:, :length], "attention_mask": mask[:, :length],
            "token_type_ids": data["segment_ids"][rows][:, :length]}


class AdamWeightDecay(torch.optim.Optimizer):
    """The original BERT AdamWeightDecayOptimizer: Adam moments without bias correction, decoupled weight decay.

    p -= lr * (m / (sqrt(v) + eps) + wd * p), with m, v updated first; no bias correction.
    """

    def __init__(self, params: Iterable, lr: float, weight_decay: float = 0.01, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure: Callable | None = None) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                m, v = state["m"], state["v"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = m / (v.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                p.add_(update, alpha=-group["lr"])


def learning_rate(step: int, init_lr: float, num_train_steps: int, num_warmup_steps: int) -> float:
    """The original's schedule for the update after `step` completed steps (evaluated at step + 1, as ours)."""
    at = step + 1.0
    if num_warmup_steps and at < num_warmup_steps:
        return init_lr * at / num_warmup_steps
    return init_lr * (1.0 - min(at, num_train_steps) / num_train_steps)


def clip_by_global_norm(params: list[torch.nn.Parameter], clip_norm: float = 1.0) -> float:
    """tf.clip_by_global_norm: every gradient times clip_norm / max(global_norm, clip_norm); returns the norm."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
    if norm > clip_norm:
        for g in grads:
            g.mul_(clip_norm / norm)
    return norm


def read_features(path: str, regression: bool) -> dict[str, torch.Tensor]:
    """Our cached feature rows (one TFRecord file) as tensors: ids and masks int64, labels long or float."""
    rows = list(read_examples(path))
    tensors = {key: torch.tensor([row[key] for row in rows], dtype=torch.long) for key in FEATURES}
    labels = [row["label_ids"][0] for row in rows]
    tensors["labels"] = torch.tensor(labels, dtype=torch.float32 if regression else torch.long)
    return tensors


def batch_indices(num_rows: int, steps: int, batch_size: int, seed: int, order_path: str | None) -> np.ndarray:
    """[steps, batch_size] row indices: our pipeline's order when given, else seeded reshuffled epochs."""
    if order_path:
        order = np.load(order_path)
        if order.shape[0] < steps or order.shape[1] != batch_size:
            raise SystemExit(f"{order_path}: shape {order.shape}, need at least [{steps}, {batch_size}]")
        return order[:steps]
    rng = np.random.default_rng(seed)
    epochs = math.ceil(steps * batch_size / num_rows) + 1
    flat = np.concatenate([rng.permutation(num_rows) for _ in range(epochs)])
    return flat[:steps * batch_size].reshape(steps, batch_size)


def dropout_overrides(dropout: float | None) -> dict:
    """from_pretrained keywords that set the config's hidden and attention dropout (none: keep the config's)."""
    return {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}


def load_model(init: str, num_labels: int, dropout: float | None = None):
    """BertForSequenceClassification from a Hugging Face folder (its classifier head too, when it has one);
    `dropout` overrides the config's hidden and attention dropout."""
    import transformers

    kwargs: dict = {"num_labels": num_labels, **dropout_overrides(dropout)}
    if num_labels == 1:
        kwargs["problem_type"] = "regression"
    return transformers.BertForSequenceClassification.from_pretrained(init, **kwargs)


def make_optimizer(model: torch.nn.Module, lr: float) -> AdamWeightDecay:
    """Weight decay 0.01 on every parameter except LayerNorm weights and biases (the original's exclusions)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if any(word in name for word in NO_DECAY) else decay).append(param)
    return AdamWeightDecay([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                           lr=lr)


def train(model, data: dict[str, torch.Tensor], order: np.ndarray, args: argparse.Namespace,
          num_train_steps: int, first: int = 0) -> list[float]:
    """Runs the steps of `order` (global step numbers from `first`); returns each step's loss."""
    model.train()
    optimizer = make_optimizer(model, args.learning_rate)
    params = [p for p in model.parameters() if p.requires_grad]
    num_warmup = int(num_train_steps * args.warmup_proportion)
    losses = []
    for offset, rows in enumerate(order):
        index = torch.from_numpy(rows)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(first + offset, args.learning_rate, num_train_steps, num_warmup)
        out = model(**batch_inputs(data, index, args.dynamic_padding), labels=data["labels"][index])
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        clip_by_global_norm(params, 1.0)
        optimizer.step()
        losses.append(out.loss.item())
        if (offset + 1) % PROGRESS_STEPS == 0:
            print(f"step {first + offset + 1}/{num_train_steps} | loss {np.mean(losses[-PROGRESS_STEPS:]):.4f} | "
                  f"lr {optimizer.param_groups[0]['lr']:.3g}", flush=True)
    return losses


def predict(model, data: dict[str, torch.Tensor], batch_size: int, limit: int | None = None,
            trim: bool = False) -> np.ndarray:
    """Logits of the rows (the first `limit`), in order, batch by batch, dropout off; each batch cut to its longest
    row when `trim`."""
    model.eval()
    count = len(data["labels"]) if limit is None else limit
    parts = []
    with torch.inference_mode():
        for start in range(0, count, batch_size):
            sl = slice(start, min(start + batch_size, count))
            parts.append(model(**batch_inputs(data, sl, trim)).logits.float().numpy())
    return np.concatenate(parts).astype(np.float64)


def write_predictions(path: str, logits: np.ndarray, regression: bool) -> None:
    """Class probabilities per line (the score itself for regression), as our program's eval_results.tsv."""
    if regression:
        values = logits
    else:
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        values = shifted / shifted.sum(axis=-1, keepdims=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in values:
            f.write("\t".join(str(float(v)) for v in row) + "\n")


def run_accuracy(args: argparse.Namespace) -> dict:
    """Full fine-tuning with the recipe, then dev predictions; timings of each part."""
    regression = args.num_labels == 1
    train_data, dev_data = read_features(args.train, regression), read_features(args.dev, regression)
    rows = len(train_data["labels"])
    num_train_steps = int(rows / args.train_batch_size * args.num_train_epochs)  # finetune.train_steps
    order = batch_indices(rows, num_train_steps, args.train_batch_size, args.seed, args.order)
    model = load_model(args.init, args.num_labels, args.dropout)
    start = time.perf_counter()
    losses = train(model, train_data, order, args, num_train_steps)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    logits = predict(model, dev_data, args.predict_batch_size, trim=args.dynamic_padding)
    predict_s = time.perf_counter() - start
    write_predictions(os.path.join(args.out, "eval_results.tsv"), logits, regression)
    return {"train_rows": rows, "train_steps": num_train_steps, "train_s": train_s, "predict_s": predict_s,
            "dev_rows": len(logits), "loss_first": losses[0] if losses else None,
            "loss_last_10": float(np.mean(losses[-10:])) if losses else None,
            "attention": model.config._attn_implementation, "losses": losses}


def run_speed(args: argparse.Namespace) -> dict:
    """Training steps/s after warm-up, and steady prediction examples/s over the dev set per batch size."""
    regression = args.num_labels == 1
    train_data, dev_data = read_features(args.train, regression), read_features(args.dev, regression)
    rows = len(train_data["labels"])
    steps = args.warmup_steps + args.timed_steps
    order = batch_indices(rows, steps, args.train_batch_size, args.seed, args.order)
    model = load_model(args.init, args.num_labels, args.dropout)
    num_train_steps = int(rows / args.train_batch_size * args.num_train_epochs)
    train(model, train_data, order[:args.warmup_steps], args, num_train_steps)
    start = time.perf_counter()
    train(model, train_data, order[args.warmup_steps:], args, num_train_steps, first=args.warmup_steps)
    train_s = time.perf_counter() - start
    result = {"train_examples_per_s": args.timed_steps * args.train_batch_size / train_s, "train_s": train_s,
              "timed_steps": args.timed_steps, "predict": {}, "attention": model.config._attn_implementation}
    dev_rows = len(dev_data["labels"])
    for batch_size in args.speed_predict_batch_sizes:
        predict(model, dev_data, batch_size, limit=batch_size, trim=args.dynamic_padding)  # warm-up batch
        start = time.perf_counter()
        for _ in range(args.speed_predict_passes):
            predict(model, dev_data, batch_size, trim=args.dynamic_padding)
        seconds = time.perf_counter() - start
        result["predict"][str(batch_size)] = {"examples_per_s": dev_rows * args.speed_predict_passes / seconds,
                                              "seconds": seconds, "rows": dev_rows,
                                              "passes": args.speed_predict_passes}
    return result


def add_recipe_arguments(p: argparse.ArgumentParser, learning_rate: float, epochs: float) -> None:
    """The options every HF side of a benchmark shares: output, seed, batch order, recipe, threads, --speed."""
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--order", default=None, help="[steps, batch] row indices (.npy); default: seeded shuffle")
    p.add_argument("--learning_rate", type=float, default=learning_rate)
    p.add_argument("--train_batch_size", type=int, default=32)
    p.add_argument("--num_train_epochs", type=float, default=epochs)
    p.add_argument("--warmup_proportion", type=float, default=0.1)
    p.add_argument("--predict_batch_size", type=int, default=8)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    p.add_argument("--speed", action="store_true", help="time training steps and prediction instead")


def add_dropout_argument(p: argparse.ArgumentParser) -> None:
    """--dropout, for the HF sides whose models take `dropout_overrides` (the fidelity checks' dropout off)."""
    p.add_argument("--dropout", type=float, default=None, help="override the config's dropout (0: off)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="Hugging Face BERT folder")
    p.add_argument("--train", required=True, help="our cached train features (TFRecord)")
    p.add_argument("--dev", required=True, help="our cached dev features (TFRecord)")
    p.add_argument("--num_labels", type=int, required=True, help="1: regression (mean squared error)")
    add_recipe_arguments(p, learning_rate=2e-5, epochs=3.0)
    add_dropout_argument(p)
    p.add_argument("--dynamic_padding", action="store_true",
                   help="cut every batch to its longest row (default: padded to max_seq_length)")
    p.add_argument("--warmup_steps", type=int, default=5)
    p.add_argument("--timed_steps", type=int, default=40)
    p.add_argument("--speed_predict_batch_sizes", default="8,32")
    p.add_argument("--speed_predict_passes", type=int, default=3, help="timed passes over the dev set")
    args = p.parse_args(argv)
    args.speed_predict_batch_sizes = [int(b) for b in args.speed_predict_batch_sizes.split(",") if b]
    return args


def run_main(args: argparse.Namespace, run: Callable[[argparse.Namespace], dict], quiet_keys: tuple[str, ...] = (),
             **extra) -> None:
    """Seeds torch, sets its threads, runs `run(args)`, and writes its result (with wall time, threads, torch
    version and `extra`) to OUT/result.json and as a `RESULT {json}` line (without `quiet_keys`)."""
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    result = run(args)
    result.update(wall_s=time.perf_counter() - start, threads=torch.get_num_threads(), torch=torch.__version__,
                  **extra)
    report(args.out, result, quiet=quiet_keys)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_main(args, run_speed if args.speed else run_accuracy, dynamic_padding=args.dynamic_padding)


if __name__ == "__main__":
    main()
