"""The pretraining record schema: `tf.train.Example` with the original BERT's 7 features.

Write side (no TensorFlow needed, so data preparation stays light and forks cheaply):
`ExampleEncoder.encode(...)` builds the serialized `tf.train.Example` bytes directly (protobuf wire
format, packed repeated fields), and `RecordWriter` frames them as TFRecord (length, masked CRC32C,
data, masked CRC32C), optionally gzip-compressed, into a temp file renamed on success.

Read side: `read_records(path)` iterates the raw records of a TFRecord file (plain or gzip, CRCs
checked), `decode_example(record)` turns one into `{feature: list}` in pure Python, and
`feature_spec(...)` / `parse_examples(...)` give the `tf.io` feature spec for `tf.data` pipelines.

The 7 features (every list padded with 0 to a fixed length):
  input_ids, input_mask, segment_ids      int64 x max_seq_length
  masked_lm_positions, masked_lm_ids      int64 x max_predictions_per_seq
  masked_lm_weights                       float x max_predictions_per_seq (1.0 real, 0.0 padding)
  next_sentence_labels                    int64 x 1 (1 = B is a random next segment)
"""
from __future__ import annotations

import gzip
import os
import struct
from typing import Iterator, Sequence

import google_crc32c
from bert_tf.errors import BertTfError

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")
INT_FEATURES = frozenset(FEATURE_NAMES) - {"masked_lm_weights"}

_FLOAT_ONE = struct.pack("<f", 1.0)
_FLOAT_ZERO = struct.pack("<f", 0.0)


class RecordFileError(BertTfError, ValueError):
    """A TFRecord file is truncated or corrupt."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    return bytes((tag,)) + _varint(len(payload)) + payload


class ExampleEncoder:
    """Serializes instances to `tf.train.Example` bytes, value-identical to protobuf's own encoder.

    A table of varint encodings for every id below `max_id` makes an int list one `bytes.join`.
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int, max_id: int = 1 << 16):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        # Also covers every length prefix: a record is far below 64 KiB.
        self._table = [_varint(i) for i in range(max(max_id, 1 << 16) + 1)]
        # Map entries are written in the original's insertion order; readers don't care.
        self._keys = {name: _field(0x0A, name.encode()) for name in FEATURE_NAMES}

    def _varints(self, values: Sequence[int]) -> bytes:
        table = self._table
        try:
            return b"".join([table[v] for v in values])
        except IndexError:
            return b"".join([_varint(v) for v in values])

    def _entry(self, name: str, feature: bytes) -> bytes:
        # Features.feature map entry {key: 1, value: 2}, itself field 1 of Features.
        t = self._table
        body = self._keys[name] + b"\x12" + t[len(feature)] + feature
        return b"\x0a" + t[len(body)] + body

    def _int_entry(self, name: str, packed: bytes) -> bytes:
        # Feature.int64_list (field 3) holding Int64List.value (field 1, packed).
        t = self._table
        int64_list = b"\x0a" + t[len(packed)] + packed if packed else b""
        return self._entry(name, b"\x1a" + t[len(int64_list)] + int64_list)

    def encode(self, input_ids: Sequence[int], segment_ids: Sequence[int],
               masked_lm_positions: Sequence[int], masked_lm_ids: Sequence[int],
               next_sentence_label: int) -> bytes:
        """One padded record, as the original's `write_instance_to_example_files` builds it."""
        n, seq_pad = len(input_ids), self.max_seq_length - len(input_ids)
        k, pred_pad = len(masked_lm_positions), self.max_predictions_per_seq - len(masked_lm_positions)
        if seq_pad < 0 or pred_pad < 0:
            raise ValueError(f"instance longer than the record ({n} tokens, {k} predictions)")
        # 0 and 1 are their own one-byte varints.
        mask = b"\x01" * n + b"\x00" * seq_pad
        segments = bytes(segment_ids) + b"\x00" * seq_pad
        weights = _FLOAT_ONE * k + _FLOAT_ZERO * pred_pad
        features = b"".join((
            self._int_entry("input_ids", self._varints(input_ids) + b"\x00" * seq_pad),
            self._int_entry("input_mask", mask),
            self._int_entry("segment_ids", segments),
            self._int_entry("masked_lm_positions", self._varints(masked_lm_positions) + b"\x00" * pred_pad),
            self._int_entry("masked_lm_ids", self._varints(masked_lm_ids) + b"\x00" * pred_pad),
            self._entry("masked_lm_weights", _field(0x12, _field(0x0A, weights) if weights else b"")),
            self._int_entry("next_sentence_labels", self._table[next_sentence_label]),
        ))
        return _field(0x0A, features)


