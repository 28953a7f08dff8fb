r"""Pre-train BERT (masked LM + next sentence) on TFRecords from create_pretraining_data.

The program behind `run_pretraining.py` and `bert-tf-pretrain` (or `python -m bert_tf.pretraining.program`),
with the original release's flags and defaults, plus distribution and speed options:

    bert-tf-pretrain --flagfile=configs/bert_tiny_phase1.flags --input_file='data/train-*.tfrecord' --output_dir=out
    bert-tf-pretrain --input_file='data/train-*.tfrecord' --output_dir=out \
        --bert_config_file=configs/bert_tiny_config.json --do_train --do_eval \
        --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
        --num_train_steps=10000 --num_warmup_steps=1000 --learning_rate=1e-4

A rerun with the same --output_dir resumes from its latest checkpoint. TensorBoard:
`tensorboard --logdir=OUTPUT_DIR` (runs "train" and "eval"). The trained model is also exported
in the original format to OUTPUT_DIR/export (bert_config.json, bert_model.ckpt.*, vocab.txt).
In a --flagfile, relative paths are relative to the flagfile's folder.
Keras 3 and tf.distribute replace the original's TPUEstimator.
"""
from __future__ import annotations

import dataclasses
import os

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints, cli
from bert_tf.pretraining import input_pipeline
from bert_tf.training import trainer as training
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertPretrainingModel
from bert_tf.training.optimization import create_optimizer
from bert_tf.options import OptionError, option
from bert_tf.training.options import MIXED_PRECISION, OPTIMIZERS, TrainingOptions  # noqa: F401

EXPORT_DIR = "export"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingOptions(TrainingOptions):
    """Everything run_pretraining.py's flags say (names and defaults of the original)."""

    input_file: str | None = option(None, "Input TFRecord file(s): comma-separated globs.", required=True,
                                    path=True)
    max_seq_length: int = option(128, "Maximum sequence length; must equal the records'.", positive=True)
    max_predictions_per_seq: int = option(
        20, "Maximum masked LM predictions per sequence; must equal the records'.", positive=True)
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the input files.")
    num_train_steps: int = option(100000, "Number of training steps.", positive=True)
    num_warmup_steps: int = option(10000, "Number of warmup steps.", non_negative=True)
    max_eval_steps: int = option(100, "Maximum number of eval steps.", positive=True)
    poly_power: float = option(1.0, "Power of the polynomial learning-rate decay (the original: 1).")

    def validate(self) -> None:
        """One readable error (naming the flag) for settings that cannot work."""
        if not (self.do_train or self.do_eval):
            raise OptionError("at least one of --do_train or --do_eval must be True")
        super().validate()


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
    logging.info("Strategy %s with %d replica(s); policy %s", options.strategy, strategy.num_replicas_in_sync,
                 options.mixed_precision)
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
    trainer = training.Trainer(strategy, model, optimizer, training.PRETRAINING, loop,
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
    step = 0
    latest = tf.train.latest_checkpoint(options.output_dir)
    if latest:
        global_step = tf.Variable(0, dtype=tf.int64)
        tf.train.Checkpoint(model=model, global_step=global_step).read(latest).expect_partial()
        step = int(global_step.numpy())
    elif options.init_checkpoint:
        checkpoints.load_init_checkpoint(model, options.init_checkpoint)
    results = training.evaluate(strategy, model, training.PRETRAINING,
                                _dataset_fn(options, files, options.eval_batch_size, False), options.max_eval_steps)
    results["global_step"] = step
    if not training.is_chief(strategy):
        return results
    path = os.path.join(options.output_dir, "eval_results.txt")
    training.write_eval_results(path, results)
    writer = tf.summary.create_file_writer(os.path.join(options.output_dir, "eval"))
    with writer.as_default(step=step):
        for name, value in results.items():
            if name != "global_step":
                tf.summary.scalar(name, value)
    writer.flush()
    logging.info("***** Eval results *****\n%s", "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))
    return results


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-pretrain` / run_pretraining.py: flags to PretrainingOptions, then `run`."""
    cli.run_program(run, PretrainingOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
