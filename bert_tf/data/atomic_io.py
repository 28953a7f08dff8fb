"""Write a file so that no reader ever sees it half-written: temp name beside it, rename when complete."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Callable, IO, Iterator


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs) -> Iterator[IO]:
    """Opens a temporary file beside `path`; renames it to `path` only if the block succeeds.

    On any exception (or a kill) the final name is never created or replaced; the temporary file
    is removed when Python still can. Text mode defaults to UTF-8 with LF line ends.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    if "b" not in mode:
        open_kwargs.setdefault("encoding", "utf-8")
        open_kwargs.setdefault("newline", "\n")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as f:
            yield f
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_folder(output_dir: str | os.PathLike, overwrite: bool, fill: Callable[[str], None]) -> None:
    """Runs `fill(tmp_dir)` on a temporary folder beside `output_dir`, then renames it into place.

    An existing `output_dir` is replaced only with `overwrite` (else FileExistsError); a failure
    or a kill leaves the old folder (or nothing) under the final name, never a partial one.
    """
    output_dir = os.path.abspath(os.fspath(output_dir))
    if os.path.exists(output_dir) and not overwrite:
        raise FileExistsError(f"{output_dir} already exists")
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.tmp-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the result is an ordinary folder
    try:
        fill(tmp)
        if os.path.exists(output_dir):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.old-", dir=parent)
            os.replace(output_dir, os.path.join(old, "x"))
            os.replace(tmp, output_dir)
            shutil.rmtree(old)
        else:
            os.replace(tmp, output_dir)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
