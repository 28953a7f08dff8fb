"""The pretraining record schema: `tf.train.Example` with the original BERT's 7 features.

Write side (no TensorFlow needed, so data preparation stays light and forks cheaply):
`ExampleEncoder.encode(...)` and `BatchExampleEncoder.encode(...)` build the serialized
`tf.train.Example` bytes of the schema directly, with tables that make them fast; the generic
`bert_tf.data.tfrecord` frames, writes, reads and decodes the files.

Read side: `schema_mismatch(example, ...)` says why a decoded record does not fit the configured
lengths; `feature_spec(...)` / `parse_examples(...)` give the `tf.io` feature spec for `tf.data`.

The 7 features (every list padded with 0 to a fixed length):
  input_ids, input_mask, segment_ids      int64 x max_seq_length
  masked_lm_positions, masked_lm_ids      int64 x max_predictions_per_seq
  masked_lm_weights                       float x max_predictions_per_seq (1.0 real, 0.0 padding)
  next_sentence_labels                    int64 x 1 (1 = B is a random next segment)
"""
from __future__ import annotations

import struct
from typing import Sequence

from bert_tf.data.atomic_io import write_json_atomic  # noqa: F401 (data_prep/create_pretraining_data.py)
from bert_tf.data.files import file_sha256  # noqa: F401 (data_prep/create_pretraining_data.py)
from bert_tf.data.tfrecord import length_delimited, varint

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")
INT_FEATURES = frozenset(FEATURE_NAMES) - {"masked_lm_weights"}
SEQUENCE_FEATURES = FEATURE_NAMES[:3]  # max_seq_length long
PREDICTION_FEATURES = FEATURE_NAMES[3:6]  # max_predictions_per_seq long

_FLOAT_ONE = struct.pack("<f", 1.0)
_FLOAT_ZERO = struct.pack("<f", 0.0)


class ExampleEncoder:
    """Serializes instances to `tf.train.Example` bytes, value-identical to protobuf's own encoder.

    A table of varint encodings for every id below `max_id` makes an int list one `bytes.join`.
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int, max_id: int = 1 << 16):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        # Also covers every length prefix: a record is far below 64 KiB.
        self._table = [varint(i) for i in range(max(max_id, 1 << 16) + 1)]
        # Map entries are written in the original's insertion order; readers don't care.
        self._keys = {name: length_delimited(0x0A, name.encode()) for name in FEATURE_NAMES}

    def _varints(self, values: Sequence[int]) -> bytes:
        table = self._table
        try:
            return b"".join([table[v] for v in values])
        except IndexError:
            return b"".join([varint(v) for v in values])

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
            self._entry("masked_lm_weights", length_delimited(0x12, length_delimited(0x0A, weights) if weights else b"")),
            self._int_entry("next_sentence_labels", self._table[next_sentence_label]),
        ))
        return length_delimited(0x0A, features)


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
        self._weights = [w("masked_lm_weights", length_delimited(0x12, length_delimited(0x0A, _FLOAT_ONE * k + _FLOAT_ZERO * (self.P - k))))
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


def expected_lengths(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, tuple[int, str]]:
    """{feature: (length, what sets it)} of the schema at these lengths."""
    expected = {name: (max_seq_length, "--max_seq_length") for name in SEQUENCE_FEATURES}
    expected.update({name: (max_predictions_per_seq, "--max_predictions_per_seq") for name in PREDICTION_FEATURES})
    expected["next_sentence_labels"] = (1, "the original's record format")
    return expected


def schema_mismatch(example: dict[str, list], max_seq_length: int, max_predictions_per_seq: int) -> str | None:
    """Why a decoded example does not fit the schema at these lengths ("has no feature ...", "has
    input_ids of length 256, expected 128 (--max_seq_length)"), or None when it fits."""
    for name, (length, source) in expected_lengths(max_seq_length, max_predictions_per_seq).items():
        if name not in example:
            return f"has no feature {name!r}"
        if len(example[name]) != length:
            return f"has {name} of length {len(example[name])}, expected {length} ({source})"
    return None


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """`tf.io.parse_example` spec of the 7 features (int64 / float32, fixed length)."""
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    return {name: tf.io.FixedLenFeature([length], tf.int64 if name in INT_FEATURES else tf.float32)
            for name, (length, _) in expected_lengths(max_seq_length, max_predictions_per_seq).items()}


def parse_examples(serialized, max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """Parses a batch (1-D string tensor) of records into a dict of dense tensors; usable in `tf.data.map`."""
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    return tf.io.parse_example(serialized, feature_spec(max_seq_length, max_predictions_per_seq))


