"""TFRecord files and `tf.train.Example` records in pure Python: no TensorFlow import.

Data preparation and the fine-tuning feature caches write and check records with this module so
that they stay light and fork cheaply; training reads the same files with `tf.data`.

- Framing: each record is `uint64 length, masked crc32c(length), data, masked crc32c(data)`, all
  little-endian, as TensorFlow's RecordWriter writes it (`frame_record`, `masked_crc32c`).
  `find_damage` names a file's broken record (tf.data's data-loss errors do not name the file).
- Files: `TFRecordWriter` writes a file atomically (temp name, renamed when closed), optionally
  gzip-compressed with bytes that depend on the data only; `read_records` iterates a file's
  records, plain or gzip (detected by its magic bytes, `compression_type`), checking every CRC.
- Examples: `encode_example({name: values})` gives the serialized `tf.train.Example` (value-equal
  to protobuf's own), `decode_example` the dict back; `write_examples` / `read_examples` do whole
  files. A feature's kind comes from its values: ints (or an integer numpy array) are an
  Int64List, floats (or a float array) a FloatList, bytes or str a BytesList.
"""
from __future__ import annotations

import gzip
import io
import numbers
import os
import struct
import zlib
from typing import Callable, IO, Iterable, Iterator, Mapping

import google_crc32c

from bert_tf.data.atomic_io import PendingFile, reraise_naming
from bert_tf.errors import BertTfError

GZIP_MAGIC = b"\x1f\x8b"
# Field numbers of tf.train.Feature's kinds.
BYTES_LIST, FLOAT_LIST, INT64_LIST = 1, 2, 3


class RecordFileError(BertTfError, ValueError):
    """A TFRecord file (or a record in it) is truncated or corrupt."""


def _open_local(path: str) -> IO[bytes]:
    return open(path, "rb")


# ----------------------------------------------------------------------------- framing

def masked_crc32c(data: bytes) -> int:
    """The CRC32C of `data`, rotated and offset as TFRecord stores it."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """TFRecord framing of one record."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def compressed_stream(raw: IO[bytes]) -> gzip.GzipFile:
    """A gzip writer over `raw` whose bytes depend on the data only (no file name, no time stamp)."""
    return gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0)


def compression_type(path: str, open_binary: Callable[[str], IO[bytes]] = _open_local) -> str:
    """"GZIP" for a gzip-compressed file, else "" (`tf.data.TFRecordDataset`'s compression_type)."""
    with open_binary(path) as f:
        return "GZIP" if f.read(2) == GZIP_MAGIC else ""


class TFRecordWriter:
    """Writes a TFRecord file under a temporary name, renamed to `path` only by `close()`.

    Use as a context manager: an exception (or a kill) leaves no file named `path`.
    """

    def __init__(self, path: str | os.PathLike, compress: bool = False):
        self.path = os.fspath(path)
        self.count = 0
        try:
            self._pending = PendingFile.beside(self.path, "wb")
        except OSError as e:
            raise OSError(f"cannot write output file {self.path}: {e.strerror}") from None
        raw = self._pending.file
        self._stream = compressed_stream(raw) if compress else raw

    def write(self, record: bytes) -> None:
        self._stream.write(frame_record(record))
        self.count += 1

    def close(self) -> None:
        if self._stream is not self._pending.file:
            self._stream.close()  # the gzip trailer; leaves the underlying file open
        self._pending.commit(self.path)

    def abort(self) -> None:
        self._pending.discard()

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        self.abort()
        reraise_naming(exc, self.path)


