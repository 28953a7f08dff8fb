"""The training loop on real records (the original program's golden pre-training TFRecords)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertPretrainingModel
from bert_tf.pretraining.input_pipeline import pretraining_dataset
from bert_tf.training.optimization import create_optimizer
from bert_tf.checkpoints import load_tf1_checkpoint
from bert_tf.pretraining.objective import PRETRAINING
from bert_tf.training.evaluation import evaluate
from bert_tf.training.results import write_eval_results
from bert_tf.training.trainer import LoopConfig, Trainer, TrainingError

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=128)


def records() -> list[str]:
    return [str(shared_path("golden", "create_pretraining_data", "default_uncased", "default_uncased.tfrecord"))]


def make_trainer(output_dir, num_train_steps, *, strategy=None, dropout=0.1, lr=1e-3, batch=8,
                 save_every=2, steps_per_loop=2, jit_compile=False, accumulation=1):
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(7)
    config = BertConfig(**TINY, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    with strategy.scope():
        model = BertPretrainingModel(config)
        optimizer = create_optimizer(lr, num_train_steps=20, num_warmup_steps=2)

    def dataset_fn(context):
        return pretraining_dataset(records(), batch_size=context.get_per_replica_batch_size(batch),
                                   max_seq_length=128, max_predictions_per_seq=20, is_training=True,
                                   input_context=context, seed=3, deterministic=True)

    loop = LoopConfig(output_dir=str(output_dir), num_train_steps=num_train_steps, global_batch_size=batch,
                      steps_per_loop=steps_per_loop, save_checkpoints_steps=save_every,
                      jit_compile=jit_compile, num_accumulation_steps=accumulation)
    return Trainer(strategy, model, optimizer, PRETRAINING, loop, dataset_fn)


def weights(trainer) -> list[np.ndarray]:
    return [v.numpy() for v in trainer.model.trainable_variables]


def test_training_lowers_the_loss_and_writes_checkpoints_and_summaries(tmp_path):
    trainer = make_trainer(tmp_path, 12, lr=5e-3, steps_per_loop=4, save_every=4)
    scalars = trainer.train()
    assert int(trainer.global_step.numpy()) == 12
    assert scalars["loss"] < 10.0 and np.isfinite(scalars["grad_norm"])
    assert 0.0 <= scalars["masked_lm_accuracy"] <= 1.0
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == ["ckpt-12.index", "ckpt-4.index", "ckpt-8.index"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(tmp_path / "train")).Reload()
    tags = set(events.Tags()["tensors"]) | set(events.Tags()["scalars"])
    assert {"loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy",
            "learning_rate", "grad_norm", "examples_per_second"} <= tags
    losses = [float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors("loss")]
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path):
    whole = make_trainer(tmp_path / "whole", 6)
    whole.train()
    first = make_trainer(tmp_path / "split", 4)
    first.train()
    resumed = make_trainer(tmp_path / "split", 6)  # new model and optimizer objects, same folder
    assert resumed.restore() == 4
    resumed.train()
    for a, b in zip(weights(whole), weights(resumed)):
        np.testing.assert_array_equal(a, b)


def test_non_finite_loss_stops_with_the_last_good_checkpoint_named(tmp_path):
    make_trainer(tmp_path, 2).train()  # a good checkpoint at step 2
    trainer = make_trainer(tmp_path, 8, lr=1e30)
    with pytest.raises(TrainingError, match=r"loss is nan .* Last good checkpoint: .*ckpt-2"):
        trainer.train()


def _run_mirrored(tmp_path, mode: str) -> dict:
    """Runs tests/mirrored_vs_single.py in a fresh process (logical devices are set before TF starts)."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(here), here]),
           "BERT_TF_SHARED": str(shared_path().parent)}
    done = subprocess.run([sys.executable, os.path.join(here, "mirrored_vs_single.py"), str(tmp_path), mode],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_two_replicas_train_like_one_device_on_the_same_global_batch(tmp_path):
    result = _run_mirrored(tmp_path, "equal")
    assert result["replicas"] == 2
    assert result["max_abs_diff"] < 1e-6  # summation order only


@pytest.mark.slow
def test_two_replicas_resume_exactly_by_skipping_consumed_batches(tmp_path):
    result = _run_mirrored(tmp_path, "resume")
    assert result["step"] == 6 and result["max_abs_diff"] == 0.0


def test_xla_compiled_steps_match_the_plain_ones(tmp_path):
    plain = make_trainer(tmp_path / "plain", 2, dropout=0.0)
    plain.train()
    compiled = make_trainer(tmp_path / "xla", 2, dropout=0.0, jit_compile=True)
    compiled.train()
    for a, b in zip(weights(plain), weights(compiled)):
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_accumulating_two_half_batches_equals_one_full_batch(tmp_path):
    full = make_trainer(tmp_path / "full", 2, dropout=0.0, batch=8)
    full.train()
    halves = make_trainer(tmp_path / "halves", 2, dropout=0.0, batch=4, accumulation=2)
    halves.train()
    assert int(halves.global_step.numpy()) == 2
    for a, b in zip(weights(full), weights(halves)):  # the same 8 records per step
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_eval_matches_the_original_model_fn_in_eval_mode(tmp_path):
    folder = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    ref = json.loads((folder / "reference.json").read_text())
    model = BertPretrainingModel(BertConfig.from_json_file(folder / "bert_config.json"))
    load_tf1_checkpoint(model, folder / "bert_model.ckpt")
    inputs = {k: np.asarray(v) for k, v in ref["inputs"].items() if k not in ("tokens", "tokens_after_masking", "note")}
    results = evaluate(tf.distribute.get_strategy(), model, PRETRAINING,
                       lambda context: tf.data.Dataset.from_tensors(inputs).repeat(), steps=2)
    expected = ref["model_fn_eval_mode"]
    assert results["loss"] == pytest.approx(expected["loss"], abs=1e-5)
    for name, value in expected["metrics"].items():
        assert results[name] == pytest.approx(value, abs=1e-5), name
    write_eval_results(tmp_path / "eval_results.txt", {**results, "global_step": 3})
    lines = (tmp_path / "eval_results.txt").read_text().splitlines()
    assert [line.split(" = ")[0] for line in lines] == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                                                        "next_sentence_accuracy", "next_sentence_loss"]


