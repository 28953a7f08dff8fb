"""The one fine-tuning program: any Task, trained, evaluated and used for prediction the same way.

    run(options, task)

does, with the original run_classifier/run_squad recipe: the strategy, seeds and precision
(bert_tf.training.run_setup); the split's features made once and cached as TFRecords keyed by
their inputs (bert_tf.tasks.feature_cache); init from --init_checkpoint (original TF1, Hugging
Face folder or ours; the task's new head may be missing from it); --num_train_epochs turned into
steps over the training rows and --warmup_proportion of them warming up; training on the one
Trainer (repeat, shuffle(100), full batches, as the original); then prediction of every eval or
predict row exactly once, the task's post-processing to metrics and files, eval_results.txt and
TensorBoard through bert_tf.training.results, and the original-format export.

A program is a Task, an options class that adds its own flags to FinetuningOptions, and a thin
main: `cli.run_program(lambda options: run(options, make_task(options)), TheOptions)`.
"""
from __future__ import annotations

import dataclasses

import bert_tf._env  # noqa: F401
import tensorflow as tf
from absl import logging

from bert_tf.options import OptionError, option
from bert_tf.tasks import feature_cache
from bert_tf.tasks.base import Task
from bert_tf.training import evaluation, results as eval_results, run_setup
from bert_tf.training import trainer as training
from bert_tf.training.options import TrainingOptions

SHUFFLE_BUFFER = 100  # the original's d.shuffle(buffer_size=100)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuningOptions(TrainingOptions):
    """The options of every fine-tuning program (names and defaults of the original run_classifier)."""

    vocab_file: str | None = option(None, "The vocabulary file that the BERT model was trained on.",
                                    required=True, path=True)
    do_lower_case: bool = option(True, "Lower-case the input: True for uncased models, False for cased models.")
    max_seq_length: int = option(128, "The maximum total input sequence length after WordPiece tokenization; "
                                 "longer sequences are truncated, shorter ones padded.", positive=True)
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the dev set.")
    do_predict: bool = option(False, "Whether to run the model in inference mode on the test set.")
    predict_batch_size: int = option(8, "Total batch size for predict.", positive=True)
    num_train_epochs: float = option(3.0, "Total number of training epochs to perform.", positive=True)
    warmup_proportion: float = option(0.1, "Proportion of training to perform linear learning rate warmup "
                                      "for. E.g., 0.1 = 10% of training.", non_negative=True)

    def validate(self) -> None:
        if not (self.do_train or self.do_eval or self.do_predict):
            raise OptionError("at least one of --do_train, --do_eval or --do_predict must be True")
        if self.warmup_proportion > 1:
            raise OptionError(f"--warmup_proportion must be at most 1, got {self.warmup_proportion}")
        super().validate()


def run(options: FinetuningOptions, task: Task) -> dict[str, float]:
    """Trains, evaluates and predicts as the options say; returns the eval metrics (if any)."""
    options.validate()
    strategy, config = run_setup.start(options, options.max_seq_length)
    run_setup.configure(options, strategy)
    with strategy.scope():
        model = task.build_model(config)
    metrics: dict[str, float] = {}
    if options.do_train:
        _train(options, task, strategy, model, config)
    if options.do_eval or options.do_predict:
        step = eval_results.restore_for_eval(model, options.output_dir, options.init_checkpoint,
                                             allow_missing=task.init_allow_missing)
    if options.do_eval:
        metrics = _predict_split(options, task, strategy, model, step, "eval", options.eval_batch_size)
    if options.do_predict:
        _predict_split(options, task, strategy, model, step, "predict", options.predict_batch_size)
    return metrics


def _features(options: FinetuningOptions, task: Task, split: str, get_examples) -> tuple[str, int]:
    return feature_cache.cached_features(task, split, get_examples, options.output_dir, options.vocab_file,
                                         options.do_lower_case, options.max_seq_length)


def train_steps(num_rows: int, options: FinetuningOptions) -> tuple[int, int]:
    """(num_train_steps, num_warmup_steps) as the original: int(rows / batch * epochs), int(steps * proportion)."""
    steps = int(num_rows / options.train_batch_size * options.num_train_epochs)
    if steps <= 0:
        raise OptionError(f"{num_rows} training rows at --train_batch_size={options.train_batch_size} for "
                          f"--num_train_epochs={options.num_train_epochs} make no training step")
    return steps, int(steps * options.warmup_proportion)


def _train(options: FinetuningOptions, task: Task, strategy, model, config) -> None:
    path, count = _features(options, task, "train", lambda: task.examples("train"))
    num_train_steps, num_warmup_steps = train_steps(count, options)
    logging.info("Training on %d rows: %d steps of %d (%g epochs), %d warmup steps", count, num_train_steps,
                 options.train_batch_size, options.num_train_epochs, num_warmup_steps)
    with strategy.scope():
        optimizer = run_setup.make_optimizer(options, num_train_steps, num_warmup_steps)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        rows = feature_cache.dataset(path, task.feature_spec)
        rows = rows.shard(context.num_input_pipelines, context.input_pipeline_id)
        rows = rows.repeat().shuffle(SHUFFLE_BUFFER, seed=options.seed)
        return rows.batch(context.get_per_replica_batch_size(options.train_batch_size), drop_remainder=True)

    trainer = training.Trainer(strategy, model, optimizer, task.objective,
                               run_setup.loop_config(options, num_train_steps), dataset_fn)
    run_setup.initialise(trainer, options.init_checkpoint, allow_missing=task.init_allow_missing)
    trainer.train()
    run_setup.export_original(trainer, config, options)


def _predict_split(options: FinetuningOptions, task: Task, strategy, model, step: int, split: str,
                   batch_size: int) -> dict[str, float]:
    examples = list(task.examples(split))  # post-processing needs them, cached features or not
    path, count = _features(options, task, split, lambda: examples)
    predictions = evaluation.predict(strategy, model, lambda: feature_cache.dataset(path, task.feature_spec),
                                     count, batch_size, task.prediction_keys, task.passthrough_keys)
    if not training.is_chief(strategy):
        return {}
    metrics = task.postprocess(split, examples, predictions, options.output_dir)
    if metrics:
        eval_results.report_eval(options.output_dir, metrics, step, name=split,
                                 filename="eval_results.txt" if split == "eval" else f"{split}_results.txt")
    return metrics
