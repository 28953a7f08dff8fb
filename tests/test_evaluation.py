"""Prediction over whole data sets: every example exactly once, in order, on one device and on two replicas."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertClassifierModel
from bert_tf.tasks.base import FeatureSpec
from bert_tf.tasks.batching import prediction_batcher
from bert_tf.training.evaluation import INDEX_KEY, predict
from bert_tf.training.trainer import TrainingError

TINY = dict(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=32)


def _examples(count: int, seq: int = 8, ragged: bool = False) -> dict[str, np.ndarray]:
    """Rows of random ids; `ragged`: of random lengths 2..seq, padded at the end as the packers do."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, seq + 1, count) if ragged else np.full(count, seq)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    return {"input_ids": rng.integers(1, 100, (count, seq)).astype(np.int32) * mask, "input_mask": mask,
            "segment_ids": np.zeros((count, seq), np.int32), "label_ids": np.arange(count, dtype=np.int32)}


def _length_sorted(seq: int):
    spec = {name: FeatureSpec("int", (seq,), sequence=True) for name in ("input_ids", "input_mask", "segment_ids")}
    return prediction_batcher(spec, enabled=True)


def _model(strategy):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        return BertClassifierModel(BertConfig(**TINY), num_labels=3)


def _predict(strategy, model, examples, count, batch, batcher=None):
    return predict(strategy, model, lambda: tf.data.Dataset.from_tensor_slices(examples), count, batch,
                   ["logits"], ["label_ids"], batcher=batcher)


@pytest.mark.parametrize("count, batch", [(13, 4), (8, 4), (3, 8), (1, 2)])
def test_prediction_covers_every_example_once_in_input_order_with_a_partial_tail_batch(count, batch):
    examples = _examples(count)
    strategy = tf.distribute.get_strategy()
    model = _model(strategy)
    out = _predict(strategy, model, examples, count, batch)
    np.testing.assert_array_equal(out[INDEX_KEY], np.arange(count))
    np.testing.assert_array_equal(out["label_ids"], examples["label_ids"])
    direct = model({k: v for k, v in examples.items()}, training=False)["logits"].numpy()
    np.testing.assert_allclose(out["logits"], direct, atol=1e-6)


@pytest.mark.slow
def test_two_replicas_predict_what_one_device_predicts_with_no_example_counted_twice():
    """In a fresh process: two logical CPUs must be configured before TensorFlow starts."""
    here = os.path.dirname(os.path.abspath(__file__))
    script = textwrap.dedent("""
        import json, sys
        import bert_tf._env
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import numpy as np
        import test_evaluation as t
        examples = t._examples(11)
        mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        model = t._model(mirrored)
        out = t._predict(mirrored, model, examples, 11, 4)
        direct = model(examples, training=False)["logits"].numpy()
        ragged = t._examples(11, seq=32, ragged=True)
        sorted_out = t._predict(mirrored, model, ragged, 11, 4, t._length_sorted(32))
        sorted_diff = np.abs(sorted_out["logits"] - model(ragged, training=False)["logits"].numpy()).max()
        print(json.dumps({"replicas": mirrored.num_replicas_in_sync, "index": out[t.INDEX_KEY].tolist(),
                          "labels": out["label_ids"].tolist(), "sorted_labels": sorted_out["label_ids"].tolist(),
                          "max_abs_diff": float(np.abs(out["logits"] - direct).max()),
                          "sorted_max_abs_diff": float(sorted_diff)}))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(here), here])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    assert result["index"] == list(range(11)) and result["labels"] == list(range(11))
    assert result["max_abs_diff"] < 1e-6
    assert result["sorted_labels"] == list(range(11)) and result["sorted_max_abs_diff"] < 1e-5


@pytest.mark.parametrize("count, batch", [(13, 4), (1, 2), (50, 3)])
def test_length_sorted_trimmed_batches_predict_every_row_once_in_input_order(count, batch):
    examples = _examples(count, seq=32, ragged=True)
    strategy = tf.distribute.get_strategy()
    model = _model(strategy)
    out = _predict(strategy, model, examples, count, batch, _length_sorted(32))
    np.testing.assert_array_equal(out["label_ids"], examples["label_ids"])
    direct = model(examples, training=False)["logits"].numpy()
    np.testing.assert_allclose(out["logits"], direct, atol=1e-5)


def test_prediction_refuses_an_input_shorter_than_its_stated_count():
    strategy = tf.distribute.get_strategy()
    with pytest.raises(TrainingError, match="expected each of 12 exactly once"):
        _predict(strategy, _model(strategy), _examples(10), 12, 4)
