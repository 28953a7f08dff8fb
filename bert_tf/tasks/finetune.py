"""The one fine-tuning program: any Task, trained, evaluated and used for prediction the same way.

    run(options, task)

does, with the original run_classifier/run_squad recipe: the strategy, seeds and precision
(bert_tf.training.run_setup); the split's features made once and cached as TFRecords keyed by
their inputs (bert_tf.tasks.feature_cache); init from --init_checkpoint (original TF1, Hugging
Face folder or ours; the task's new head may be missing from it); --num_train_epochs turned into
steps over the training rows and --warmup_proportion of them warming up; training on the one
Trainer (repeat, shuffle(100), full batches, as the original); then prediction of every eval or
predict row exactly once, the task's post-processing to metrics and files, eval_results.txt and
TensorBoard through bert_tf.training.results, and the original-format export. --output_dir is
locked for the run (bert_tf.data.output_lock): a second run on it is refused, naming the first.

A program is a Task, an options class that adds its own flags to FinetuningOptions, and a thin
main: `cli.run_program(lambda options: run(options, make_task(options)), TheOptions)`.
"""
from __future__ import annotations

import dataclasses

import bert_tf._env  # noqa: F401
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints.model_folder import resolve_model_files
from bert_tf.data import output_lock
from bert_tf.options import OptionError, option
from bert_tf.tasks import batching, feature_cache
from bert_tf.tasks.base import Task
from bert_tf.training import evaluation, results as eval_results, run_setup
from bert_tf.training.best_checkpoint import BestCheckpoint, best_checkpoint, recover_best
from bert_tf.training import trainer as training
from bert_tf.training.options import TrainingOptions

SHUFFLE_BUFFER = 100  # the original's d.shuffle(buffer_size=100)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuningOptions(TrainingOptions):
    """The options of every fine-tuning program (names and defaults of the original run_classifier)."""

    bert_config_file: str | None = option(
        None, "The config json file of the BERT model (default: the --init_checkpoint folder's bert_config.json "
        "or Hugging Face config.json).", path=True)
    vocab_file: str | None = option(None, "The vocabulary file that the BERT model was trained on (default: the "
                                    "--init_checkpoint folder's vocab.txt).", path=True)
    do_lower_case: bool = option(True, "Lower-case the input: True for uncased models, False for cased models.")
    max_seq_length: int = option(128, "The maximum total input sequence length after WordPiece tokenization; "
                                 "longer sequences are truncated, shorter ones padded (at least 3: [CLS], a "
                                 "token and [SEP]).", minimum=3)
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the dev set.")
    do_predict: bool = option(False, "Whether to run the model in inference mode on the test set.")
    predict_batch_size: int = option(8, "Total batch size for predict.", positive=True)
    num_train_epochs: float = option(3.0, "Total number of training epochs to perform.", positive=True)
    warmup_proportion: float = option(0.1, "Proportion of training to perform linear learning rate warmup "
                                      "for. E.g., 0.1 = 10% of training.", non_negative=True)
    eval_every_steps: int = option(0, "Also evaluate on the dev set every this many training steps and at the "
                                   "end (TensorBoard under OUTPUT_DIR/eval); 0: only after training.",
                                   non_negative=True)
    dynamic_padding: bool = option(
        True, "Run each batch only as long as its longest row (rounded up to a multiple of 16) instead of "
        "--max_seq_length: the same results on the real tokens (float round-off apart), faster on short texts. "
        "Off on TPUs, which need fixed shapes; --nodynamic_padding computes on the padding as the original.")
    causal_attention: bool | None = option(
        None, "Left-to-right attention: each token attends only to itself and the tokens before it, and the "
        "pooled output is read from the last token, as the paper fine-tuned its \"LTR & No NSP\" model. Default: "
        "what the --init_checkpoint's config says (false for every original release; true for an export of "
        "run_pretraining.py --objective=ltr). Another mask than the checkpoint's is allowed, with a warning.")
    best_checkpoint_metric: str | None = option(
        None, "With --eval_every_steps: keep the weights of the best evaluation by this eval metric (e.g. "
        "eval_accuracy, f1, matthews_corrcoef, pearson; lowest for *loss*) in OUTPUT_DIR/best, and evaluate "
        "and predict with them.")

    def validate(self) -> None:
        if not (self.do_train or self.do_eval or self.do_predict):
            raise OptionError("at least one of --do_train, --do_eval or --do_predict must be True")
        if self.warmup_proportion > 1:
            raise OptionError(f"--warmup_proportion must be at most 1, got {self.warmup_proportion}")
        if self.best_checkpoint_metric and not self.eval_every_steps:
            raise OptionError("--best_checkpoint_metric needs --eval_every_steps")
        if self.bert_config_file is None:
            raise OptionError("--bert_config_file is required (or an --init_checkpoint folder holding "
                              "bert_config.json or a Hugging Face config.json)")
        if self.vocab_file is None:
            raise OptionError("--vocab_file is required (or an --init_checkpoint folder holding vocab.txt)")
        super().validate()


