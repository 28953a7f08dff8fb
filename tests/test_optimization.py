"""The original optimizer (AdamWeightDecay, no bias correction) and schedule, against one training
step the ORIGINAL code took from the shared checkpoint (reference.json: deterministic_resume_step)."""
import json

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.checkpoints import (CheckpointError, CheckpointMismatchError, get_tf1_weights,
                                 load_tf1_checkpoint, load_tf1_optimizer_state)
from bert_tf.checkpoints.mapping import tf1_values_by_variable
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertPretrainingModel
from bert_tf.pretraining.objective import PRETRAINING
from bert_tf.training.objectives import total_loss
from bert_tf.training.optimization import AdamWeightDecay, WarmupPolynomialDecay, create_optimizer

FOLDER = "tf1_tiny_from_original_bert_code"


@pytest.fixture(scope="module")
def original_step():
    """Our model and optimizer restored from the original's checkpoint, and what the original did."""
    d = shared_path("checkpoints", FOLDER)
    ref = json.loads((d / "reference.json").read_text())
    config = BertConfig.from_json_file(d / "bert_config.json").to_dict()
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # as the reference step
    model = BertPretrainingModel(BertConfig.from_dict(config))
    load_tf1_checkpoint(model, d / "bert_model.ckpt")
    training = ref["training"]
    optimizer = create_optimizer(training["learning_rate"], training["num_train_steps"],
                                 training["num_warmup_steps"])
    step = load_tf1_optimizer_state(model, optimizer, d / "bert_model.ckpt")
    inputs = {k: np.asarray(v) for k, v in ref["inputs"].items()
              if k not in ("tokens", "tokens_after_masking", "note")}
    return model, optimizer, step, inputs, ref["deterministic_resume_step"]


def test_one_step_from_the_original_checkpoint_matches_the_original(original_step):
    model, optimizer, step, inputs, expected = original_step
    assert step == expected["global_step_before"] == 3
    lr = optimizer.learning_rate  # evaluated at the optimizer's step, as apply() will use it
    np.testing.assert_allclose(float(lr), expected["learning_rate_used"], rtol=1e-7)
    with tf.GradientTape() as tape:
        losses, _ = PRETRAINING.terms_fn(model, inputs, True)
        loss = total_loss(list(losses.values()))
    grads = tape.gradient(loss, model.trainable_variables)
    np.testing.assert_allclose(float(loss), expected["loss"], atol=1e-5)
    dense = [tf.convert_to_tensor(g) for g in grads]  # a gather's sparse gradient may repeat rows
    np.testing.assert_allclose(float(tf.linalg.global_norm(dense)), expected["grad_global_norm"], rtol=1e-5)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert int(optimizer.iterations) == expected["global_step_after"]

    after = {**get_tf1_weights(model),
             **{f"{k}/adam_m": v for k, v in get_tf1_weights(model, lambda w: optimizer.slots(w)[0]).items()},
             **{f"{k}/adam_v": v for k, v in get_tf1_weights(model, lambda w: optimizer.slots(w)[1]).items()}}
    assert sorted(after) == sorted(expected["variables_after"])
    for name, stats in expected["variables_after"].items():
        value = after[name].astype(np.float64)
        assert list(value.shape) == stats["shape"], name
        scale = max(1.0, float(np.abs(value).max()))
        # every update is lr * O(1) = 3e-3; float32 round-off of the original's op order is ~1e-7 each
        np.testing.assert_allclose(value.reshape(-1)[:6], stats["first_values"], rtol=0,
                                   atol=2e-6 * scale, err_msg=name)
        # sums: relative, with a floor of 1e-7 per element for variables that are round-off noise
        # (the key bias' gradient is exactly 0 in exact arithmetic; its values are ~1e-9)
        for got, want in ((value.sum(), stats["sum"]), (np.abs(value).sum(), stats["abs_sum"])):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7 * value.size * scale, err_msg=name)


def test_weight_decay_skips_layer_norm_and_biases_as_the_original():
    d = shared_path("checkpoints", FOLDER)
    model = BertPretrainingModel(BertConfig.from_json_file(d / "bert_config.json"))
    load_tf1_checkpoint(model, d / "bert_model.ckpt")
    optimizer = AdamWeightDecay()
    decayed = {name for name, flag in get_tf1_weights(
        model, lambda v: keras.Variable(np.full(v.shape, float(optimizer.decays(v))))).items() if flag.all()}
    original = {n for n in get_tf1_weights(model)
                if not any(word in n for word in ("LayerNorm", "layer_norm", "bias"))}
    assert decayed == original
    assert "bert/encoder/layer_0/attention/self/query/kernel" in decayed
    assert "cls/predictions/output_bias" not in decayed


