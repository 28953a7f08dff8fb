"""Write files so that no reader ever sees one half-written: a temp name beside it, renamed when complete.

The one mechanism every writer of the library goes through: a temporary file made with `mkstemp`
in the destination's folder (so the rename never crosses filesystems), flushed and fsynced, given
the permissions an ordinary `open(path, "w")` would give (0o666 less the umask), then moved over
the final name with `os.replace`. A failure or a kill leaves the final name absent or as it was.

- `atomic_write(path)`: a context manager for one file whose name is known up front.
- `PendingFile`: an open temporary file whose final name is chosen later (`commit(path)`), for
  writers that keep several files open or learn the names only at the end.
- `atomic_path(path)`: a temporary name for a tool that writes a file itself (a compiler).
- `atomic_prefix(prefix)`: a temporary prefix for a tool that writes several `PREFIX.*` files.
- `atomic_folder(...)`: a whole folder, filled under a temporary name then renamed into place;
  an existing folder is replaced only when all in it is the writer's own (ForeignFilesError).
- `write_json_atomic(path, obj)`: a JSON file through `atomic_write` (`json_text` gives its text).
- `leftover_temp_files`, `remove_leftover_temp_files`, `remove_temp_files_of`, `recover_folder`: what a killed writer left,
  for the one run that owns those output names to clean up (`atomic_folder` calls `recover_folder`).

Temporary names are `mkstemp`/`mkdtemp` names (O_EXCL, unpredictable), so a symlink planted at an
output name is replaced by the rename, never written through.
"""
from __future__ import annotations

import contextlib
import errno
import glob
import json
import logging
import os
import re
import shutil
import tempfile
from typing import Callable, IO, Iterator, NoReturn, Sequence

from bert_tf.errors import BertTfError

_LOG = logging.getLogger(__name__)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux allows (os.umask is a swap)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def publish(tmp: str, path: str, mode: int = 0o666) -> None:
    """Gives the complete file `tmp` the permissions `open` would (`mode` less the umask) and moves
    it over `path`."""
    os.chmod(tmp, mode & ~current_umask())  # mkstemp creates 0600; outputs are meant to be shared
    os.replace(tmp, path)


FULL = (errno.EFBIG, errno.ENOSPC, errno.EDQUOT)  # a write the disk or a size limit refused
REFUSED = tuple(os.strerror(code) for code in FULL)  # how TensorFlow's own writers say it: "File too large"


def write_error(error: BaseException, path: str | os.PathLike) -> BaseException:
    """`error` as the user should read it: a refused write (a full disk, a quota, a file-size limit), which names
    no file (an OSError) or names a temporary one (TensorFlow's, safetensors' writers), becomes an OSError naming `path`;
    anything else is returned as it is."""
    if isinstance(error, OSError):
        refused = error.errno in FULL and not error.filename
    else:
        refused = any(r in str(error) for r in REFUSED)  # TensorFlow's, safetensors' own errors
    if refused:
        return OSError(f"cannot write {os.fspath(path)}: {write_failure(error)} (nothing of it was kept)")
    return error


def reraise_naming(error: BaseException, path: str | os.PathLike) -> NoReturn:
    """Raises `write_error(error, path)` from an except block: the OSError naming `path` for a refused write, else
    `error` itself."""
    named = write_error(error, path)
    if named is error:
        raise error
    raise named from None