def resolve(options: FinetuningOptions) -> FinetuningOptions:
    """The options with the config and vocab of an --init_checkpoint folder filled in where not given,
    checked against it where given (vocab, casing); then validated."""
    files = resolve_model_files(options.init_checkpoint, options.bert_config_file, options.vocab_file,
                                options.do_lower_case)
    options = dataclasses.replace(options, bert_config_file=files.bert_config_file, vocab_file=files.vocab_file)
    options.validate()
    output_lock.check_output_dir(options.output_dir, "--output_dir")  # before a program writes into it
    return options


def run(options: FinetuningOptions, task: Task) -> dict[str, float]:
    """Trains, evaluates and predicts as the options say; returns the eval metrics (if any): the first
    eval split's under their own names, the others' as "split/name"."""
    options.validate()
    strategy, config = run_setup.start(options, options.max_seq_length)
    config = run_setup.with_causal_attention(config, options.causal_attention, options.init_checkpoint)
    with run_setup.output_dir_lock(options, strategy):
        run_setup.configure(options, strategy, config)
        return _run_locked(options, task, strategy, config)


def _run_locked(options: FinetuningOptions, task: Task, strategy, config) -> dict[str, float]:
    """`run` once --output_dir is this run's."""
    if options.best_checkpoint_metric and training.is_chief(strategy):
        recover_best(options.output_dir)
    with strategy.scope():
        model = task.build_model(config)
    if options.do_train:
        _train(options, task, strategy, model, config)
    if not (options.do_eval or options.do_predict):
        return {}
    best = best_checkpoint(options.output_dir, options.best_checkpoint_metric) \
        if options.best_checkpoint_metric else None
    if best:
        checkpoints.load_init_checkpoint(model, best[0])
        step = best[1]
        logging.info("Evaluating the best checkpoint by %s: %s (step %d)", options.best_checkpoint_metric, *best)
    else:
        step = eval_results.restore_for_eval(model, options.output_dir, _model_init(options, task),
                                             allow_missing=task.init_allow_missing)
    metrics: dict[str, float] = {}
    for split in task.eval_splits if options.do_eval else ():
        metrics.update(_prefixed(split, task, _predict_split(options, task, strategy, model, split, step)))
    for split in task.predict_splits if options.do_predict else ():
        _predict_split(options, task, strategy, model, split, step)
    return metrics


def _model_init(options: FinetuningOptions, task: Task) -> str | None:
    """The checkpoint the task model starts from (None when --init_checkpoint feeds frozen features)."""
    return options.init_checkpoint if task.fine_tunes_bert else None


