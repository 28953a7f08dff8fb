"""Preemption notices: SIGTERM to a training program saves at the next step boundary and stops with one line.

Schedulers (Kubernetes, Slurm, GCE/Cloud TPU maintenance, a spot VM's notice) send SIGTERM and wait a grace
period (often 30 s) before SIGKILL. `StopRequests` catches the signal while the training loop runs; the loop runs
its steps in short compiled chunks (`CHECK_SECONDS`), so it notices within one chunk, saves a checkpoint at that
step, and ends with `Preempted` (exit status 128 + the signal, as a shell reports it). The same command then
resumes from that checkpoint, bit for bit as a run that was never stopped.

Under `--strategy=multi_worker_mirrored` every worker must stop at the same step, whichever one got the notice:
`ClusterStop` leaves that agreement to TensorFlow's `PreemptionCheckpointHandler` (see there).
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Callable

import tensorflow as tf

from bert_tf.errors import BertTfError

CHECK_SECONDS = 5.0  # the longest compiled chunk of steps between two looks at a pending stop
SIGNALS = (signal.SIGTERM,)


class Preempted(BertTfError):
    """Training stopped on a signal after saving; the message names the step and the checkpoint."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.status = 128 + signum


class StopRequests:
    """While entered (on the main thread): a SIGTERM is recorded, not fatal; `signum` says which came, if any.
    Inactive (`active=False`), or off the main thread (where Python cannot take signals), it records nothing and
    changes nothing."""

    def __init__(self, active: bool = True) -> None:
        self.signum: int | None = None
        self._active = active
        self._previous: dict[int, object] = {}

    def _record(self, signum: int, frame) -> None:
        self.signum = signum

    def __enter__(self) -> "StopRequests":
        if self._active and threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._record) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""


class ClusterStop:
    """Multi-worker: a SIGTERM to any one worker saves every worker at one step, then each raises Preempted.

    TensorFlow's `PreemptionCheckpointHandler` does the agreeing, through the coordination service the cluster
    already runs: the worker with the notice (its `requests`, polled each second) names the next call of
    `check()` as the step to save at and waits until every worker has acknowledged it; at that call every worker
    runs `save` and then `stopped` (which raises). A call count is a step count only when every worker calls
    `check()` after the same steps, so the trainer agrees its chunks' sizes across workers.

    The handler keeps its own books (a call counter it would save in a checkpoint of ours and restore on its
    own); it gets an empty checkpoint manager of a folder that never exists, and counts calls from 0 in each
    process, the same on every worker, while our checkpoints, their checks and their resume stay the trainer's.
    On GCE CPU and TPU VMs TensorFlow's handler does nothing; there `requests` leave SIGTERM fatal, and the
    other workers end with the lost-worker line instead.
    """

    def __init__(self, strategy: tf.distribute.Strategy, output_dir: str, save: Callable[[], None],
                 stopped: Callable[[], None]):
        self.requests = StopRequests()
        unused = tf.train.CheckpointManager(tf.train.Checkpoint(), os.path.join(output_dir, ".never-written"),
                                            max_to_keep=1)
        config = tf.distribute.experimental.TerminationConfig(
            termination_watcher_fn=lambda: self.requests.signum is not None, exit_fn=stopped, save_fn=save,
            grace_period=0)
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            strategy.cluster_resolver, unused, termination_config=config)
        platform = getattr(getattr(self._handler, "_platform_device", None), "name", "")
        self.requests = StopRequests(active=platform not in ("GCE_CPU", "GCE_TPU"))

    def check(self) -> None:
        """Called by every worker after each chunk of steps: saves and stops at the agreed one."""
        self._handler.save_checkpoint_if_preempted()