def test_lamb_trains_in_the_loop(tmp_path):
    from bert_tf.training.optimization import Lamb
    trainer = make_trainer(tmp_path, 4, steps_per_loop=4, save_every=4)
    with tf.distribute.get_strategy().scope():
        lamb = Lamb(learning_rate=1e-2, clip_norm=1.0)
    trainer = Trainer(trainer.strategy, trainer.model, lamb, PRETRAINING, trainer.config, trainer._dataset_fn)
    before = weights(trainer)
    scalars = trainer.train()
    assert np.isfinite(scalars["loss"]) and int(trainer.global_step.numpy()) == 4
    assert any(not np.array_equal(a, b) for a, b in zip(before, weights(trainer)))


def test_mixed_float16_trains_with_dynamic_loss_scaling(tmp_path):
    keras.config.set_dtype_policy("mixed_float16")
    try:
        base = make_trainer(tmp_path / "base", 6)
        with tf.distribute.get_strategy().scope():
            scaled = keras.optimizers.LossScaleOptimizer(create_optimizer(1e-3, 20, 2))
        trainer = Trainer(base.strategy, base.model, scaled, PRETRAINING,
                          LoopConfig(output_dir=str(tmp_path / "fp16"), num_train_steps=6, global_batch_size=8,
                                     steps_per_loop=3, save_checkpoints_steps=3), base._dataset_fn)
        scalars = trainer.train()
    finally:
        keras.config.set_dtype_policy("float32")
    assert trainer.model.bert.embeddings.compute_dtype == "float16"
    assert np.isfinite(scalars["loss"]) and 1.0 <= scalars["loss_scale"] <= 2.0 ** 15
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    assert "loss_scale" in EventAccumulator(str(tmp_path / "fp16" / "train")).Reload().Tags()["tensors"]
    resumed = Trainer(base.strategy, base.model, scaled, PRETRAINING, trainer.config, base._dataset_fn)
    assert resumed.restore() == 6


def test_a_long_loop_logs_progress_before_it_ends_and_trains_as_one_call(tmp_path, monkeypatch):
    from absl import logging as absl_logging
    from bert_tf.training import trainer as trainer_module
    one_call = make_trainer(tmp_path / "one", 6, steps_per_loop=6, save_every=6)
    one_call.train()
    lines = []
    monkeypatch.setattr(trainer_module, "PROGRESS_SECONDS", 0.0)  # a line after every chunk
    monkeypatch.setattr(absl_logging, "info", lambda fmt, *args: lines.append(fmt % args if args else fmt))
    chunked = make_trainer(tmp_path / "chunked", 6, steps_per_loop=6, save_every=6)
    chunked.train()
    progress = [line for line in lines if line.startswith("step ")]
    assert [line.split(" | ")[0] for line in progress][:2] == ["step 1/6", "step 2/6"]
    assert progress[-1].startswith("step 6/6")
    for a, b in zip(weights(one_call), weights(chunked)):
        np.testing.assert_array_equal(a, b)