def _framed_records(f: IO[bytes], path: str, check_from: int = 0) -> Iterator[bytes]:
    """Records of a framed stream; those starting before byte `check_from` are skipped by their length
    headers, their data neither read nor checked."""
    pos = 0
    while True:
        header = f.read(12)
        if not header:
            return
        if len(header) < 12:
            raise RecordFileError(f"{path}: truncated record header at byte {pos}")
        (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
        if masked_crc32c(header[:8]) != length_crc:
            raise RecordFileError(f"{path}: corrupt record length at byte {pos}")
        if pos < check_from:
            f.seek(length + 4, io.SEEK_CUR)
            pos += 16 + length
            continue
        data, footer = f.read(length), f.read(4)
        if len(data) < length or len(footer) < 4:
            raise RecordFileError(f"{path}: truncated record at byte {pos}")
        if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
            raise RecordFileError(f"{path}: corrupt record data at byte {pos}")
        yield data
        pos += 16 + length


def read_records(path: str, open_binary: Callable[[str], IO[bytes]] = _open_local,
                 check_from: int = 0) -> Iterator[bytes]:
    """Raw records of a TFRecord file (gzip detected by its magic bytes), every CRC checked.

    `open_binary(path)` opens the file for reading bytes (a seekable file; tf.io.gfile.GFile works).
    `check_from`: the records starting before this byte of the (uncompressed) stream are skipped
    unchecked, by their length headers.
    """
    with open_binary(path) as raw:
        is_gzip = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        if not is_gzip:
            yield from _framed_records(raw, path, check_from)
            return
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as f:
                yield from _framed_records(f, path, check_from)
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise RecordFileError(f"{path}: corrupt gzip data ({e or 'truncated'})") from None


def find_damage(path: str, open_binary: Callable[[str], IO[bytes]] = _open_local,
                offset: int | None = None) -> str | None:
    """Why a TFRecord file does not read to its end ("PATH: truncated record at byte N", ...), or None.

    With `offset` (TensorFlow's "corrupted record at N", a byte of the uncompressed stream), only the
    record starting there is checked: the ones before are skipped by their headers, and a file with
    no record at that byte is None. That finds the file TensorFlow failed on without reading them all.
    """
    try:
        for _ in read_records(path, open_binary, check_from=offset or 0):
            if offset is not None:
                return None
    except RecordFileError as e:
        return str(e)
    return None


# ----------------------------------------------------------------------------- protobuf wire format

def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(tag: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    return bytes((tag,)) + varint(len(payload)) + payload


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def message_fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message; value is int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        else:
            raise RecordFileError(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise RecordFileError("truncated protobuf message")
        yield number, wire, value


# ----------------------------------------------------------------------------- tf.train.Example

def _as_list(values) -> list:
    if isinstance(values, (numbers.Number, bytes, str)):
        return [values]
    if hasattr(values, "dtype"):  # numpy arrays, any shape: Example lists are flat
        return values.reshape(-1).tolist()
    return list(values)


def feature_kind(values: list) -> int:
    """BYTES_LIST, FLOAT_LIST or INT64_LIST for a list of values (an empty list is an Int64List)."""
    if any(isinstance(v, (bytes, str)) for v in values):
        if not all(isinstance(v, (bytes, str)) for v in values):
            raise ValueError("a feature mixes strings with numbers")
        return BYTES_LIST
    if all(isinstance(v, numbers.Integral) for v in values):
        return INT64_LIST
    if all(isinstance(v, numbers.Real) for v in values):
        return FLOAT_LIST
    raise ValueError(f"feature values must be ints, floats, bytes or str, not {type(values[0]).__name__}")


def _int64(value: int) -> bytes:
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"{value} does not fit in int64")
    return varint(value + (1 << 64) if value < 0 else value)


def encode_feature(values) -> bytes:
    """A serialized `tf.train.Feature` holding `values` (kind from the values, see `feature_kind`)."""
    values = _as_list(values)
    kind = feature_kind(values)
    if kind == INT64_LIST:
        packed = b"".join([_int64(int(v)) for v in values])
    elif kind == FLOAT_LIST:
        packed = struct.pack(f"<{len(values)}f", *values)
    else:
        items = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
        return length_delimited(0x08 * BYTES_LIST + 2, b"".join(length_delimited(0x0A, v) for v in items))
    body = length_delimited(0x0A, packed) if packed else b""  # packed `value`, omitted when empty
    return length_delimited(0x08 * kind + 2, body)


def encode_example(features: Mapping[str, object]) -> bytes:
    """A serialized `tf.train.Example` of {feature name: values}; entries in the mapping's order."""
    entries = b"".join(
        length_delimited(0x0A, length_delimited(0x0A, name.encode("utf-8")) + length_delimited(0x12, encode_feature(v)))
        for name, v in features.items())
    return length_delimited(0x0A, entries)


def _decode_list(kind: int, buf: bytes) -> list:
    values: list = []
    for _, wire, value in message_fields(buf):
        if kind == INT64_LIST:  # packed or not
            if wire == 2:
                pos = 0
                while pos < len(value):
                    v, pos = read_varint(value, pos)
                    values.append(v - (1 << 64) if v >= 1 << 63 else v)
            else:
                values.append(value - (1 << 64) if value >= 1 << 63 else value)
        elif kind == FLOAT_LIST:  # packed (wire 2) or one fixed32 (wire 5)
            values.extend(struct.unpack(f"<{len(value) // 4}f", value))
        else:
            values.append(bytes(value))
    return values


def decode_example(record: bytes) -> dict[str, list]:
    """A serialized `tf.train.Example` as {feature name: list of values}, without TensorFlow.

    Int64List values come back as ints, FloatList as (float32-rounded) floats, BytesList as bytes.
    Raises RecordFileError for bytes that are not an Example.
    """
    out: dict[str, list] = {}
    try:
        for _, _, features in message_fields(record):
            for _, _, entry in message_fields(features):
                name, feature = "", b""
                for number, _, value in message_fields(entry):
                    if number == 1:
                        name = bytes(value).decode("utf-8")
                    else:
                        feature = value
                out[name] = []
                for kind, _, lst in message_fields(feature):
                    out[name] = _decode_list(kind, lst)
    except (IndexError, TypeError, struct.error, UnicodeDecodeError) as e:
        raise RecordFileError(f"not a tf.train.Example ({type(e).__name__}: {e})") from None
    return out


def write_examples(path: str | os.PathLike, examples: Iterable[Mapping[str, object]],
                   compress: bool = False) -> int:
    """Writes {feature: values} dicts as a TFRecord file of Examples (atomically); returns the count."""
    with TFRecordWriter(path, compress) as writer:
        for example in examples:
            writer.write(encode_example(example))
    return writer.count


def read_examples(path: str, open_binary: Callable[[str], IO[bytes]] = _open_local) -> Iterator[dict[str, list]]:
    """The Examples of a TFRecord file (plain or gzip) as {feature: list} dicts, CRCs checked."""
    for index, record in enumerate(read_records(path, open_binary)):
        try:
            yield decode_example(record)
        except RecordFileError as e:
            raise RecordFileError(f"{path}: record {index}: {e}") from None


def fixed_length_spec(example: Mapping[str, object]) -> dict:
    """The `tf.io.parse_example` spec (FixedLenFeature per name) of Examples shaped like `example`,
    for reading a file of `write_examples` with `tf.data`. Imports TensorFlow."""
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    dtypes = {INT64_LIST: tf.int64, FLOAT_LIST: tf.float32, BYTES_LIST: tf.string}
    spec = {}
    for name, values in example.items():
        values = _as_list(values)
        spec[name] = tf.io.FixedLenFeature([len(values)], dtypes[feature_kind(values)])
    return spec
