"""Killing or stopping (SIGTERM) a training process at a checkpoint or a step, for the resume tests."""
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


def stop_with_sigterm(process: subprocess.Popen, after: str) -> tuple[list[str], int]:
    """Sends SIGTERM once `process` has written the progress line containing `after`; returns its stderr lines and
    exit status."""
    lines = []
    try:
        for line in process.stderr:
            lines.append(line)
            if after in line:
                process.send_signal(signal.SIGTERM)
                break
        lines += process.stderr.readlines()
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return lines, process.wait()


def assert_stopped_and_saved(lines: list[str], code: int, prog: str, out, steps: int) -> int:
    """The one line of a SIGTERM stop (status 143) naming the checkpoint it saved; returns its step."""
    last = lines[-1].strip() if lines else ""
    found = re.fullmatch(rf"{re.escape(prog)}: error: stopped by SIGTERM at step (\d+)/{steps}: saved (\S+); the "
                         r"same command resumes from it", last)
    assert code == 143 and found, "".join(lines[-5:])
    assert found[2] == str(out / f"ckpt-{found[1]}")
    return int(found[1])
