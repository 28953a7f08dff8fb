"""bert_tf's fused CPU kernels: same values and gradients as TensorFlow's GELU, used only where they apply."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model import activations
from bert_tf.model import custom_ops
from shared_data import REPO_ROOT

IN_CI = os.environ.get("CI", "").lower() == "true"


def require_library():
    lib = custom_ops.library()
    if lib is None:
        assert not IN_CI, "CI must build bert_tf's fused CPU kernels (bert_tf/model/custom_ops.cc)"
        pytest.skip("bert_tf's fused CPU kernels could not be built here (no C++ compiler?)")
    return lib


def float64_gelu_and_grad(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float64)
    t = np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))
    slope = np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x ** 2)
    return 0.5 * x * (1 + t), dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * slope)


def test_fused_gelu_and_gradient_are_as_accurate_as_tensorflows():
    lib = require_library()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal([513, 37]) * 4).astype(np.float32)  # odd sizes: vector tails
    dy = rng.standard_normal(x.shape).astype(np.float32)
    x_t = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x_t)
        y_tf = tf.nn.gelu(x_t, approximate=True)
    grad_tf = tape.gradient(y_tf, x_t, tf.constant(dy)).numpy()
    y_ours = lib.bert_gelu_tanh(x).numpy()
    grad_ours = lib.bert_gelu_tanh_grad(dy, x).numpy()
    y_64, grad_64 = float64_gelu_and_grad(x, dy)
    np.testing.assert_allclose(y_ours, y_tf.numpy(), atol=2e-6, rtol=0)
    np.testing.assert_allclose(grad_ours, grad_tf, atol=5e-5, rtol=0)
    # Against float64 the fused kernels are no less accurate than TensorFlow's composite ops.
    assert np.abs(y_ours - y_64).max() <= max(np.abs(y_tf.numpy() - y_64).max(), 1e-6) * 1.5
    assert np.abs(grad_ours - grad_64).max() <= np.abs(grad_tf - grad_64).max() * 1.5


def _op_types(fn, *args) -> set[str]:
    graph = fn.get_concrete_function(*args).graph
    return {op.type for op in graph.get_operations()}


def test_gelu_uses_fused_kernels_only_when_training_outside_xla():
    require_library()
    spec = tf.TensorSpec([8, 16], tf.float32)

    def train_step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = activations.gelu(x)
        return tape.gradient(y, x)

    assert {"BertGeluTanh", "BertGeluTanhGrad"} <= _op_types(tf.function(train_step), spec)
    assert "BertGeluTanh" not in _op_types(tf.function(train_step, jit_compile=True), spec)
    assert "BertGeluTanh" not in _op_types(tf.function(activations.gelu), spec)  # inference
    half = tf.TensorSpec([8, 16], tf.bfloat16)
    assert "BertGeluTanh" not in _op_types(tf.function(train_step), half)  # float32 kernels only
    x = tf.random.normal([8, 16])
    np.testing.assert_allclose(tf.function(train_step)(x), tf.function(train_step, jit_compile=True)(x),
                               atol=5e-5)


@pytest.mark.parametrize("op", ["bert_gelu_tanh_grad", "bert_gelu_erf_grad"])
def test_kernel_rejects_mismatched_shapes_with_a_readable_error(op):
    lib = require_library()
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"dy has shape \[2,3\] but x has shape \[3,2\]"):
        getattr(lib, op)(tf.zeros([2, 3]), tf.zeros([3, 2]))


def test_without_a_compiler_training_falls_back_to_tensorflow_ops_with_one_warning(tmp_path):
    script = (
        "import logging, tensorflow as tf\n"
        "from bert_tf.model import activations, custom_ops\n"
        "x = tf.constant([[0.5, -1.0]])\n"
        "with tf.GradientTape() as tape:\n"
        "    tape.watch(x)\n"
        "    y = activations.gelu(x)\n"
        "print('lib', custom_ops.library(), 'grad', [f'{g:.4f}' for g in tape.gradient(y, x).numpy()[0]])\n")
    env = dict(os.environ, CXX=str(tmp_path / "no-such-compiler"), BERT_TF_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "lib None grad ['0.8674', '-0.0830']" in result.stdout
    assert result.stderr.count("fused CPU kernels are not available") == 1
    assert "no-such-compiler' not found" in result.stderr
    assert not list((tmp_path / "cache").glob("*.so"))


def float64_gelu_exact_and_grad(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x Phi(x) and dy (Phi(x) + x phi(x)) in float64, Phi from math.erf."""
    x = x.astype(np.float64)
    cdf = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return x * cdf, dy * (cdf + x * pdf)


