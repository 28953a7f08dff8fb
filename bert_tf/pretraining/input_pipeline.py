"""tf.data input pipelines for pre-training records (the original's 7 features).

Same shape as the original run_pretraining input_fn, with what multi-worker training needs:
  training: files -> shard by input pipeline -> repeat -> shuffle files -> parallel interleave
            -> shuffle(100) -> batch (drop_remainder) -> parse [-> dynamic masking] -> prefetch
  eval:     files in order -> repeat -> batch (drop_remainder) -> parse [-> dynamic masking] -> prefetch
Features come out as int32 (masked_lm_weights float32), as the original casts them for TPUs.

Records are validated in-graph: a record whose feature lengths differ from `max_seq_length` /
`max_predictions_per_seq`, or whose ids are out of range (of the vocab, the segment types, the
sequence, 0/1 for masks and labels), stops the pipeline with an error naming its file and record;
`check_record_files` checks the first record of every file before training starts. Code consuming
the pipeline runs inside `reading(files)`, which turns those errors and TensorFlow's data-loss
errors (a corrupt or cut file) into one line naming the file. Files may be gzip-compressed
(detected by their magic bytes, as data_prep's `--gzip` writes them).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

import bert_tf._env  # noqa: F401
from bert_tf.errors import BertTfError
import tensorflow as tf

from bert_tf.data import tfrecord
from bert_tf.data.files import expand_globs
from bert_tf.pretraining import records as pretraining_records
from bert_tf.training import input_errors

if TYPE_CHECKING:
    from bert_tf.pretraining.dynamic_masking import DynamicMasking

SHUFFLE_BUFFER = 100  # the original's record-level shuffle buffer
_INT_FEATURES = pretraining_records.INT_FEATURES
_COUNTING_CHUNK = 256  # records per counting step of _records_of
_FRAMING_BYTES = 16  # a TFRecord's length (8), its CRC (4) and the data's CRC (4)


class InputError(BertTfError, ValueError):
    """Input files that cannot feed the model: none found, unreadable, or of the wrong shape."""


def expand_input_files(spec: str | Sequence[str]) -> list[str]:
    """Files of a comma-separated list of globs (the original's --input_file) on any filesystem
    TensorFlow reads (gs://, ...), by the rules of `bert_tf.data.files.expand_globs`."""
    return expand_globs(spec, "--input_file", match=tf.io.gfile.glob)


def _open_binary(path: str):
    return tf.io.gfile.GFile(path, "rb")


def compression_of(path: str) -> str:
    """"GZIP" for a gzip-compressed file, else "" (TFRecordDataset's compression_type)."""
    try:
        return tfrecord.compression_type(path, _open_binary)
    except (tf.errors.OpError, OSError) as e:
        raise InputError(f"{path}: cannot read: {getattr(e, 'message', e)}") from None


def check_record_files(files: Sequence[str], max_seq_length: int, max_predictions_per_seq: int, *,
                       require_masks: bool = False) -> None:
    """Checks that the first record of each file has the configured feature lengths (and, with
    `require_masks`, masked positions: records written with --masking=none have none)."""
    for path in files:
        record = _first_record(path)
        if record is None:
            raise InputError(f"{path}: holds no record")
        try:
            example = tfrecord.decode_example(record)
        except tfrecord.RecordFileError as e:
            raise InputError(f"{path}: record 0 is not a pre-training example ({e})") from None
        mismatch = pretraining_records.schema_mismatch(example, max_seq_length, max_predictions_per_seq)
        if mismatch:
            raise InputError(f"{path}: record 0 {mismatch}")
        if require_masks and not any(example["masked_lm_weights"]):
            raise InputError(f"{path}: record 0 has no masked positions (written with --masking=none): pass "
                             "--dynamic_masking to draw masks while training")


def _first_record(path: str) -> bytes | None:
    try:
        dataset = tf.data.TFRecordDataset(path, compression_type=compression_of(path)).take(1)
        for record in dataset:
            return record.numpy()
    except tf.errors.OpError as e:
        raise InputError(f"{path}: not a readable TFRecord file: {e.message.splitlines()[0]}") from None
    return None


def pretraining_dataset(files: Sequence[str], *, batch_size: int, max_seq_length: int,
                        max_predictions_per_seq: int, is_training: bool,
                        input_context: tf.distribute.InputContext | None = None,
                        num_cpu_threads: int = 4, seed: int | None = None,
                        deterministic: bool | None = None, vocab_size: int | None = None,
                        type_vocab_size: int | None = None, masking: "DynamicMasking | None" = None
                        ) -> tf.data.Dataset:
    """Batches of parsed pre-training features, `batch_size` per input pipeline.

    `input_context` (from `strategy.distribute_datasets_from_function`) shards the files by
    input pipeline, as the original's per-host input_fn; with fewer files than pipelines the
    records are sharded instead. `deterministic=True` fixes the interleave order (for resumable,
    reproducible runs; default: tf.data's setting). `vocab_size` / `type_vocab_size` (the model's):
    ids at or above them stop the pipeline (an embedding lookup would not: it gives zeros on GPUs).
    `masking` (run_pretraining --dynamic_masking): new masks for every batch, keyed by its position in
    this input pipeline (bert_tf.pretraining.dynamic_masking).
    """
    files = list(files)
    if not files:
        raise InputError("no input files")
    pipelines, index = ((input_context.num_input_pipelines, input_context.input_pipeline_id)
                        if input_context else (1, 0))
    compressions = [compression_of(f) for f in files]
    sizes = [-1 if c else tf.io.gfile.stat(f).length for f, c in zip(files, compressions)]
    named = tf.data.Dataset.from_tensor_slices((files, compressions, tf.constant(sizes, tf.int64)))
    shard_records = pipelines > 1 and len(files) < pipelines
    if pipelines > 1 and not shard_records:
        named = named.shard(pipelines, index)
    if is_training:
        named = named.repeat().shuffle(len(files), seed=seed)
        records = named.interleave(
            _records_of, cycle_length=max(1, min(num_cpu_threads, len(files))),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
        if shard_records:
            records = records.shard(pipelines, index)
        records = records.shuffle(SHUFFLE_BUFFER, seed=seed)
    else:
        records = named.flat_map(_records_of)
        if shard_records:
            records = records.shard(pipelines, index)
        records = records.repeat()  # eval runs a fixed number of steps, as the original
    parse = _batch_parser(max_seq_length, max_predictions_per_seq,
                          _id_limits(max_seq_length, vocab_size, type_vocab_size))
    batches = records.batch(batch_size, drop_remainder=True).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if masking is not None:
        batches = masking.apply(batches, index)
    return batches.prefetch(tf.data.AUTOTUNE)


def _records_of(path, compression, size):
    """(file name, record index, record) of one file; name and index travel along for error messages.
    The framed bytes read are counted and checked against the file's `size` at its end
    (`input_errors.check_file_end`: a cut inside a record header is otherwise silent). The counting
    runs on chunks of records, not on each one, so that it costs the pipeline little."""
    chunks = (tf.data.TFRecordDataset(path, compression_type=compression).batch(_COUNTING_CHUNK)
              .map(lambda records: (records, False)))
    end = tf.data.Dataset.from_tensors((tf.zeros([0], tf.string), True))

    def count(state, chunk):
        total, seen = state
        records, last = chunk
        n = tf.size(records, out_type=tf.int64)
        total += tf.reduce_sum(tf.cast(tf.strings.length(records), tf.int64)) + _FRAMING_BYTES * n
        ok = tf.cond(last, lambda: input_errors.check_file_end(path, total, size), lambda: tf.constant(True))
        return (total, seen + n), (tf.fill([n], path), seen + tf.range(n), records, ok, last)

    return (chunks.concatenate(end).scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), count)
            .filter(lambda _, __, ___, ok, last: tf.logical_and(ok, tf.logical_not(last)))
            .map(lambda paths, indices, records, _, __: (paths, indices, records))
            .unbatch())


def _id_limits(max_seq_length: int, vocab_size: int | None,
               type_vocab_size: int | None) -> dict[str, tuple[int, str]]:
    """{feature: (exclusive upper bound of its values, what sets it)}; a None size is not checked."""
    limits = {"input_mask": (2, "a mask"), "next_sentence_labels": (2, "the original's record format"),
              "masked_lm_positions": (max_seq_length, "--max_seq_length")}
    if vocab_size is not None:
        limits.update(input_ids=(vocab_size, "vocab_size of the model"),
                      masked_lm_ids=(vocab_size, "vocab_size of the model"))
    if type_vocab_size is not None:
        limits["segment_ids"] = (type_vocab_size, "type_vocab_size of the model")
    return limits


def _batch_parser(max_seq_length: int, max_predictions_per_seq: int, id_limits: dict[str, tuple[int, str]]):
    """Parses a batch of (file, record index, record) into the features, checking in-graph that every
    record has the configured lengths and its ids are in range (a failure names the file and record)."""
    expected = pretraining_records.expected_lengths(max_seq_length, max_predictions_per_seq)
    ragged_spec = {name: tf.io.RaggedFeature(spec.dtype) for name, spec in
                   pretraining_records.feature_spec(max_seq_length, max_predictions_per_seq).items()}

    def parse(files, indices, serialized):
        ragged = tf.io.parse_example(serialized, ragged_spec)
        lengths = _length_check({name: ragged[name].row_lengths() for name in expected}, expected)
        # to_tensor pads or cuts a row of another length: the lengths' problem is reported first.
        dense = {name: ragged[name].to_tensor(shape=[None, length]) for name, (length, _) in expected.items()}
        checks = [lengths, _range_check(dense, id_limits)]
        with tf.control_dependencies([input_errors.check_rows(checks, files, indices)]):
            return {name: tf.cast(value, tf.int32) if name in _INT_FEATURES else tf.identity(value)
                    for name, value in dense.items()}

    return parse


# The checks compare all features at once (a few ops per batch, not a few per feature); which
# feature failed is worked out only for the message.

def _length_check(lengths: dict[str, tf.Tensor], expected: dict[str, tuple[int, str]]):
    """(bad rows, problem) of `input_errors.check_rows`: rows with a feature of another length."""
    names = list(expected)
    found = tf.stack([lengths[name] for name in names])  # [feature, batch]
    wrong = tf.not_equal(found, tf.constant([[expected[n][0]] for n in names], found.dtype))

    def problem(row):
        feature = tf.argmax(tf.cast(wrong[:, row], tf.int32), output_type=tf.int32)
        return tf.strings.join(["has ", tf.gather(names, feature), " of length ",
                                tf.strings.as_string(found[feature, row]), ", expected ",
                                tf.gather([f"{length} ({source})" for length, source in expected.values()], feature)])

    return tf.reduce_any(wrong, axis=0), problem


def _range_check(dense: dict[str, tf.Tensor], limits: dict[str, tuple[int, str]]):
    """(bad rows, problem) of `input_errors.check_rows`: rows with a value outside [0, limit) in a
    feature of `limits`."""
    names = list(limits)
    values = tf.concat([dense[name] for name in names], axis=1)  # [batch, all the features' columns]
    widths = [dense[name].shape[1] for name in names]
    upper = tf.constant([limits[name][0] for name, width in zip(names, widths) for _ in range(width)], tf.int64)
    outside = tf.logical_or(values < 0, values >= upper)

    def problem(row):
        column = tf.argmax(tf.cast(outside[row], tf.int32), output_type=tf.int32)
        feature = tf.searchsorted(tf.math.cumsum(widths), column[None], side="right")[0]
        ranges = [f"[0, {limit}) ({source})" for limit, source in limits.values()]
        return tf.strings.join(["has ", tf.gather(names, feature), " value ",
                                tf.strings.as_string(values[row, column]), " outside ", tf.gather(ranges, feature)])

    return tf.reduce_any(outside, axis=1), problem


def reading(files: Sequence[str]):
    """Put around the code consuming `pretraining_dataset(files, ...)` (training, evaluation): a
    damaged file or a record that fails the pipeline's checks ends as one `InputFileError` naming it."""
    return input_errors.reading(files)


def check_batch_size(global_batch_size: int, num_replicas: int, flag: str = "--train_batch_size") -> int:
    """Per-replica batch size; the global batch must split evenly over the replicas."""
    if global_batch_size <= 0 or global_batch_size % num_replicas:
        raise InputError(f"{flag}={global_batch_size} must be a positive multiple of the "
                         f"{num_replicas} replicas")
    return global_batch_size // num_replicas


def describe(files: Sequence[str]) -> str:
    """One log line about the input files."""
    size = sum(tf.io.gfile.stat(f).length for f in files)
    return f"{len(files)} input file(s), {size / 2**20:.1f} MiB, first {os.path.basename(files[0])}"
