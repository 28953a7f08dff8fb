"""Killing a training process at a checkpoint, for the resume tests."""
import os
import pathlib
import re
import signal
import subprocess
import time


def latest_recorded_step(out: pathlib.Path) -> int | None:
    """The step of the checkpoint that `out`'s `checkpoint` state file names as latest (None: none yet)."""
    try:
        text = (out / "checkpoint").read_text()
    except OSError:
        return None
    found = re.search(r'^model_checkpoint_path: ".*ckpt-(\d+)"', text, re.MULTILINE)
    return int(found[1]) if found else None


def kill_once_recorded(process: subprocess.Popen, out: pathlib.Path, step: int, timeout: float = 300) -> None:
    """SIGKILLs `process`'s group once its latest recorded checkpoint is at least `step` (or once it has exited,
    or at the timeout). A save is committed by the state file, written after the checkpoint's data and index:
    a kill between them rightly leaves nothing to resume, so a test that must resume waits for the record."""
    deadline = time.time() + timeout
    while process.poll() is None and time.time() < deadline and (latest_recorded_step(out) or 0) < step:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