def wide_range_of_x() -> np.ndarray:
    """Dense over [-12, 12] (erf saturates, the negative tail underflows), tiny and huge magnitudes; odd length."""
    magnitudes = np.concatenate([np.logspace(-30, -1, 59), [1e2, 1e4, 1e30, 3e38]])
    return np.concatenate([np.linspace(-12, 12, 24_001), magnitudes, -magnitudes, [0.0]]).astype(np.float32)


def test_fused_exact_gelu_and_gradient_match_float64_over_a_wide_range():
    lib = require_library()
    x = wide_range_of_x()
    dy = np.random.default_rng(3).uniform(-2, 2, x.shape).astype(np.float32)
    y_64, grad_64 = float64_gelu_exact_and_grad(x, dy)
    np.testing.assert_allclose(lib.bert_gelu_erf(x).numpy(), y_64, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lib.bert_gelu_erf_grad(dy, x).numpy(), grad_64, rtol=1e-6, atol=1e-6)
    x_t = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x_t)
        y = custom_ops.fused_gelu_exact(x_t)
    np.testing.assert_allclose(y.numpy(), y_64, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(y, x_t, tf.constant(dy)).numpy(), grad_64, rtol=1e-6, atol=1e-6)


def _value_and_grad(fn, x: tf.Tensor, dy: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y, tape.gradient(y, x, dy)


def test_gelu_exact_uses_fused_kernels_only_when_training_outside_xla():
    require_library()
    spec = tf.TensorSpec([8, 16], tf.float32)

    def train_step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = activations.gelu_exact(x)
        return tape.gradient(y, x)

    assert {"BertGeluErf", "BertGeluErfGrad"} <= _op_types(tf.function(train_step), spec)
    assert "BertGeluErf" not in _op_types(tf.function(train_step, jit_compile=True), spec)
    assert "BertGeluErf" not in _op_types(tf.function(activations.gelu_exact), spec)  # inference
    assert "BertGeluErf" not in _op_types(tf.function(train_step), tf.TensorSpec([8, 16], tf.bfloat16))


def test_gelu_exact_without_the_kernels_gives_the_fused_values_and_gradients(monkeypatch):
    """Inference, XLA and BERT_TF_FUSED_OPS=0 (no library) take TensorFlow's ops: the same function."""
    require_library()
    x = tf.constant(wide_range_of_x())
    dy = tf.random.stateless_uniform(x.shape, seed=[4, 0], minval=-2, maxval=2)
    fused = [t.numpy() for t in _value_and_grad(activations.gelu_exact, x, dy)]
    np.testing.assert_allclose(activations.gelu_exact(x).numpy(), fused[0], rtol=1e-6, atol=1e-6)
    xla = tf.function(lambda x, dy: _value_and_grad(activations.gelu_exact, x, dy), jit_compile=True)
    monkeypatch.setattr(custom_ops, "library", lambda: None)  # what BERT_TF_FUSED_OPS=0 gives
    assert not custom_ops.fused_ops_apply(x)
    for fallback in (xla(x, dy), _value_and_grad(activations.gelu_exact, x, dy)):
        for a, b in zip(fallback, fused):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype, eps", [(tf.float16, 2.0 ** -10), (tf.bfloat16, 2.0 ** -7)])  # machine epsilons
def test_gelu_exact_in_half_precision_takes_tensorflows_ops_and_agrees_to_its_round_off(dtype, eps):
    require_library()
    x_half = tf.cast(tf.linspace(-8.0, 8.0, 4001), dtype)  # inputs exactly representable in both types
    dy_half = tf.cast(tf.random.stateless_uniform(x_half.shape, seed=[5, 0], minval=-2, maxval=2), dtype)
    y_half, grad_half = (tf.cast(t, tf.float32).numpy() for t in _value_and_grad(activations.gelu_exact, x_half, dy_half))
    x, dy = tf.cast(x_half, tf.float32), tf.cast(dy_half, tf.float32)
    y_fused, grad_fused = (t.numpy() for t in _value_and_grad(custom_ops.fused_gelu_exact, x, dy))
    np.testing.assert_allclose(y_half, y_fused, rtol=4 * eps, atol=4 * eps)
    np.testing.assert_allclose(grad_half, grad_fused, rtol=4 * eps, atol=8 * eps)


def test_bert_model_with_gelu_exact_trains_with_the_same_gradients_fused_as_without(monkeypatch):
    require_library()
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig

    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, hidden_act="gelu_exact", hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, max_position_embeddings=32)
    model = BertModel(config)
    ids = tf.constant(np.random.default_rng(6).integers(0, 99, [3, 17]), tf.int32)
    weights = tf.random.stateless_normal([3, 17, 32], seed=[6, 0])

    def train_step(ids):
        with tf.GradientTape() as tape:
            out = model({"input_ids": ids}, training=True)
            loss = tf.reduce_sum(out["sequence_output"] * weights) + tf.reduce_sum(out["pooled_output"])
        return [loss] + [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

    fused = tf.function(train_step)
    assert {"BertGeluErf", "BertGeluErfGrad"} <= _op_types(fused, tf.TensorSpec([3, 17], tf.int32))
    with_kernels = [t.numpy() for t in fused(ids)]
    monkeypatch.setattr(custom_ops, "library", lambda: None)
    unfused = tf.function(train_step)
    assert "BertGeluErf" not in _op_types(unfused, tf.TensorSpec([3, 17], tf.int32))
    without = [t.numpy() for t in unfused(ids)]
    assert len(with_kernels) == len(model.trainable_variables) + 1
    for variable, a, b in zip(["loss"] + [v.path for v in model.trainable_variables], with_kernels, without):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max(), err_msg=variable)


