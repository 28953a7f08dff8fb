"""Precision as a choice: which Keras dtype policy a model is built under, and whether this CPU computes
bfloat16 natively.

bfloat16 halves the bytes of every matmul operand and, on CPUs with AVX512_BF16 or AMX (AMD Zen 4, Intel Cooper
Lake, Sapphire Rapids and later) or Arm's BF16 extension, doubles the multiply rate; oneDNN runs TensorFlow's
bfloat16 matmuls on those instructions. Elsewhere oneDNN emulates them in float32 with conversions around each
kernel: correct, but slower than float32. Our layers keep LayerNorm statistics, the attention softmax and the
embedding sums in float32 under a mixed policy (bert_tf.model.layers).
"""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Iterator

import keras

_log = logging.getLogger(__name__)
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 (/proc/cpuinfo "flags"), Arm ("Features")


@functools.lru_cache(maxsize=None)
def cpu_has_bfloat16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has bfloat16 multiply instructions (from Linux's `cpuinfo`; False where unreadable)."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return bool(set(line.split(":", 1)[1].split()) & set(NATIVE_BF16_FLAGS))
    except OSError:
        pass
    return False


@functools.lru_cache(maxsize=None)
def warn_if_emulated(what: str, cpuinfo: str = "/proc/cpuinfo") -> bool:
    """One warning (per `what`) when bfloat16 is asked for on a CPU without bfloat16 instructions; returns
    whether it warned."""
    if cpu_has_bfloat16(cpuinfo):
        return False
    _log.warning("%s asks for bfloat16, but this CPU has no bfloat16 instructions (AVX512_BF16, AMX or Arm BF16): "
                 "oneDNN emulates them here, and float32 is faster on this machine (docs/precision.md)", what)
    return True


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Builds models under the Keras dtype policy `name` ("float32", "mixed_bfloat16", ...) within the block,
    then puts the previous global policy back."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
