"""Activation functions by their `hidden_act` name.

"gelu" means what it meant in the original BERT: the tanh approximation. Hugging Face's
"gelu" is the exact erf form, x Phi(x) = 0.5x(1 + erf(x/sqrt 2)), which we call "gelu_exact";
converters must map the name. Both train on bert_tf's fused CPU kernels where those apply
(`custom_ops.fused_ops_apply`) and otherwise run tf.nn.gelu's formulas in TensorFlow ops.
"""
from __future__ import annotations

from typing import Callable

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.model import custom_ops

_SQRT_HALF = 0.7071067811865476  # 1/sqrt(2), as a Python float: converted to x's own precision


def gelu(x: tf.Tensor) -> tf.Tensor:
    """The original BERT's GELU: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).

    For inference, tf.nn.gelu(approximate=True): the same formula (float round-off apart), which
    TensorFlow's CPU graph optimiser fuses into the preceding matmul + bias (measured ~15% faster
    than the original's hand-written ops). When training in float32 on CPU, bert_tf's fused
    kernels instead (one pass forward, one backward: +10% small-config training steps).
    """
    if custom_ops.fused_ops_apply(x):
        return custom_ops.fused_gelu(x)
    return tf.nn.gelu(x, approximate=True)


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """GELU with the exact Gaussian CDF, x Phi(x) = 0.5x(1 + erf(x/sqrt 2)); Hugging Face's "gelu".

    When training in float32 on CPU, bert_tf's fused kernels: one pass forward, one backward instead
    of ~5 element-wise kernels forward and ~10 backward (26 ms instead of 38 ms forward + backward
    for a [4096, 1536] activation, MiniLM-L6's at batch 32, seq 128, on 2 cores). Otherwise tf.nn.gelu(approximate=False)'s formula, 0.5x erfc(-x/sqrt 2): for
    inference TensorFlow's CPU graph optimiser fuses it, like the hand-written 0.5x(1 + erf(x/sqrt 2)),
    into the preceding matmul + bias (the same outputs bit for bit, the same speed, measured on a
    6-layer H=384 model); where nothing fuses it (XLA, float16, no kernels) erfc keeps the negative
    tail accurate, where 1 + erf cancels (float32 errors up to 1e-6 instead of 4e-7). Not tf.nn.gelu
    itself: it rounds 1/sqrt 2 to float32 before casting to x's type, 5e-9 off in float64.
    """
    if custom_ops.fused_ops_apply(x):
        return custom_ops.fused_gelu_exact(x)
    return 0.5 * x * tf.math.erfc(-x * _SQRT_HALF)  # this form (Neg, then Mul) is what the optimiser fuses


def swish(x: tf.Tensor) -> tf.Tensor:
    return x * tf.sigmoid(x)


def linear(x: tf.Tensor) -> tf.Tensor:
    return x


_ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu,
    "gelu_new": gelu,
    "gelu_pytorch_tanh": gelu,
    "gelu_fast": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "swish": swish,
    "silu": swish,
    "tanh": tf.tanh,
    "linear": linear,
}
KNOWN_ACTIVATIONS = frozenset(_ACTIVATIONS)


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """Returns the activation function for a `hidden_act` name; ValueError if unknown."""
    key = name.lower() if isinstance(name, str) else name
    if key not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(sorted(_ACTIVATIONS))}")
    return _ACTIVATIONS[key]
