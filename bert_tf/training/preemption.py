"""Preemption notices: SIGTERM to a training program saves at the next step boundary and stops with one line.

Schedulers (Kubernetes, Slurm, GCE/Cloud TPU maintenance, a spot VM's notice) send SIGTERM and wait a grace
period (often 30 s) before SIGKILL. `StopRequests` catches the signal while the training loop runs; the loop runs
its steps in short compiled chunks (`CHECK_SECONDS`), so it notices within one chunk, saves a checkpoint at that
step, and ends with `Preempted` (exit status 128 + the signal, as a shell reports it). The same command then
resumes from that checkpoint, bit for bit as a run that was never stopped.
"""
from __future__ import annotations

import signal
import threading

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
