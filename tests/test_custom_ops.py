"""bert_tf's fused CPU kernels: same values and gradients as TensorFlow's GELU, used only where they apply."""
from __future__ import annotations

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


def test_kernel_rejects_mismatched_shapes_with_a_readable_error():
    lib = require_library()
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"dy has shape \[2,3\] but x has shape \[3,2\]"):
        lib.bert_gelu_tanh_grad(tf.zeros([2, 3]), tf.zeros([3, 2]))


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
    whole_y, whole_dx = lib.bert_gelu_tanh(x).numpy(), lib.bert_gelu_tanh_grad(dy, x).numpy()
    for start, stop in [(0, 13), (5, 4101), (49_990, 50_003)]:
        assert np.array_equal(lib.bert_gelu_tanh(x[start:stop]).numpy(), whole_y[start:stop])
        assert np.array_equal(lib.bert_gelu_tanh_grad(dy[start:stop], x[start:stop]).numpy(), whole_dx[start:stop])
    rows = (rng.standard_normal([301, 37]) * 2 + 1).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 37).astype(np.float32), rng.standard_normal(37).astype(np.float32)
    whole = lib.bert_layer_norm(rows, gamma, beta, epsilon=1e-12)[0].numpy()
    assert np.array_equal(lib.bert_layer_norm(rows[290:], gamma, beta, epsilon=1e-12)[0].numpy(), whole[290:])
    grads = [lib.bert_layer_norm_grad(dy[:301 * 37].reshape(301, 37), rows, gamma,
                                      *lib.bert_layer_norm(rows, gamma, beta, epsilon=1e-12)[1:]) for _ in range(5)]
    assert all(np.array_equal(a.numpy(), b.numpy()) for g in grads[1:] for a, b in zip(g, grads[0]))
