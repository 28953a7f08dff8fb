"""Run as a script by test_training.py: two logical CPUs, MirroredStrategy, tiny model, real records.

    python mirrored_vs_single.py OUT_DIR equal    # single device vs 2 replicas, same global batch, dropout 0
    python mirrored_vs_single.py OUT_DIR resume   # 2 replicas: uninterrupted 6 steps vs 4 + resumed 2
Prints one JSON line with the largest weight difference.
"""
import json
import sys

import bert_tf._env  # noqa: F401
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402

import test_training as t  # noqa: E402


def mirrored() -> tf.distribute.Strategy:
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def max_diff(a, b) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(t.weights(a), t.weights(b)))


out, mode = sys.argv[1], sys.argv[2]
if mode == "equal":
    first = t.make_trainer(f"{out}/single", 4, dropout=0.0)
    first.train()
    second = t.make_trainer(f"{out}/mirrored", 4, dropout=0.0, strategy=mirrored())
    second.train()
else:
    tf.config.experimental.enable_op_determinism()
    first = t.make_trainer(f"{out}/whole", 6, dropout=0.0, strategy=mirrored())
    first.train()
    t.make_trainer(f"{out}/split", 4, dropout=0.0, strategy=mirrored()).train()
    second = t.make_trainer(f"{out}/split", 6, dropout=0.0, strategy=mirrored())
    second.train()
print(json.dumps({"replicas": second.strategy.num_replicas_in_sync, "max_abs_diff": max_diff(first, second),
                  "step": int(second.global_step.numpy())}))
