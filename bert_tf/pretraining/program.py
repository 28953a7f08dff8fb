"""The pre-training program behind run_pretraining.py: options in, checkpoints, summaries and exports out.

Mirrors the original run_pretraining.py (same flags and defaults, eval_results.txt, an exported
original-format checkpoint), on Keras 3 and tf.distribute instead of TPUEstimator.
"""
from __future__ import annotations

import dataclasses
import os

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints
from bert_tf.pretraining import input_pipeline
from bert_tf.pretraining.objective import PRETRAINING
from bert_tf.training import evaluation, results as eval_results
from bert_tf.training import trainer as training
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertPretrainingModel
from bert_tf.training.optimization import create_optimizer

MIXED_PRECISION = ("float32", "mixed_bfloat16", "mixed_float16")
OPTIMIZERS = ("adamw", "lamb")
EXPORT_DIR = "export"


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """Everything run_pretraining.py's flags say (names and defaults of the original)."""

    bert_config_file: str
    input_file: str
    output_dir: str
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    do_train: bool = False
    do_eval: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    poly_power: float = 1.0
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    max_eval_steps: int = 100
    steps_per_loop: int = 100
    num_accumulation_steps: int = 1
    strategy: str = "default"
    tpu: str | None = None
    optimizer: str = "adamw"
    mixed_precision: str = "float32"
    jit_compile: bool = False
    seed: int | None = None
    deterministic: bool = False

    def validate(self) -> None:
        """One readable error (naming the flag) for settings that cannot work."""
        if not (self.do_train or self.do_eval):
            raise training.TrainingError("at least one of --do_train or --do_eval must be True")
        training.require_positive(self, ("max_seq_length", "max_predictions_per_seq", "train_batch_size",
                                         "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
                                         "max_eval_steps", "steps_per_loop", "num_accumulation_steps",
                                         "keep_checkpoint_max"))
        if self.num_warmup_steps < 0:
            raise training.TrainingError(f"--num_warmup_steps must be >= 0, got {self.num_warmup_steps}")
        if self.strategy not in training.STRATEGIES:
            raise training.TrainingError(f"--strategy={self.strategy!r} is not one of {', '.join(training.STRATEGIES)}")
        if self.optimizer not in OPTIMIZERS:
            raise training.TrainingError(f"--optimizer={self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise training.TrainingError(
                f"--mixed_precision={self.mixed_precision!r} is not one of {', '.join(MIXED_PRECISION)}")


def run(options: PretrainingOptions) -> dict[str, float]:
    """Trains and/or evaluates; returns the eval results (or the last training scalars)."""
    options.validate()
    # First: a multi-worker strategy configures collective ops, which must precede any TF op.
    strategy = training.make_strategy(options.strategy, options.tpu)
    config = BertConfig.from_json_file(options.bert_config_file)
    config.validate(vocab_file=options.vocab_file, max_seq_length=options.max_seq_length,
                    source=options.bert_config_file)
    files = input_pipeline.expand_input_files(options.input_file)
    input_pipeline.check_record_files(files, options.max_seq_length, options.max_predictions_per_seq)
    logging.info("Input: %s", input_pipeline.describe(files))
    if options.seed is not None:
        keras.utils.set_random_seed(options.seed)
    if options.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.config.set_dtype_policy(options.mixed_precision)
    logging.info("Strategy %s with %d replica(s); policy %s", type(strategy).__name__,
                 strategy.num_replicas_in_sync, options.mixed_precision)
    os.makedirs(options.output_dir, exist_ok=True)
    with strategy.scope():
        model = BertPretrainingModel(config)
        optimizer = create_optimizer(options.learning_rate, options.num_train_steps, options.num_warmup_steps,
                                     power=options.poly_power, optimizer=options.optimizer)
        if options.mixed_precision == "mixed_float16":  # dynamic loss scaling
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    results: dict[str, float] = {}
    if options.do_train:
        results = _train(options, strategy, model, optimizer, config, files)
    if options.do_eval:
        results = _evaluate(options, strategy, model, files)
    return results


def _dataset_fn(options: PretrainingOptions, files: list[str], global_batch_size: int, is_training: bool):
    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return input_pipeline.pretraining_dataset(
            files, batch_size=context.get_per_replica_batch_size(global_batch_size),
            max_seq_length=options.max_seq_length, max_predictions_per_seq=options.max_predictions_per_seq,
            is_training=is_training, input_context=context, seed=options.seed,
            deterministic=True if options.deterministic else None)

    return dataset_fn


def _train(options, strategy, model, optimizer, config, files) -> dict[str, float]:
    input_pipeline.check_batch_size(options.train_batch_size, strategy.num_replicas_in_sync)
    loop = training.LoopConfig(
        output_dir=options.output_dir, num_train_steps=options.num_train_steps,
        global_batch_size=options.train_batch_size, steps_per_loop=options.steps_per_loop,
        save_checkpoints_steps=options.save_checkpoints_steps, keep_checkpoint_max=options.keep_checkpoint_max,
        num_accumulation_steps=options.num_accumulation_steps, jit_compile=options.jit_compile)
    trainer = training.Trainer(strategy, model, optimizer, PRETRAINING, loop,
                               _dataset_fn(options, files, options.train_batch_size, True))
    if trainer.manager.latest_checkpoint is None and options.init_checkpoint:
        kind = checkpoints.load_init_checkpoint(model, options.init_checkpoint)
        logging.info("Initialised from %s (%s checkpoint)", options.init_checkpoint, kind)
    scalars = trainer.train()
    if trainer.chief:
        folder = os.path.join(options.output_dir, EXPORT_DIR)
        checkpoints.export_original_folder(model, model.bert_config, folder, options.vocab_file)
        logging.info("Exported the original checkpoint format to %s", folder)
    return scalars


def _evaluate(options, strategy, model, files) -> dict[str, float]:
    input_pipeline.check_batch_size(options.eval_batch_size, strategy.num_replicas_in_sync, "--eval_batch_size")
    step = eval_results.restore_for_eval(model, options.output_dir, options.init_checkpoint)
    results = evaluation.evaluate(strategy, model, PRETRAINING,
                                  _dataset_fn(options, files, options.eval_batch_size, False), options.max_eval_steps)
    if training.is_chief(strategy):
        eval_results.report_eval(options.output_dir, results, step)
    return {**results, "global_step": step}