def _prefixed(split: str, task: Task, metrics: dict[str, float]) -> dict[str, float]:
    return metrics if split == task.eval_splits[0] else {f"{split}/{k}": v for k, v in metrics.items()}


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
        batches = rows.batch(context.get_per_replica_batch_size(options.train_batch_size), drop_remainder=True)
        return _mapped(batches, dynamic_padding(options, task), task.batch_map("train"))

    evaluate = _periodic_evaluation(options, task, strategy, model, config) if options.eval_every_steps else None
    loop = dataclasses.replace(run_setup.loop_config(options, num_train_steps),
                               eval_every_steps=options.eval_every_steps)
    trainer = training.Trainer(strategy, model, optimizer, task.objective, loop, dataset_fn, evaluate)
    run_setup.initialise(trainer, _model_init(options, task), allow_missing=task.init_allow_missing)
    with feature_cache.reading(path):
        trainer.train()
    if task.fine_tunes_bert:
        run_setup.export_original(trainer, config, options, task.export_files())


def _mapped(batches: tf.data.Dataset, *maps) -> tf.data.Dataset:
    for fn in maps:
        if fn is not None:
            batches = batches.map(fn, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return batches


def _dynamic_padding(options: FinetuningOptions, task: Task) -> bool:
    return options.dynamic_padding and task.dynamic_padding and options.strategy != "tpu"


def dynamic_padding(options: FinetuningOptions, task: Task):
    """The training batch map of --dynamic_padding (None when off, on a TPU or for a fixed-shape task)."""
    return batching.batch_trimmer(task.feature_spec, _dynamic_padding(options, task))


def predict_features(options: FinetuningOptions, task: Task, strategy, model, path: str, count: int,
                     batch_size: int, split: str = "predict") -> dict:
    """The task's prediction outputs for every row of a features file once, in file order (with
    --dynamic_padding, length-sorted batches, trimmed unless the task keeps fixed-length rows)."""
    batcher = batching.prediction_batcher(task.feature_spec, options.dynamic_padding and options.strategy != "tpu",
                                          trim=_dynamic_padding(options, task))
    batch_map = task.batch_map(split)
    if batch_map is not None:
        def batcher(rows, size, inner=batcher):
            return _mapped(inner(rows, size) if inner else rows.batch(size, drop_remainder=True), batch_map)
    with feature_cache.reading(path):
        return evaluation.predict(strategy, model, lambda: feature_cache.dataset(path, task.feature_spec), count,
                                  batch_size, task.prediction_keys, task.passthrough_keys, batcher=batcher)


def _periodic_evaluation(options: FinetuningOptions, task: Task, strategy, model, config):
    """The callback evaluating the current weights on the eval splits (TensorBoard scalars, log) and
    keeping the best checkpoint by --best_checkpoint_metric."""
    keeper = BestCheckpoint(options.output_dir, options.best_checkpoint_metric, model, config,
                            options.vocab_file, task.export_files()) if options.best_checkpoint_metric else None

    def evaluate(step: int) -> None:
        metrics: dict[str, float] = {}
        for split in task.eval_splits:
            found = _predict_split(options, task, strategy, model, split, step, write_results=False)
            metrics.update(_prefixed(split, task, found))
        if keeper is not None and training.is_chief(strategy):
            keeper.update(metrics, step)

    return evaluate


def _predict_split(options: FinetuningOptions, task: Task, strategy, model, split: str, step: int, *,
                   write_results: bool = True) -> dict[str, float]:
    """Predicts every row of the split once; the task's files and metrics; eval_results.txt (or
    SPLIT_results.txt) and TensorBoard scalars under OUTPUT_DIR/SPLIT at `step`."""
    batch_size = options.eval_batch_size if split.startswith("eval") else options.predict_batch_size
    examples = list(task.examples(split))  # post-processing needs them, cached features or not
    path, count = _features(options, task, split, lambda: examples)
    predictions = predict_features(options, task, strategy, model, path, count, batch_size, split)
    if not training.is_chief(strategy):
        return {}
    metrics = task.postprocess(split, examples, predictions, options.output_dir)
    if metrics:
        eval_results.report_eval(options.output_dir, metrics, step, name=split,
                                 filename=task.results_file(split) if write_results else None)
    return metrics