class BatchExampleEncoder:
    """Serializes many instances at once from numpy arrays; same bytes as `ExampleEncoder.encode`.

    The id and position lists are varint-encoded for the whole batch with numpy; each record is
    then a join of table-looked-up headers and slices of that buffer.
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int):
        self.L, self.P = max_seq_length, max_predictions_per_seq
        self._one = ExampleEncoder(max_seq_length, max_predictions_per_seq, 1)
        t = self._one._table
        self._t = t
        # Entry header for an int feature whose packed payload has n bytes: entry = header[n] + payload.
        self._int_header = {name: self._int_headers(name) for name in INT_FEATURES}
        self._zeros = [b"\x00" * k for k in range(max_seq_length + 1)]
        self._ones = [b"\x01" * k for k in range(max_seq_length + 1)]
        w = self._one._entry
        self._weights = [w("masked_lm_weights", _field(0x12, _field(0x0A, _FLOAT_ONE * k + _FLOAT_ZERO * (self.P - k))))
                         for k in range(self.P + 1)]
        self._labels = [self._one._int_entry("next_sentence_labels", t[v]) for v in (0, 1)]

    def _int_headers(self, name: str) -> list:
        size = 3 * max(self.L, self.P) + 1
        return [self._one._int_entry(name, b"\x00" * n)[:-n] if n else b"" for n in range(size)]

    @staticmethod
    def _varint_rows(values: "np.ndarray") -> tuple[bytes, list]:
        """Row-major varint bytes of a 2-D array of ids below 2**21, and each row's byte offsets."""
        import numpy as np

        v = values.astype(np.int32, copy=False).ravel()
        if v.size and (v.min() < 0 or v.max() >= 1 << 21):
            raise ValueError("ids must be within [0, 2**21) for the batch encoder")
        two, three = v >= 1 << 7, v >= 1 << 14
        size = 1 + two.astype(np.int32) + three
        ends = np.cumsum(size)
        starts = ends - size
        out = np.empty(int(ends[-1]) if v.size else 0, dtype=np.uint8)
        out[starts] = (v & 0x7F) | (two << 7)
        out[starts[two] + 1] = ((v[two] >> 7) & 0x7F) | (three[two] << 7)
        out[starts[three] + 2] = v[three] >> 14
        row_ends = ends.reshape(values.shape)[:, -1] if values.shape[1] else np.zeros(len(values), np.int64)
        return out.tobytes(), [0, *row_ends.tolist()]

    def encode(self, input_ids, lengths, num_a, masked_lm_positions, masked_lm_ids, num_masked,
               labels) -> list[bytes]:
        """Records for padded arrays: input_ids [N, L]; masked_lm_* [N, P] (zero-padded); the rest [N].

        Segment ids are 0 for the first num_a + 2 positions, 1 up to `lengths`, then padding.
        """
        ids_bytes, ids_off = self._varint_rows(input_ids)
        pos_bytes, pos_off = self._varint_rows(masked_lm_positions)
        mid_bytes, mid_off = self._varint_rows(masked_lm_ids)
        h_ids, h_mask, h_seg = (self._int_header[k] for k in ("input_ids", "input_mask", "segment_ids"))
        h_pos, h_mid = self._int_header["masked_lm_positions"], self._int_header["masked_lm_ids"]
        zeros, ones, weights, label_entries = self._zeros, self._ones, self._weights, self._labels
        t, L = self._t, self.L
        mask_entries = [h_mask[L] + ones[n] + zeros[L - n] for n in range(L + 1)]
        seg_header = h_seg[L]
        out = []
        for i, (n, a, k, label) in enumerate(zip(lengths.tolist(), num_a.tolist(), num_masked.tolist(),
                                                  labels.tolist())):
            i0, i1, p0, p1, m0, m1 = ids_off[i], ids_off[i + 1], pos_off[i], pos_off[i + 1], mid_off[i], mid_off[i + 1]
            features = b"".join((
                h_ids[i1 - i0], ids_bytes[i0:i1], mask_entries[n],
                seg_header, zeros[a + 2], ones[n - a - 2], zeros[L - n],
                h_pos[p1 - p0], pos_bytes[p0:p1], h_mid[m1 - m0], mid_bytes[m0:m1],
                weights[k], label_entries[label]))
            out.append(b"\x0a" + t[len(features)] + features)
        return out


