"""The row order of our fine-tuning batches, for the Hugging Face side of the classifier benchmark.

Our program (bert_tf.tasks.finetune) seeds TensorFlow's global seed with --seed (keras.utils.set_random_seed) and
draws training batches as `rows.repeat().shuffle(100, seed=seed).batch(batch, drop_remainder=True)` over the cached
rows in file order. The shuffle's permutation depends only on the row count and the (global, op) seed pair, not on
the rows' content, so the same pipeline over row indices gives the indices of every batch.

    python -m bench._batch_order --rows=3668 --seed=1 --batch_size=32 --steps=343 --out=order.npy
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from bert_tf._env import tf  # TensorFlow, imported quietly
import keras

from bert_tf.data.tfrecord import read_examples
from bert_tf.tasks.finetune import SHUFFLE_BUFFER


def batch_order(rows: int, seed: int, batch_size: int, steps: int) -> np.ndarray:
    """[steps, batch_size] row indices, drawn as our training pipeline draws its batches."""
    keras.utils.set_random_seed(seed)
    indices = tf.data.Dataset.range(rows).repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
    batches = indices.batch(batch_size, drop_remainder=True).take(steps)
    return np.stack([batch.numpy() for batch in batches]).astype(np.int64)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=None, help="the row count (or --train_file)")
    p.add_argument("--train_file", default=None, help="our cached train features: their row count")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--steps", type=int, default=None, help="default: int(rows / batch_size * --epochs)")
    p.add_argument("--epochs", type=float, default=None)
    p.add_argument("--out", required=True, help="the .npy to write (a folder: OUT/order.npy)")
    args = p.parse_args(argv)
    rows = args.rows if args.rows is not None else sum(1 for _ in read_examples(args.train_file))
    steps = args.steps if args.steps is not None else int(rows / args.batch_size * args.epochs)
    out = os.path.join(args.out, "order.npy") if os.path.isdir(args.out) else args.out
    np.save(out, batch_order(rows, args.seed, args.batch_size, steps))


if __name__ == "__main__":
    main()
