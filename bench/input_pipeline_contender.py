"""One contender of the input-pipeline speed study (studies/tables/speed_input_pipeline.py), in its own process:
records per second of the pre-training input pipeline with its safety checks ("ours") or without ("plain").

Issue #17 made the pipeline check what TensorFlow's reader does not: each file's framed bytes against its size (a
file cut inside a record header otherwise ends silently), ids against the model's vocab, and the records' lengths.
plain = `tf.data.TFRecordDataset` interleaved over the files, shuffled, batched and parsed with the records' feature
spec (`bert_tf.pretraining.records.parse_examples`); ours = `bert_tf.pretraining.input_pipeline.pretraining_dataset`
as run_pretraining reads (the same interleave, shuffle buffer, batch and parse, plus the checks). The files:
--copies copies of --records in OUT. Writes OUT/result.json.

    python -m bench.input_pipeline_contender --contender=ours --records=FILE.tfrecord --copies=8 --out=DIR
"""
from __future__ import annotations

import argparse
import os
import shutil
import time

from bench.result import report

CONTENDERS = ("plain", "ours")
BATCH, SEQ, PREDICTIONS = 32, 128, 20


def copies(source: str, count: int, folder: str) -> list[str]:
    """`count` copies of `source` in `folder` (distinct files, as a sharded corpus gives the interleave)."""
    os.makedirs(folder, exist_ok=True)
    files = [os.path.join(folder, f"copy-{i}.tfrecord") for i in range(count)]
    for path in files:
        shutil.copyfile(source, path)
    return files


def dataset(contender: str, files: list[str]):
    """The contender's endless batches over `files`."""
    from bert_tf._env import tf
    from bert_tf.pretraining import input_pipeline, records

    if contender == "ours":
        return input_pipeline.pretraining_dataset(files, batch_size=BATCH, max_seq_length=SEQ,
                                                  max_predictions_per_seq=PREDICTIONS, is_training=True,
                                                  num_cpu_threads=4, seed=1, vocab_size=30522, type_vocab_size=2)
    names = tf.data.Dataset.from_tensor_slices(files).repeat().shuffle(len(files), seed=1)
    return (names.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                             num_parallel_calls=tf.data.AUTOTUNE)
            .shuffle(input_pipeline.SHUFFLE_BUFFER, seed=1).batch(BATCH, drop_remainder=True)
            .map(lambda s: records.parse_examples(s, SEQ, PREDICTIONS), num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE))


def measure(contender: str, files: list[str], batches: int, warmup: int) -> dict:
    """Records/s over `batches` batches after `warmup` untimed ones (tracing, the shuffle buffer's fill)."""
    found = iter(dataset(contender, files))
    for _ in range(warmup):
        next(found)
    start = time.perf_counter()
    for _ in range(batches):
        next(found)
    return {"contender": contender, "records_per_s": batches * BATCH / (time.perf_counter() - start),
            "batches": batches, "warmup": warmup, "files": len(files)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contender", required=True, choices=CONTENDERS)
    p.add_argument("--records", required=True, help="a pre-training records file (seq 128, 20 predictions)")
    p.add_argument("--copies", type=int, default=8)
    p.add_argument("--batches", type=int, default=600)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    files = copies(args.records, args.copies, os.path.join(args.out, "files"))
    result = measure(args.contender, files, args.batches, args.warmup)
    shutil.rmtree(os.path.join(args.out, "files"))
    return report(args.out, result)


if __name__ == "__main__":
    main()