def _masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """TFRecord framing of one record."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked_crc(length)) + data + struct.pack("<I", _masked_crc(data))


def compressed_stream(raw):
    """A gzip writer over `raw` whose bytes depend on the data only (no file name, no time stamp)."""
    return gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0)


class RecordWriter:
    """Writes a TFRecord file to `<path>.tmp-<pid>`, renamed to `path` only by `close()`.

    Use as a context manager: an exception (or a kill) leaves no file named `path`.
    """

    def __init__(self, path: str, compress: bool = False):
        self.path = path
        self.count = 0
        self._tmp = f"{path}.tmp-{os.getpid()}"
        try:
            raw = open(self._tmp, "wb")
        except OSError as e:
            raise OSError(f"cannot write output file {path}: {e.strerror}") from None
        self._file = compressed_stream(raw) if compress else raw
        self._raw = raw

    def write(self, record: bytes) -> None:
        self._file.write(frame_record(record))
        self.count += 1

    def close(self) -> None:
        if self._file is not self._raw:
            self._file.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        for f in (self._file, self._raw):
            try:
                f.close()
            except OSError:
                pass
        if os.path.exists(self._tmp):
            os.remove(self._tmp)

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_records(path: str) -> Iterator[bytes]:
    """Raw records of a TFRecord file (gzip detected by its magic bytes), CRCs checked."""
    with open(path, "rb") as probe:
        is_gzip = probe.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if is_gzip else open(path, "rb")) as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise RecordFileError(f"{path}: truncated record header")
            (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
            if _masked_crc(header[:8]) != length_crc:
                raise RecordFileError(f"{path}: corrupt record length")
            data, footer = f.read(length), f.read(4)
            if len(data) < length or len(footer) < 4:
                raise RecordFileError(f"{path}: truncated record")
            if _masked_crc(data) != struct.unpack("<I", footer)[0]:
                raise RecordFileError(f"{path}: corrupt record data")
            yield data


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message; value is int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        else:
            raise RecordFileError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _decode_list(kind: int, buf: bytes) -> list:
    values: list = []
    for _, wire, value in _fields(buf):
        if kind == 3:  # Int64List, packed or not
            if wire == 2:
                pos = 0
                while pos < len(value):
                    v, pos = _read_varint(value, pos)
                    values.append(v - (1 << 64) if v >= 1 << 63 else v)
            else:
                values.append(value - (1 << 64) if value >= 1 << 63 else value)
        elif kind == 2:  # FloatList
            values.extend(struct.unpack(f"<{len(value) // 4}f", value))
        else:
            values.append(bytes(value))
    return values


def decode_example(record: bytes) -> dict[str, list]:
    """A serialized `tf.train.Example` as {feature name: list of values}, without TensorFlow."""
    out: dict[str, list] = {}
    for _, _, features in _fields(record):
        for _, _, entry in _fields(features):
            name, feature = "", b""
            for number, _, value in _fields(entry):
                if number == 1:
                    name = bytes(value).decode("utf-8")
                else:
                    feature = value
            out[name] = []
            for kind, _, lst in _fields(feature):
                out[name] = _decode_list(kind, lst)
    return out


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """`tf.io.parse_example` spec of the 7 features (int64 / float32, fixed length)."""
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    seq, pred = [max_seq_length], [max_predictions_per_seq]
    return {
        "input_ids": tf.io.FixedLenFeature(seq, tf.int64),
        "input_mask": tf.io.FixedLenFeature(seq, tf.int64),
        "segment_ids": tf.io.FixedLenFeature(seq, tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature(pred, tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature(pred, tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature(pred, tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def parse_examples(serialized, max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """Parses a batch (1-D string tensor) of records into a dict of dense tensors; usable in `tf.data.map`."""
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    return tf.io.parse_example(serialized, feature_spec(max_seq_length, max_predictions_per_seq))


def write_json_atomic(path: str, obj) -> None:
    """Writes JSON to a temp name and renames it, so a reader never sees a partial file."""
    import json

    from bert_tf.data.atomic_io import atomic_write

    try:
        with atomic_write(path) as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.write("\n")
    except OSError as e:
        raise OSError(f"cannot write {path}: {e.strerror}") from None


def file_sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
