"""Child processes and their records: the one place a study's run is started, timed, fingerprinted and stored.

A record is one JSON object per completed run (study, run key, scale, the command, commit, CPU, seconds, metrics,
the output folder and a sha256 of each declared output file). The store is one JSON-lines file per study,
rewritten whole through a temp name and a rename, so a killed runner leaves either the old file or the new one.
A record is trusted only while it verifies: its output files still exist with the hashes it holds.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from typing import Iterable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATED = "migrated"  # origin of a record carried over from bench/results (no outputs to verify)
RUN = "run"


class StudyError(Exception):
    """A study that cannot run or be read: the message names the study, run, file or flag."""


# ---------------------------------------------------------------------------------------------- provenance

def git_commit(root: str = ROOT) -> str:
    """The short commit of the checkout (with "+dirty" when tracked files other than the store and the docs, which
    the runner itself rewrites, differ from it), or "unknown"."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    if head.returncode:
        return "unknown"
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ".", ":!studies/results", ":!docs", ":!*.md"],
                           cwd=root, capture_output=True)
    return head.stdout.strip() + ("+dirty" if dirty.returncode else "")


def cpu_model() -> str:
    """This machine's CPU as every figure names it: model name, core count and the widest vector ISA."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
    except OSError:
        return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    name = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = set((re.search(r"^flags\s*:\s*(.+)$", info, re.M) or [None, ""])[1].split())
    isa = ("AVX-512" + (" BF16" if "avx512_bf16" in flags else "") if "avx512f" in flags
           else "AVX2" if "avx2" in flags else "no AVX2")
    family, model = re.search(r"^cpu family\s*:\s*(\d+)", info, re.M), re.search(r"^model\s*:\s*(\d+)", info, re.M)
    kind = f" (family {family[1]} model {model[1]})" if family and model else ""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{name[1].strip() if name else platform.machine()}{kind}, {cores} cores, {isa}"


# ---------------------------------------------------------------------------------------------- processes

_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()


def run_child(argv: list[str], log_path: str, env: dict[str, str] | None = None) -> tuple[int, float]:
    """Runs one program to completion in the runner's process group (a kill of the group stops both), stdout and
    stderr to `log_path`, from the repo root with it on PYTHONPATH (so `python -m bench.x` works); returns (exit
    code, wall seconds). `stop_children` ends it early."""
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        with _children_lock:
            if _stopping.is_set():
                raise StudyError("not started: the runner is stopping")
            child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                     env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))
            _children.add(child)
        try:
            code = child.wait()
        finally:
            with _children_lock:
                _children.discard(child)
    if _stopping.is_set():  # whatever the program wrote when told to stop is not a finished run
        raise StudyError(f"stopped (log {log_path})")
    return code, time.perf_counter() - start


def stop_children(signum: int, grace_s: float = 60.0) -> int:
    """Passes `signum` to every running child (our training programs save at their next step and exit), waits up
    to `grace_s` for them, kills what is left; returns how many were running. The runner's SIGTERM handler: a
    stopped runner leaves no program of its plan behind."""
    _stopping.set()
    with _children_lock:
        running = list(_children)
    for child in running:
        child.send_signal(signum)
    deadline = time.monotonic() + grace_s
    for child in running:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return len(running)


def log_tail(log_path: str, lines: int = 3) -> str:
    """The last lines of a child's log, joined into one line for an error message."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def python() -> str:
    """The interpreter every child runs under: this one (the project's .venv under make)."""
    return sys.executable


# ---------------------------------------------------------------------------------------------- fingerprints

def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(output_dir: str, patterns: Iterable[str]) -> dict[str, str]:
    """{relative path: sha256} of the files matching each pattern under `output_dir`; a pattern that matches
    nothing raises StudyError (the run's outputs are not whole)."""
    found: dict[str, str] = {}
    for pattern in patterns:
        paths = sorted(glob.glob(os.path.join(output_dir, pattern)))
        if not paths:
            raise StudyError(f"{output_dir}: no output matches {pattern!r}")
        for path in paths:
            found[os.path.relpath(path, output_dir)] = sha256_file(path)
    return found


def stored_path(path: str) -> str:
    """A run's output folder as its record keeps it: relative to the repository when inside it."""
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def verifies(record: dict) -> bool:
    """Whether a record's outputs are still there, byte for byte (a migrated record has none: never)."""
    if record.get("origin") != RUN or not record.get("outputs"):
        return False
    for relative, digest in record["outputs"].items():
        path = os.path.join(ROOT, record["output_dir"], relative)
        try:
            if sha256_file(path) != digest:
                return False
        except OSError:
            return False
    return True


# ---------------------------------------------------------------------------------------------- the store

class Store:
    """One JSON-lines file per study under `folder`: STUDY.jsonl, one record per (scale, run key), in the order
    the runs finished (a newer record of the same run replaces the older one in place)."""

    def __init__(self, folder: str):
        self.folder = folder
        self._writing = threading.Lock()  # runs of a plan with --jobs end on several threads

    def path(self, study: str) -> str:
        return os.path.join(self.folder, f"{study}.jsonl")

    def load(self, study: str) -> list[dict]:
        """Every record of `study` ([] when none); a line that does not parse is a StudyError naming it."""
        path = self.path(study)
        if not os.path.exists(path):
            return []
        records = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except ValueError as e:
                        raise StudyError(f"{path}:{number}: not a JSON record ({e})") from None
        return records

    def latest(self, study: str, scale: str) -> dict[str, dict]:
        """{run key: record} of `study` at `scale`: a run's own record where there is one, else a migrated one."""
        found: dict[str, dict] = {}
        for r in self.load(study):
            if r.get("scale") == scale and (r["key"] not in found or r.get("origin") == RUN):
                found[r["key"]] = r
        return found

    def put(self, record: dict) -> None:
        """Adds `record`, replacing the one of the same study, scale, key and origin (a run's record never
        replaces a migrated one: the report sets them side by side); the file is replaced atomically, one put at a
        time (the runs of a plan with --jobs end on several threads)."""
        with self._writing:
            self._put(record)

    def _put(self, record: dict) -> None:
        records = self.load(record["study"])
        ident = lambda r: (r.get("scale"), r["key"], r.get("origin"))  # noqa: E731
        same = [i for i, r in enumerate(records) if ident(r) == ident(record)]
        if same:
            records[same[0]] = record
            records = [r for i, r in enumerate(records) if i not in same[1:]]
        else:
            records.append(record)
        self.write(record["study"], records)

    def write(self, study: str, records: list[dict]) -> None:
        os.makedirs(self.folder, exist_ok=True)
        text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
        fd, tmp = tempfile.mkstemp(prefix=f".{study}.", suffix=".tmp", dir=self.folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path(study))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def studies(self) -> list[str]:
        return sorted(name[:-len(".jsonl")] for name in os.listdir(self.folder) if name.endswith(".jsonl")) \
            if os.path.isdir(self.folder) else []
