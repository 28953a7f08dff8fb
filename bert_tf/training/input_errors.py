"""Training input that breaks mid-run, reported as one line naming the file.

tf.data's own errors do not say which file failed: a damaged TFRecord raises DataLossError
"corrupted record at 486874" (or "truncated record at ..."), from wherever the pipeline is consumed
(the training loop, evaluation, prediction), deep in an op traceback. Two pieces fix that:

- `check_rows` is an in-graph check for input pipelines: when a row of a batch is bad, it fails
  with a message naming the row's file and record, built only then (one `tf.cond` per batch), so a
  good batch pays for the comparisons alone.
- `reading(files)` is put around the code that consumes the pipeline: it turns such a failed check
  into `InputFileError` with that message, and a DataLossError into one naming the damaged file,
  found by `bert_tf.data.tfrecord.find_damage` from the byte offset TensorFlow reports (the
  records before it are skipped by their headers). Nothing is ever skipped: the run stops.
"""
from __future__ import annotations

import contextlib
import functools
import re
from typing import Callable, Iterator, Sequence

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.data import tfrecord
from bert_tf.errors import BertTfError

_START, _END = "<<bert_tf input: ", " :bert_tf input>>"
_CHECK = re.compile(re.escape(_START) + "(.*?)" + re.escape(_END), re.DOTALL)
_OFFSET = re.compile(r"(corrupted|truncated) record at (\d+)")
_RECORD_LOSS = re.compile(r"(corrupted|truncated) record at \d+|inflate\(\) failed")  # TFRecordDataset's
_HEADER_BYTES = 12  # a record's length and its CRC: "corrupted record at N" for bad data is 12 past its start


class InputFileError(BertTfError, ValueError):
    """An input file turned out damaged or unfit while it was being read (the message names it)."""


Problem = Callable[[tf.Tensor], "tf.Tensor | str"]


def check_rows(checks: Sequence[tuple[tf.Tensor, Problem]], files: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
    """An op failing when a row of a batch is bad, with "FILE: record N PROBLEM" for the first bad row
    of the first failing check. checks: (bad, problem) pairs, `bad` [batch] bool, `problem(row)` what
    is wrong with that row; files, records: each row's file name and record index. One `tf.cond` per
    batch: the messages are built only on failure. Use as a control dependency of the batch."""

    def fail() -> tf.Tensor:
        failed = tf.constant(False)
        for bad, problem in checks:  # in order: the first failing check is the one reported
            with tf.control_dependencies([failed]):
                failed = tf.cond(tf.reduce_any(bad), functools.partial(_fail_first, bad, problem, files, records),
                                 lambda: tf.constant(False))
        return failed

    any_bad = tf.reduce_any(tf.stack([tf.reduce_any(bad) for bad, _ in checks]))
    return tf.cond(any_bad, fail, lambda: tf.constant(True))


def _fail_first(bad: tf.Tensor, problem: Problem, files: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
    row = tf.argmax(tf.cast(bad, tf.int32), output_type=tf.int32)
    message = tf.strings.join([_START, files[row], ": record ", tf.strings.as_string(records[row]), " ",
                               problem(row), _END])
    with tf.control_dependencies([tf.debugging.Assert(tf.logical_not(bad[row]), [message])]):
        return tf.constant(True)


def check_file_end(path: tf.Tensor, bytes_read: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
    """A tensor whose computation fails with "FILE: ends inside a record ..." when the framed records read from an
    uncompressed TFRecord file (`bytes_read`: their lengths + 16 bytes of framing each) do not add up
    to its `size` (-1: not known, e.g. compressed): TensorFlow's reader stops silently at a file cut
    inside a record's 12-byte header, losing the rest of the file without an error."""
    complete = tf.logical_or(size < 0, tf.equal(bytes_read, size))
    message = tf.strings.join([_START, path, ": ends inside a record after byte ", tf.strings.as_string(bytes_read),
                               " of ", tf.strings.as_string(size), " (the file was cut; its last record is "
                               "incomplete)", _END])
    with tf.control_dependencies([tf.debugging.Assert(complete, [message])]):
        return tf.constant(True)


@contextlib.contextmanager
def reading(files: Sequence[str], open_binary: Callable | None = None, advice: str = "") -> Iterator[None]:
    """Turns the input errors raised in the block into one-line `InputFileError`s naming the file.

    files: the TFRecord files the block's pipelines read (searched for the damaged one);
    open_binary: how to open them for reading bytes (default tf.io.gfile.GFile, for any filesystem
    TensorFlow reads);
    advice: appended to the message ("; delete it, it is rebuilt").
    """
    try:
        yield
    except tf.errors.InvalidArgumentError as e:
        found = _CHECK.search(e.message)
        if found is None:
            raise
        raise InputFileError(found.group(1) + advice) from None
    except tf.errors.DataLossError as e:
        if not _RECORD_LOSS.search(e.message):
            raise
        raise InputFileError(damaged_file_line(e.message, files, open_binary or _open_binary) + advice) from None
    except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as e:
        if not any(path in e.message for path in files):
            raise
        raise InputFileError(f"cannot read an input file: {short_message(e.message)}") from None


def _open_binary(path: str):
    return tf.io.gfile.GFile(path, "rb")


def damaged_file_line(message: str, files: Sequence[str], open_binary: Callable) -> str:
    """"FILE: corrupt record data at byte N" for the file TensorFlow's data-loss `message` came from;
    when the reported offset fits no file's records, every file is checked in full."""
    found = _OFFSET.search(message)
    offsets: list[int | None] = []
    if found:
        offset = int(found.group(2))
        offsets = [offset, offset - _HEADER_BYTES] if found.group(1) == "corrupted" else [offset]
    for offset in [*offsets, None]:
        for path in files:
            damage = tfrecord.find_damage(path, open_binary, offset)
            if damage:
                return damage
    names = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"an input file ({names}) is damaged: {short_message(message)}"


def short_message(message: str) -> str:
    """TensorFlow's error message without its function-node prefix and op suffix, on one line."""
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[Op:[^\]]*\].*$", "", message, flags=re.DOTALL)
    return " ".join(message.split())