def _layer_norm_and_grads(fn, x, gamma, beta, dy):
    x, gamma, beta = (tf.constant(v) for v in (x, gamma, beta))
    with tf.GradientTape() as tape:
        tape.watch([x, gamma, beta])
        y = fn(x, gamma, beta)
    return [y.numpy()] + [g.numpy() for g in tape.gradient(y, [x, gamma, beta], tf.constant(dy))]


def test_fused_layer_norm_matches_the_originals_arithmetic_and_gradients():
    require_library()
    rng = np.random.default_rng(1)
    x = (rng.standard_normal([3, 101, 96]) * 3 + 5).astype(np.float32)  # 303 rows: a partial row block
    gamma = rng.uniform(0.5, 1.5, 96).astype(np.float32)
    beta = rng.standard_normal(96).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)

    def original(x, gamma, beta):  # the original's tf.nn.moments + tf.nn.batch_normalization
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)

    theirs = _layer_norm_and_grads(original, x, gamma, beta, dy)
    ours = _layer_norm_and_grads(lambda x, g, b: custom_ops.fused_layer_norm(x, g, b, 1e-12), x, gamma, beta, dy)
    reference = _layer_norm_and_grads(original, *(v.astype(np.float64) for v in (x, gamma, beta, dy)))
    for name, a, b, ref in zip(["y", "dx", "dgamma", "dbeta"], ours, theirs, reference):
        scale = np.abs(ref).max()
        assert np.abs(a - b).max() <= 2e-6 * scale, name
        assert np.abs(a - ref).max() <= max(np.abs(b - ref).max() * 2, 1e-6 * scale), name


def test_layer_norm_layer_uses_the_fused_kernel_when_training_and_gives_the_same_values():
    require_library()
    from bert_tf.model.layers import LayerNorm
    layer = LayerNorm(64)
    layer.build()
    layer.gamma.assign(np.linspace(0.5, 1.5, 64).astype(np.float32))
    x = tf.random.normal([4, 7, 64]) * 2 + 1

    def train_step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * tf.range(64, dtype=tf.float32))
        return [y] + tape.gradient(loss, [x, layer.gamma.value, layer.beta.value])

    fused = tf.function(train_step)
    assert "BertLayerNorm" in _op_types(fused, tf.TensorSpec([4, 7, 64], tf.float32))
    assert "BertLayerNorm" not in _op_types(tf.function(layer), tf.TensorSpec([4, 7, 64], tf.float32))
    for a, b in zip(fused(x), tf.function(train_step, jit_compile=True)(x)):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="gamma and beta need 64 values .* got 3 and 64"):
        custom_ops.library().bert_layer_norm(x, tf.ones([3]), tf.zeros([64]), epsilon=1e-12)