def write_failure(error: BaseException) -> str:
    """What a failed write says, in a few words ("File too large", "No space left on device"), for an OSError or
    a TensorFlow op error (whose message ends "...; REASON [Op:NAME]")."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    text = str(getattr(error, "message", error))
    refused = next((reason for reason in REFUSED if reason in text), None)
    message = text.split("[Op:")[0].strip()
    return refused or message.rsplit(";", 1)[-1].strip() or message


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class PendingFile:
    """An open temporary file in `folder` that takes its final name only through `commit(path)`.

    `file` is the open file object (text mode: UTF-8, LF line ends). `discard()` closes and deletes
    it; committing or discarding twice is harmless.
    """

    def __init__(self, folder: str | os.PathLike, name_hint: str, mode: str = "w", **open_kwargs):
        fd, self.temp_name = tempfile.mkstemp(prefix=f".{name_hint}.", suffix=".tmp", dir=os.fspath(folder))
        if "b" not in mode:
            open_kwargs.setdefault("encoding", "utf-8")
            open_kwargs.setdefault("newline", "\n")
        try:
            self.file: IO = os.fdopen(fd, mode, **open_kwargs)
        except BaseException:
            os.close(fd)
            _remove_quietly(self.temp_name)
            raise
        self._done = False

    @classmethod
    def beside(cls, path: str | os.PathLike, mode: str = "w", **open_kwargs) -> "PendingFile":
        """A pending file in the folder of `path`, named after it."""
        path = os.fspath(path)
        return cls(os.path.dirname(os.path.abspath(path)), os.path.basename(path), mode, **open_kwargs)

    def commit(self, path: str | os.PathLike) -> None:
        """Flushes the data to disk and moves the file to `path` (replacing any file there)."""
        if self._done:
            return
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            publish(self.temp_name, os.fspath(path))
        except BaseException as e:
            self.discard()
            reraise_naming(e, path)
        self._done = True

    def discard(self) -> None:
        """Closes and deletes the temporary file; the final name is never touched."""
        self._done = True
        with contextlib.suppress(OSError):
            self.file.close()
        _remove_quietly(self.temp_name)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs) -> Iterator[IO]:
    """Opens a temporary file beside `path`; renames it to `path` only if the block succeeds.

    On any exception (or a kill) the final name is never created or replaced; the temporary file
    is removed when Python still can. Text mode defaults to UTF-8 with LF line ends.
    """
    pending = PendingFile.beside(path, mode, **open_kwargs)
    try:
        yield pending.file
    except BaseException as e:
        pending.discard()
        reraise_naming(e, path)
    pending.commit(path)


def json_text(obj, indent: int | None = 1, sort_keys: bool = True) -> str:
    """The text `write_json_atomic` writes: `json.dumps(obj, indent=..., sort_keys=...)` and a newline."""
    return json.dumps(obj, indent=indent, sort_keys=sort_keys) + "\n"


def write_json_atomic(path: str | os.PathLike, obj, indent: int | None = 1, sort_keys: bool = True) -> None:
    """Writes `json_text(obj)` atomically; an OSError names the path."""
    try:
        with atomic_write(path) as f:
            f.write(json_text(obj, indent, sort_keys))
    except OSError as e:
        raise OSError(f"cannot write {os.fspath(path)}: {e.strerror or e}") from None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp", mode: int = 0o666) -> Iterator[str]:
    """A fresh temporary file name beside `path` for a tool that writes by name (a compiler, a
    linker); the file is moved to `path` (permissions `mode` less the umask) only if the block
    succeeds, and deleted otherwise."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=suffix,
                               dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        yield tmp
        publish(tmp, path, mode)
    finally:
        _remove_quietly(tmp)


@contextlib.contextmanager
def atomic_prefix(prefix: str | os.PathLike, last_suffix: str = ".index") -> Iterator[str]:
    """A temporary prefix beside `prefix` for a tool that writes several `PREFIX.*` files (a TF
    checkpoint). On success each `TMP.x` becomes `PREFIX.x`, the one ending in `last_suffix` last,
    so a reader that finds it finds the others complete; leftovers are deleted either way."""
    prefix = os.fspath(prefix)
    folder = os.path.dirname(os.path.abspath(prefix))
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(prefix)}.", suffix=".tmp", dir=folder)
    try:
        temp_prefix = os.path.join(tmp, "files")
        yield temp_prefix
        produced = glob.glob(glob.escape(temp_prefix) + ".*")
        for src in sorted(produced, key=lambda p: p.endswith(last_suffix)):
            publish(src, prefix + src[len(temp_prefix):])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class ForeignFilesError(BertTfError):
    """An output that holds files its writer did not write: refused rather than deleted."""


