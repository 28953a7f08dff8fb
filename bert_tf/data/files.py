"""Input file lists as users type them: comma-separated paths and globs (the original's --input_file).

One behaviour for every program: the spec is split on commas, each part stripped of surrounding
whitespace (empty parts are skipped); a part is a glob whose matches are taken sorted, or a plain
path taken as is; files are listed in the order of the parts, each once (a file named twice is
read once). A part that matches nothing, or a spec that names nothing, is an error that names the
flag and the part. Only files count: a folder matching a local glob is ignored.

The matching itself is pluggable (`match`), so the same rules hold on other filesystems: the
default is the local one; the pre-training input pipeline passes `tf.io.gfile.glob` (gs://, ...),
the Beam pipeline its FileSystems.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import os
from typing import Callable, Iterable, Sequence

from bert_tf.errors import BertTfError


class NoMatchingFileError(BertTfError, FileNotFoundError):
    """An input pattern (or the whole list) names no file."""


class TextFileError(BertTfError, ValueError):
    """A text input that cannot be read or is not UTF-8; the message names the file (and line)."""


def local_files(pattern: str) -> list[str]:
    """Files matching one local pattern: the path itself if it is a file (even with glob characters
    in its name), else the glob's matches that are files."""
    if os.path.isfile(pattern):
        return [pattern]
    if not glob.has_magic(pattern):
        return []
    return [path for path in glob.glob(pattern) if os.path.isfile(path)]


def split_patterns(patterns: str | Iterable[str]) -> list[str]:
    """The non-empty comma-separated parts of a spec (a string, or strings each split on commas)."""
    parts = patterns.split(",") if isinstance(patterns, str) else [p for s in patterns for p in s.split(",")]
    return [part.strip() for part in parts if part.strip()]


def expand_globs(patterns: str | Sequence[str], what: str = "--input_file",
                 match: Callable[[str], Iterable[str]] = local_files) -> list[str]:
    """Files named by comma-separated globs / paths, in order of the parts, sorted within one, no repeats.

    `what` names the flag (or thing) in error messages; `match(pattern)` lists one pattern's files.
    Raises NoMatchingFileError for a part matching nothing and for a spec naming nothing.
    """
    files: dict[str, None] = {}
    parts = split_patterns(patterns)
    for pattern in parts:
        matches = sorted(match(pattern))
        if not matches:
            raise NoMatchingFileError(f"{what}: {pattern!r} matches no file")
        files.update(dict.fromkeys(matches))
    if not parts:
        raise NoMatchingFileError(f"{what}: names no file")
    return list(files)


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


expand_inputs = functools.partial(expand_globs, what="--input")  # the --input of data_prep's programs


def read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file without line endings (LF or CRLF) and without a leading BOM.

    A byte sequence that is not UTF-8 raises TextFileError naming the file and line.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TextFileError(f"{path}: cannot read: {e.strerror}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_no = data.count(b"\n", 0, e.start) + 1
        raise TextFileError(f"{path}:{line_no}: not valid UTF-8 (byte 0x{data[e.start]:02x}); "
                          "convert the file to UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