def test_kernels_give_each_element_the_same_bits_wherever_it_sits():
    """Checkpoint resume is bit-exact only if a value never depends on its position, the tensor's
    length or the thread split: every element takes the same packet arithmetic, sums a fixed order."""
    lib = require_library()
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(50_003) * 3).astype(np.float32)  # many chunks and a ragged tail
    dy = rng.standard_normal(x.shape).astype(np.float32)
    for forward, backward in [(lib.bert_gelu_tanh, lib.bert_gelu_tanh_grad), (lib.bert_gelu_erf, lib.bert_gelu_erf_grad)]:
        whole_y, whole_dx = forward(x).numpy(), backward(dy, x).numpy()
        for start, stop in [(0, 13), (5, 4101), (49_990, 50_003)]:
            assert np.array_equal(forward(x[start:stop]).numpy(), whole_y[start:stop])
            assert np.array_equal(backward(dy[start:stop], x[start:stop]).numpy(), whole_dx[start:stop])
    rows = (rng.standard_normal([301, 37]) * 2 + 1).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 37).astype(np.float32), rng.standard_normal(37).astype(np.float32)
    whole = lib.bert_layer_norm(rows, gamma, beta, epsilon=1e-12)[0].numpy()
    assert np.array_equal(lib.bert_layer_norm(rows[290:], gamma, beta, epsilon=1e-12)[0].numpy(), whole[290:])
    grads = [lib.bert_layer_norm_grad(dy[:301 * 37].reshape(301, 37), rows, gamma,
                                      *lib.bert_layer_norm(rows, gamma, beta, epsilon=1e-12)[1:]) for _ in range(5)]
    assert all(np.array_equal(a.numpy(), b.numpy()) for g in grads[1:] for a, b in zip(g, grads[0]))


def test_program_inference_alone_puts_the_fused_kernels_into_inference_graphs():
    """A program's own evaluation and prediction run on the kernels; any other inference graph (an export above
    all: SavedModels must load without bert_tf) keeps TensorFlow's ops, also after the context is left by an
    error, and on another thread while it is open."""
    import threading

    from bert_tf.model.layers import LayerNorm
    require_library()
    layer = LayerNorm(64)
    layer.build()
    spec = tf.TensorSpec([4, 7, 64], tf.float32)

    def in_program(x):
        with custom_ops.program_inference():
            return layer(x), activations.gelu(x)

    assert {"BertLayerNorm", "BertGeluTanh"} <= _op_types(tf.function(in_program), spec)
    assert not {"BertLayerNorm", "BertGeluTanh"} & _op_types(tf.function(lambda x: (layer(x), activations.gelu(x))),
                                                             spec)
    with pytest.raises(RuntimeError, match="left by an error"):
        with custom_ops.program_inference():
            raise RuntimeError("left by an error")
    assert "BertLayerNorm" not in _op_types(tf.function(layer), spec)
    other_thread = []
    with custom_ops.program_inference():
        thread = threading.Thread(target=lambda: other_thread.append(_op_types(tf.function(layer), spec)))
        thread.start()
        thread.join()
    assert "BertLayerNorm" not in other_thread[0]
    x = tf.random.normal([4, 7, 64]) * 2 + 1
    for fused, plain in zip(tf.function(in_program)(x), (layer(x), activations.gelu(x))):
        np.testing.assert_allclose(fused, plain, atol=2e-6, rtol=0)


def test_a_programs_prediction_runs_the_encoder_on_the_fused_kernels_with_the_same_outputs(monkeypatch):
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig
    from bert_tf.training import evaluation
    require_library()
    tf.keras.utils.set_random_seed(3)
    model = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=32))
    rng = np.random.default_rng(4)
    features = {"input_ids": rng.integers(1, 99, [10, 16]).astype(np.int32),
                "input_mask": (np.arange(16)[None] < rng.integers(3, 17, [10, 1])).astype(np.int32),
                "segment_ids": np.zeros([10, 16], np.int32)}
    calls = []
    fused_layer_norm = custom_ops.fused_layer_norm
    monkeypatch.setattr(custom_ops, "fused_layer_norm", lambda *args: calls.append(1) or fused_layer_norm(*args))
    predicted = evaluation.predict(tf.distribute.get_strategy(), model,
                                   lambda: tf.data.Dataset.from_tensor_slices(features), 10, 4, ["sequence_output"])
    assert calls  # the embeddings' LayerNorm and each layer's two (in both branches of the key trimming's cond)
    np.testing.assert_allclose(predicted["sequence_output"], model(features)["sequence_output"], atol=1e-5, rtol=0)