def _check_replaceable(output_dir: str, owned: Callable[[str], bool], program: str) -> None:
    """Raises ForeignFilesError unless `output_dir` is a real folder whose every entry `owned` claims."""
    if os.path.islink(output_dir):
        raise ForeignFilesError(f"{output_dir} is a symbolic link; name a real folder (a link is never "
                                "written through nor replaced)")
    if not os.path.isdir(output_dir):
        raise ForeignFilesError(f"{output_dir} is not a folder; choose a new or empty folder")
    foreign = next((name for name in sorted(os.listdir(output_dir)) if not owned(name)), None)
    if foreign is not None:
        raise ForeignFilesError(f"{output_dir} holds files {program} did not write (e.g. {foreign}); "
                                "choose a new or empty folder")


def _leftover_folders(output_dir: str, kind: str) -> list[str]:
    """The real folders `.NAME.{kind}-XXXXXXXX` beside `output_dir` (mkdtemp's 8 characters): only
    `atomic_folder` makes them, "tmp" while filling, "old" while replacing."""
    parent, base = os.path.dirname(output_dir), os.path.basename(output_dir)
    if not os.path.isdir(parent):
        return []
    pattern = re.compile(re.escape(f".{base}.{kind}-") + r"[a-z0-9_]{8}")
    found = sorted(os.path.join(parent, n) for n in os.listdir(parent) if pattern.fullmatch(n))
    return [p for p in found if os.path.isdir(p) and not os.path.islink(p)]


def _holds_old_output(old: str) -> bool:
    """Whether `old` still holds the folder an `atomic_folder` moved aside into it (OLD/x)."""
    aside = os.path.join(old, "x")
    return os.path.isdir(aside) and not os.path.islink(aside)


def recover_folder(output_dir: str | os.PathLike) -> list[str]:
    """Puts right what killed `atomic_folder` calls left beside `output_dir`; returns one line per action.

    A kill between moving the old folder aside (`.NAME.old-XXXXXXXX/x`) and moving the new one in
    leaves `output_dir` absent: the old folder is moved back. Restoring (rather than deleting it
    once a new folder is in place) loses nothing whatever this run does next: the output is again
    the complete folder it was, a run that fails or is killed keeps it, and a call without
    `overwrite` sees that it exists. (Several such folders, from kills before this recovery
    existed: the one set aside last is the latest output and is restored.) Then the filling folders
    (`.NAME.tmp-*`) and the old folders whose contents are superseded are deleted.
    For the one run that owns `output_dir` (holds its lock): a live writer's folders look the same.
    """
    output_dir = os.path.abspath(os.fspath(output_dir))
    lines = []
    olds = _leftover_folders(output_dir, "old")
    waiting = sorted(filter(_holds_old_output, olds), key=lambda old: os.stat(old).st_mtime_ns)
    if not os.path.lexists(output_dir) and waiting:
        os.replace(os.path.join(waiting[-1], "x"), output_dir)
        lines.append(f"restored {output_dir} from {waiting[-1]}, where a killed run had moved it aside")
    for path in _leftover_folders(output_dir, "tmp") + olds:
        shutil.rmtree(path)
        lines.append(f"removed {path}: a temporary folder a killed run left")
    return lines


