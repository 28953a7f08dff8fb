"""bert_tf's fused TensorFlow CPU kernels (`custom_ops.cc`): compiled once per machine, then loaded.

TensorFlow's headers ship in its wheel, so the kernels are built against the TensorFlow that runs
them, on first use, with the system C++ compiler (about 10 s), into a cache folder
(`$BERT_TF_CACHE`, else `~/.cache/bert_tf`) keyed by the source, TensorFlow's version and build
flags and the instruction set (AVX2+FMA where the CPU has them). Everything still works without
them: where no compiler is found, the build fails or `BERT_TF_FUSED_OPS=0` is set, `library()`
returns None (with one warning saying why) and callers use TensorFlow's own ops.

    python -m bert_tf.model.custom_ops    # build now (`make test` does), print where the library is
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import bert_tf._env  # noqa: F401
import tensorflow as tf
from bert_tf.data.atomic_io import atomic_path
from tensorflow.python.eager import record  # private, but the only way to ask "may a tape record?"
from tensorflow.python.ops import control_flow_util  # private: is the graph being built for XLA?

from bert_tf.errors import BertTfError

SOURCE = pathlib.Path(__file__).with_name("custom_ops.cc")
_log = logging.getLogger(__name__)


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _instruction_set_flags() -> list[str]:
    """-mavx2 -mfma where this CPU has both (what Eigen vectorises best here), else the baseline."""
    return ["-mavx2", "-mfma"] if {"avx2", "fma"} <= _cpu_flags() else []


def _compiler() -> str:
    return os.environ.get("CXX") or "g++"


def _compile_command(output: str) -> list[str]:
    compiler = _compiler()
    # -ffp-contract=off: no fused multiply-adds chosen by the compiler, so results are bit-reproducible.
    return [compiler, "-shared", "-fPIC", "-O3", "-ffp-contract=off", "-w", *_instruction_set_flags(), *tf.sysconfig.get_compile_flags(),
            str(SOURCE), "-o", output, *tf.sysconfig.get_link_flags()]


def library_path() -> pathlib.Path:
    """Where the compiled library for this source, TensorFlow build and CPU lives (or will)."""
    key = hashlib.sha256("\0".join([SOURCE.read_text(encoding="utf-8"), tf.__version__, tf.__git_version__,
                                    *_compile_command("out.so")]).encode()).hexdigest()[:16]
    cache = os.environ.get("BERT_TF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "bert_tf")
    return pathlib.Path(cache) / f"custom_ops-{key}.so"


def build(path: pathlib.Path) -> None:
    """Compiles the kernels into `path` (a temp name first, renamed when complete)."""
    if shutil.which(_compiler()) is None:
        raise RuntimeError(f"C++ compiler {_compiler()!r} not found (set CXX to use another)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, suffix=".so", mode=0o777) as tmp:  # 0o777: what the linker gives
        result = subprocess.run(_compile_command(tmp), capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"compiling {SOURCE} failed:\n{result.stderr[-2000:]}")


@functools.lru_cache(maxsize=1)
def library():
    """The loaded op library (`bert_gelu_tanh`, `bert_gelu_erf`, `bert_layer_norm` and their `_grad`s), or None."""
    if os.environ.get("BERT_TF_FUSED_OPS", "1") == "0":
        return None
    try:
        path = library_path()
        if not path.is_file():
            _log.info("compiling bert_tf's fused CPU kernels once into %s (about 10 s)", path)
            build(path)
        return tf.load_op_library(str(path))
    except Exception as e:  # noqa: BLE001 -- any failure means: use TensorFlow's own ops
        _log.warning("bert_tf's fused CPU kernels are not available, using TensorFlow's ops (slower "
                     "training): %s", e)
        return None


@functools.lru_cache(maxsize=1)
def _cpu_only() -> bool:
    return not tf.config.list_logical_devices("GPU") and not tf.config.list_logical_devices("TPU")


_program_inference = threading.local()


@contextlib.contextmanager
def program_inference():
    """Within it, ops traced without a gradient tape use the fused kernels too: a program's own evaluation and
    prediction (LayerNorm in one pass instead of TensorFlow's ~10 kernels: about 3% of a MiniLM forward pass at
    SQuAD's shapes). Never around a graph that is exported: SavedModels must load where bert_tf is not
    installed. Thread-local, as replicas trace on their own threads."""
    depth = getattr(_program_inference, "depth", 0)
    _program_inference.depth = depth + 1
    try:
        yield
    finally:
        _program_inference.depth = depth


def _in_program_inference() -> bool:
    return getattr(_program_inference, "depth", 0) > 0


def fused_ops_apply(x: tf.Tensor) -> bool:
    """True where the fused kernels should be used on `x` in the ops being traced or run now.

    Where a gradient may be taken, or in `program_inference` (elsewhere inference keeps TensorFlow's
    GELU, which its graph optimiser fuses into the matmul, and graphs saved for serving need no custom
    op); never inside XLA (which cannot compile custom ops), only on CPU-only hosts (the kernels are CPU
    kernels), only in float32 (the kernels' type), and only where the library built.
    """
    if x.dtype != tf.float32:
        return False
    if not (record.could_possibly_record() or _in_program_inference()):
        return False
    if in_xla_context():
        return False
    return _cpu_only() and library() is not None


def in_xla_context() -> bool:
    """True while ops are being traced for XLA (`jit_compile`, TPUs): no custom ops, static shapes only."""
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


@tf.custom_gradient
def fused_gelu(x: tf.Tensor):
    """The original's tanh GELU on the fused kernels (float32, CPU; see `fused_ops_apply`)."""
    ops = library()

    def grad(dy):
        return ops.bert_gelu_tanh_grad(dy, x)

    return ops.bert_gelu_tanh(x), grad


@tf.custom_gradient
def fused_gelu_exact(x: tf.Tensor):
    """The exact (erf) GELU, x Phi(x), on the fused kernels (float32, CPU; see `fused_ops_apply`)."""
    ops = library()

    def grad(dy):
        return ops.bert_gelu_erf_grad(dy, x)

    return ops.bert_gelu_erf(x), grad


def fused_layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float) -> tf.Tensor:
    """LayerNorm over the last axis on the fused kernels (float32, CPU; see `fused_ops_apply`)."""
    ops = library()

    @tf.custom_gradient
    def layer_norm(x, gamma, beta):
        y, mean, inv = ops.bert_layer_norm(x, gamma, beta, epsilon=epsilon)

        def grad(dy):
            return tuple(ops.bert_layer_norm_grad(dy, x, gamma, mean, inv))

        return y, grad

    return layer_norm(x, gamma, beta)


class KernelBuildError(BertTfError, RuntimeError):
    """The fused kernels could not be compiled (the warning logged before says why)."""


def main() -> None:
    """`bert-tf-build-kernels`: compile the fused kernels now (else on first use) and print the library's path."""
    from bert_tf import cli

    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def build() -> None:
        if library() is None:
            raise KernelBuildError("bert_tf's fused CPU kernels could not be built; see the warning above")
        print(library_path())

    sys.exit(cli.run_argparse(lambda args: build(), argparse.ArgumentParser(
        prog=cli.program_name(), description="Compile bert_tf's fused CPU kernels and print the library's path.")))


if __name__ == "__main__":
    main()
