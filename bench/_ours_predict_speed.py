"""Our prediction throughput on a classifier task's dev set, through the program's own prediction call.

Parses the classifier program's flags (ClassifierOptions), builds the task's model as the program does, initialises
it from --init_checkpoint, and times `bert_tf.tasks.finetune.predict_features` (the one call our program makes for
--do_eval/--do_predict; with --dynamic_padding, the default, length-sorted and trimmed batches, with
--nodynamic_padding the original's fixed-length ones) over the cached dev features. Each call traces its own
tf.function, so the steady rate is taken from the difference of a call over a file holding the dev features
`--passes` times (the cached file's records repeated) and a call over a file of its first `batch` records:
(passes * rows - batch) / (t_all - t_one), which cancels tracing and input-pipeline setup; the long call alone
(tracing included) is reported too.

    python -m bench._ours_predict_speed --batch_sizes=8,32 --repeats=3 -- --task_name=MRPC --data_dir=... ...
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf import checkpoints
from bert_tf.data.tfrecord import TFRecordWriter, read_records
from bert_tf.options import parse
from bert_tf.tasks import classifier, feature_cache, finetune
from bert_tf.training import run_setup


def repeated_file(path: str, out: str, passes: int, limit: int | None = None) -> int:
    """Writes OUT: the records of PATH `passes` times over (only its first `limit` when given); their count."""
    records = list(read_records(path))[:limit]
    with TFRecordWriter(out) as writer:
        for _ in range(passes):
            for record in records:
                writer.write(record)
    return writer.count


def timed_predict(options, task, strategy, model, path: str, count: int, batch_size: int) -> float:
    """Seconds of one finetune.predict_features call over the `count` rows of the file."""
    start = time.perf_counter()
    finetune.predict_features(options, task, strategy, model, path, count, batch_size)
    return time.perf_counter() - start


def measure(program_argv: list[str], batch_sizes: list[int], repeats: int, passes: int) -> dict:
    """Per batch size: the median over `repeats` of the steady examples/s over `passes` passes of the dev set
    (less the fastest of two one-batch calls, tracing included in both), and of the single-call examples/s."""
    options = finetune.resolve(parse(classifier.ClassifierOptions, program_argv, program="run_classifier"))
    task = classifier.make_task(options)
    strategy, config = run_setup.start(options, options.max_seq_length)
    run_setup.configure(options, strategy, config)
    model = task.build_model(config)
    checkpoints.load_init_checkpoint(model, options.init_checkpoint, allow_missing=task.init_allow_missing)
    path, rows = feature_cache.cached_features(task, "eval", lambda: task.examples("eval"), options.output_dir,
                                               options.vocab_file, options.do_lower_case, options.max_seq_length)
    everything_path = os.path.join(options.output_dir, f"dev-x{passes}.tfrecord")
    count = repeated_file(path, everything_path, passes)
    result = {"rows": rows, "passes": passes, "dynamic_padding": bool(finetune.dynamic_padding(options, task)),
              "threads": tf.config.threading.get_intra_op_parallelism_threads(), "predict": {}}
    for batch_size in batch_sizes:
        one_path = os.path.join(options.output_dir, f"dev-first{batch_size}.tfrecord")
        repeated_file(path, one_path, 1, batch_size)
        steady, single = [], []
        for _ in range(repeats):
            one = min(timed_predict(options, task, strategy, model, one_path, batch_size, batch_size)
                      for _ in range(2))
            everything = timed_predict(options, task, strategy, model, everything_path, count, batch_size)
            steady.append((count - batch_size) / (everything - one))
            single.append(count / everything)
        result["predict"][str(batch_size)] = {"examples_per_s": statistics.median(steady),
                                              "single_call_examples_per_s": statistics.median(single),
                                              "steady_all": steady}
    return result


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch_sizes", default="8,32")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--passes", type=int, default=3, help="passes over the dev set per timed call")
    args = p.parse_args(argv[:split])
    result = measure(argv[split + 1:], [int(b) for b in args.batch_sizes.split(",") if b], args.repeats,
                     args.passes)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