def test_schedule_warms_up_then_decays_linearly_to_zero():
    schedule = WarmupPolynomialDecay(init_lr=1e-4, num_train_steps=10, num_warmup_steps=4)
    # the update after n completed steps uses the schedule at n + 1 (the original's ordering)
    got = [float(schedule(n)) for n in range(12)]
    want = [1e-4 * s / 4 if s < 4 else 1e-4 * (1 - min(s, 10) / 10) for s in range(1, 13)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    restored = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert float(restored(5)) == pytest.approx(got[5])


def test_bias_correction_option_gives_keras_adam():
    var_ours = keras.Variable(np.array([1.0, -2.0, 3.0], np.float32), name="kernel")
    var_keras = keras.Variable(np.array([1.0, -2.0, 3.0], np.float32), name="kernel")
    ours = AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.0, bias_correction=True, epsilon=1e-7)
    theirs = keras.optimizers.Adam(learning_rate=0.1, epsilon=1e-7)
    for grad in ([0.5, -1.0, 2.0], [0.1, 0.3, -0.2], [1.0, 1.0, 1.0]):
        ours.apply_gradients([(tf.constant(grad), var_ours)])
        theirs.apply_gradients([(tf.constant(grad), var_keras)])
    np.testing.assert_allclose(var_ours.numpy(), var_keras.numpy(), rtol=1e-5)  # same formula, fused kernel


def test_slots_from_another_checkpoint_are_checked_by_name(original_step):
    model = original_step[0]
    with pytest.raises(CheckpointMismatchError, match="bert/encoder/layer_0/attention/self/key/kernel"):
        tf1_values_by_variable(model, {"bert/encoder/layer_0/attention/self/query/kernel": np.zeros((64, 64))})
    with pytest.raises(CheckpointMismatchError, match="not/a/variable"):
        tf1_values_by_variable(model, {"not/a/variable": np.zeros(3)})


def test_checkpoint_without_slots_gets_one_readable_error(tmp_path):
    d = shared_path("checkpoints", FOLDER)
    model = BertPretrainingModel(BertConfig.from_json_file(d / "bert_config.json"))
    load_tf1_checkpoint(model, d / "bert_model.ckpt")
    from bert_tf.checkpoints import save_tf1_checkpoint
    save_tf1_checkpoint(model, tmp_path / "model.ckpt")  # weights only
    with pytest.raises(CheckpointError, match="no adam_m slot for bert/embeddings/word_embeddings"):
        load_tf1_optimizer_state(model, AdamWeightDecay(), tmp_path / "model.ckpt")


def _lamb_reference(params, grads_per_step, lr, decayed, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
    """NumPy LAMB (bias-corrected moments, trust ratio on decayed variables), float64."""
    params = {k: v.astype(np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v_ = {k: np.zeros_like(v) for k, v in params.items()}
    for t, grads in enumerate(grads_per_step, start=1):
        for k, g in grads.items():
            m[k] = b1 * m[k] + (1 - b1) * g
            v_[k] = b2 * v_[k] + (1 - b2) * g * g
            r = (m[k] / (1 - b1 ** t)) / (np.sqrt(v_[k] / (1 - b2 ** t)) + eps)
            ratio = 1.0
            if k in decayed:
                r = r + wd * params[k]
                w_norm, r_norm = np.linalg.norm(params[k]), np.linalg.norm(r)
                ratio = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
            params[k] = params[k] - lr * ratio * r
    return params


def test_lamb_matches_a_numpy_reference_with_trust_ratio_and_exclusions():
    from bert_tf.training.optimization import Lamb
    rng = np.random.default_rng(0)
    start = {"dense/kernel": rng.standard_normal((4, 3)).astype(np.float32),
             "dense/bias": rng.standard_normal(3).astype(np.float32)}
    variables = {k: keras.Variable(v, name=k.split("/")[1]) for k, v in start.items()}
    optimizer = Lamb(learning_rate=0.01)
    assert optimizer.decays(variables["dense/kernel"]) and not optimizer.decays(variables["dense/bias"])
    steps = [{k: rng.standard_normal(v.shape) for k, v in start.items()} for _ in range(3)]
    for grads in steps:
        optimizer.apply_gradients([(tf.constant(grads[k], tf.float32), variables[k]) for k in start])
    want = _lamb_reference(start, steps, 0.01, decayed={"dense/kernel"})
    for k in start:
        np.testing.assert_allclose(variables[k].numpy(), want[k], rtol=2e-5, atol=1e-6, err_msg=k)
