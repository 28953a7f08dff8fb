"""An exclusive lock on a run's output, held for the run's life, and readable errors for unusable output folders.

Two runs writing one output would both finish with their results mixed; the second is refused
instead, with one line naming the holder:

    --output_dir out is in use by run_pretraining.py (pid 1234 on node7, since 2026-01-02 10:11:12);
    wait for it or choose another --output_dir

The lock is a small file beside the output, taken with `flock(LOCK_EX | LOCK_NB)`:

- `lock_folder(folder, flag)`: the whole folder (`FOLDER/.bert_tf.lock`), for programs that own
  their folder (training, fine-tuning).
- `lock_output(path, flag)`: one output name in a shared folder (`FOLDER/.NAME.bert_tf.lock`), for
  programs that write named files or a named folder beside others (data prep, feature extraction,
  the converter); runs on other names in the same folder go on side by side, as the original's
  advice to run data prep on input shards in parallel expects.

A lock left by a killed run is no obstacle: the kernel releases a flock when its holder dies, so
the next run finds the leftover file unlocked, takes it and overwrites the holder details. Nothing
is guessed from pids. The holder removes the file when it releases the lock (while still holding
it); a run that opened the file just before that removal sees, once it holds its flock, that the
name no longer leads to its file, and tries again. The file is opened with O_NOFOLLOW and must be
a regular file, so a planted symlink or FIFO is refused, never followed. Creating it also proves
the folder writable before any work. On NFS, Linux emulates flock with byte-range locks.

`make_output_dir(path, flag)` creates an output folder, or says in one line why it cannot;
`check_output_dir` and `check_output_file` only check (a file, or a folder, in the way); `holding`
holds several locks at once.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import time
from typing import Iterable, Iterator

from bert_tf.errors import BertTfError

FOLDER_LOCK = ".bert_tf.lock"
_LOCK_SUFFIX = ".bert_tf.lock"
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ATTEMPTS = 20


class OutputFolderError(BertTfError):
    """An output folder that cannot be created or written (the message names the flag and the path)."""


class OutputInUseError(BertTfError):
    """The output is locked by another running program (the message names it)."""


def _blocker(path: str) -> str | None:
    """The nearest existing one of `path` and its ancestors, when it is not a folder (a file in the way)."""
    path = os.path.abspath(path)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path if not os.path.isdir(path) else None


def make_output_dir(path: str | os.PathLike, flag: str) -> None:
    """Creates the output folder `path` (and its parents) for `flag`, or raises OutputFolderError
    in one line saying why not: a file in its place, a file among its parents, no permission."""
    path = os.fspath(path)
    check_output_dir(path, flag)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OutputFolderError(f"{flag} {path}: cannot create the folder: {e.strerror or e}") from None


def check_output_dir(path: str | os.PathLike, flag: str) -> None:
    """Raises OutputFolderError when `path` can never be an output folder (it, or a parent, is a file);
    creates nothing, for checks made before a program decides to write."""
    path = os.fspath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        what = "a file, not a folder" if os.path.isfile(path) else "not a folder"
        raise OutputFolderError(f"{flag} {path} is {what}; choose another {flag}")
    blocker = _blocker(os.path.dirname(os.path.abspath(path)))
    if blocker is not None:
        raise OutputFolderError(f"{flag} {path}: {blocker} is a file, not a folder")


def _same_file(fd: int, path: str) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _holder(fd: int) -> dict:
    """The holder's details, read from the lock file (a holder that has just taken it may not have
    written them yet: a few short waits)."""
    for _ in range(10):
        with contextlib.suppress(OSError, ValueError):
            details = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            if isinstance(details, dict):
                return details
        time.sleep(0.02)
    return {}


class OutputLock:
    """An exclusive, non-blocking lock on one output through the lock file `lock_file`.

    `acquire()` takes it or raises OutputInUseError naming the holder (OutputFolderError when the
    folder cannot hold the lock file); `release()` removes the file and lets go. As a context
    manager it is held for the block. `description` ("--output_dir out") and `flag` make the messages.
    """

    def __init__(self, lock_file: str, description: str, flag: str):
        self.lock_file, self.description, self.flag = lock_file, description, flag
        self._fd: int | None = None
        self._owner = 0

    def acquire(self) -> "OutputLock":
        """Takes the lock and records this process as the holder; returns self."""
        for _ in range(_ATTEMPTS):
            fd = self._open()
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise OutputInUseError(self._in_use(_holder(fd))) from None
                if _same_file(fd, self.lock_file):
                    self._record(fd)
                    self._fd, self._owner = fd, os.getpid()
                    return self
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # its holder removed it between our open and our flock: take the new one
        raise OutputInUseError(f"{self.description}: its lock {self.lock_file} keeps changing hands; "
                               f"another run is starting on it; choose another {self.flag}")

    def release(self) -> None:
        """Removes the lock file (while still holding it) and lets go; harmless when not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._owner == os.getpid():  # a forked child that inherited the descriptor leaves the file
            with contextlib.suppress(OSError):
                if _same_file(fd, self.lock_file):
                    os.unlink(self.lock_file)
        os.close(fd)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def _open(self) -> int:
        folder = os.path.dirname(self.lock_file) or "."
        try:
            fd = os.open(self.lock_file, _OPEN_FLAGS, 0o666)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OutputFolderError(f"{self.description}: the lock file {self.lock_file} is a symbolic "
                                        "link, which is never followed; remove it") from None
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise OutputFolderError(f"{self.description}: the folder {folder} is not writable "
                                        f"({e.strerror}); choose another {self.flag}") from None
            raise OutputFolderError(f"{self.description}: cannot create the lock file {self.lock_file}: "
                                    f"{e.strerror or e}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OutputFolderError(f"{self.description}: the lock file {self.lock_file} is not a regular "
                                    "file; remove it")
        return fd

    def _record(self, fd: int) -> None:
        from bert_tf.cli import program_name

        details = {"program": program_name(), "pid": os.getpid(), "host": socket.gethostname(),
                   "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        data = (json.dumps(details) + "\n").encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def _in_use(self, holder: dict) -> str:
        if not holder:
            return (f"{self.description} is in use by another run (starting now); wait for it or "
                    f"choose another {self.flag}")
        return (f"{self.description} is in use by {holder.get('program', '?')} (pid {holder.get('pid', '?')} "
                f"on {holder.get('host', '?')}, since {holder.get('since', '?')}); wait for it or "
                f"choose another {self.flag}")


def lock_folder(folder: str | os.PathLike, flag: str, *, create: bool = True) -> OutputLock:
    """The (not yet taken) lock on a whole output folder, FOLDER/.bert_tf.lock; with `create`, the
    folder is made first (`make_output_dir`)."""
    folder = os.fspath(folder)
    if create:
        make_output_dir(folder, flag)
    return OutputLock(os.path.join(folder, FOLDER_LOCK), f"{flag} {folder}", flag)


def check_output_file(path: str | os.PathLike, flag: str) -> None:
    """Raises OutputFolderError when the output file `path` names a folder."""
    if os.path.isdir(path):
        raise OutputFolderError(f"{flag} {os.fspath(path)} is a folder; name a file")


def lock_output(path: str | os.PathLike, flag: str, *, create_folder: bool = False,
                description: str | None = None) -> OutputLock:
    """The (not yet taken) lock on one output name `path` (a file, a prefix or a folder) in its
    folder: FOLDER/.NAME.bert_tf.lock. Its folder must exist unless `create_folder`.
    `description` ("--output_file x.tfrecord") defaults to the flag and `path`."""
    path = os.fspath(path)
    description = description or f"{flag} {path}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        blocker = _blocker(folder)
        if blocker is not None:
            raise OutputFolderError(f"{description}: {blocker} is a file, not a folder")
        if not create_folder:
            raise OutputFolderError(f"{description}: the folder {folder} does not exist")
        make_output_dir(folder, flag)
    name = os.path.basename(os.path.abspath(path))
    return OutputLock(os.path.join(folder, f".{name}{_LOCK_SUFFIX}"), description, flag)


@contextlib.contextmanager
def holding(locks: Iterable[OutputLock]) -> Iterator[None]:
    """Holds all of `locks` for the block (taken in the order of their lock files; one file once)."""
    unique = {os.path.abspath(lock.lock_file): lock for lock in locks}
    with contextlib.ExitStack() as stack:
        for key in sorted(unique):
            stack.enter_context(unique[key])
        yield