def atomic_folder(output_dir: str | os.PathLike, overwrite: bool, fill: Callable[[str], None], *,
                  owned: Callable[[str], bool] | None = None, program: str = "this program",
                  log: Callable[[str], None] | None = None) -> None:
    """Runs `fill(tmp_dir)` on a private temporary folder beside `output_dir`, then renames it into place.

    An existing `output_dir` is replaced only with `overwrite` (else FileExistsError), and only when
    every entry in it is ours: a name `owned(name)` accepts, or by default a name `fill` wrote.
    Anything else, or an `output_dir` that is a file or a symbolic link, raises ForeignFilesError
    naming it and deletes nothing (checked before `fill` when `owned` is given, and again on the
    folder moved aside just before it is deleted, so a file that appears meanwhile is kept). A
    failure or a kill leaves the old folder (or nothing) under the final name, never a partial one.

    What killed earlier calls left is put right first (`recover_folder`, each action given to `log`,
    by default a logged warning), so the caller must own `output_dir`, as one run holding its lock does.
    """
    output_dir = os.path.abspath(os.fspath(output_dir))
    for line in recover_folder(output_dir):
        (log or _LOG.warning)(line)
    if os.path.lexists(output_dir):
        if not overwrite:
            raise FileExistsError(f"{output_dir} already exists")
        _check_replaceable(output_dir, owned or (lambda name: True), program)  # the fill's names come later
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.tmp-", dir=parent)
    try:
        _fill_naming_the_folder(fill, tmp, output_dir)
        os.chmod(tmp, 0o777 & ~current_umask())  # private while filled; the result is an ordinary folder
        if os.path.lexists(output_dir):
            _replace_folder(tmp, output_dir, owned or set(os.listdir(tmp)).__contains__, program)
        else:
            os.replace(tmp, output_dir)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)


def _fill_naming_the_folder(fill: Callable[[str], None], tmp: str, output_dir: str) -> None:
    """`fill(tmp)`, whose refused writes and messages name `output_dir`, the folder the user asked for, rather than
    the private temporary one."""
    try:
        fill(tmp)
    except Exception as e:
        if isinstance(e, (OSError, BertTfError)) and tmp in str(e):
            raise OSError(str(e).replace(tmp, output_dir)) from None
        reraise_naming(e, output_dir)


def _replace_folder(new: str, output_dir: str, owned: Callable[[str], bool], program: str) -> None:
    """Moves `output_dir` aside, checks that all in it is ours (else puts it back), moves `new` in."""
    _check_replaceable(output_dir, owned, program)
    parent, base = os.path.dirname(output_dir), os.path.basename(output_dir)
    old = tempfile.mkdtemp(prefix=f".{base}.old-", dir=parent)
    aside = os.path.join(old, "x")
    os.replace(output_dir, aside)
    try:
        _check_replaceable(aside, owned, program)
    except ForeignFilesError:
        os.replace(aside, output_dir)
        os.rmdir(old)
        raise
    os.replace(new, output_dir)
    shutil.rmtree(old)


def leftover_temp_files(folder: str | os.PathLike, final_name: str) -> list[str]:
    """Temporary files our atomic writers left in `folder` when killed, for final names that fully
    match the regex `final_name` (they are named `.FINALNAME.XXXXXXXX.tmp`, mkstemp's 8 characters).

    Only a program that owns those final names (one run per output) should remove them.
    """
    pattern = re.compile(r"\.(?:" + final_name + r")\.[a-z0-9_]{8}\.tmp")
    folder = os.fspath(folder)
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if pattern.fullmatch(name))


def remove_leftover_temp_files(paths: Sequence[str | os.PathLike],
                               log: Callable[[str], None] | None = None) -> list[str]:
    """Deletes the temporary files our atomic writers left when killed while writing `paths` (see
    `leftover_temp_files`), giving `log` one line naming each; returns them. Only for the one run
    that owns those names (it holds their lock)."""
    removed = []
    for path in paths:
        folder, name = os.path.split(os.path.abspath(os.fspath(path)))
        if os.path.isdir(folder):
            removed += remove_temp_files_of(folder, re.escape(name), log)
    return removed


def remove_temp_files_of(folder: str | os.PathLike, final_name: str,
                         log: Callable[[str], None] | None = None) -> list[str]:
    """Deletes the temporary files killed writers left in `folder` for final names fully matching the
    regex `final_name`, giving `log` one line naming each; returns them. Only for the one run that
    owns those names (it holds their lock)."""
    removed = leftover_temp_files(folder, final_name)
    for leftover in removed:
        _remove_quietly(leftover)
        if log is not None:
            log(f"removed {leftover}: a temporary file a killed run left")
    return removed
