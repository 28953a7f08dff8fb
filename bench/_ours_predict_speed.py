"""Our prediction throughput on a classifier task's dev set, through the program's own pieces.

Parses the classifier program's flags (ClassifierOptions), builds the task's model as the program does, initialises
it from --init_checkpoint, and times `bert_tf.training.evaluation.predict` (the call our program makes for
--do_eval/--do_predict) over the cached dev features. Each predict call traces its own tf.function, so the steady
rate is taken from the difference of a call over `--passes` passes of the dev set and a one-batch call:
(passes * rows - batch) / (t_all - t_one), which cancels tracing and input-pipeline setup; the long call alone
(tracing included) is reported too.

    python -m bench._ours_predict_speed --batch_sizes=8,32 --repeats=3 -- --task_name=MRPC --data_dir=... ...
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf import checkpoints
from bert_tf.options import parse
from bert_tf.tasks import classifier, feature_cache, finetune
from bert_tf.training import evaluation, run_setup


def timed_predict(model, path: str, spec, count: int, batch_size: int) -> float:
    """Seconds of one evaluation.predict call over the first `count` rows of the file read over and over."""
    strategy = tf.distribute.get_strategy()
    start = time.perf_counter()
    evaluation.predict(strategy, model, lambda: feature_cache.dataset(path, spec).repeat().take(count), count,
                       batch_size, ("logits",), ("label_ids",))
    return time.perf_counter() - start


def measure(program_argv: list[str], batch_sizes: list[int], repeats: int, passes: int) -> dict:
    """Per batch size: the median over `repeats` of the steady examples/s over `passes` passes of the dev set
    (less the fastest of two one-batch calls, tracing included in both), and of the single-call examples/s."""
    options = finetune.resolve(parse(classifier.ClassifierOptions, program_argv, program="run_classifier"))
    task = classifier.make_task(options)
    strategy, config = run_setup.start(options, options.max_seq_length)
    run_setup.configure(options, strategy)
    model = task.build_model(config)
    checkpoints.load_init_checkpoint(model, options.init_checkpoint, allow_missing=task.init_allow_missing)
    path, rows = feature_cache.cached_features(task, "eval", lambda: task.examples("eval"), options.output_dir,
                                               options.vocab_file, options.do_lower_case, options.max_seq_length)
    result = {"rows": rows, "passes": passes, "threads": tf.config.threading.get_intra_op_parallelism_threads(), "predict": {}}
    for batch_size in batch_sizes:
        steady, single = [], []
        for _ in range(repeats):
            one = min(timed_predict(model, path, task.feature_spec, batch_size, batch_size) for _ in range(2))
            everything = timed_predict(model, path, task.feature_spec, rows * passes, batch_size)
            steady.append((rows * passes - batch_size) / (everything - one))
            single.append(rows * passes / everything)
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
