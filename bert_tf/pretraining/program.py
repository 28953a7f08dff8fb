r"""Pre-train BERT (masked LM + next sentence) on TFRecords from create_pretraining_data.

The program behind `run_pretraining.py` and `bert-tf-pretrain` (or `python -m bert_tf.pretraining.program`),
with the original release's flags and defaults, plus distribution and speed options:

    bert-tf-pretrain --flagfile=configs/bert_tiny_phase1.flags --input_file='data/train-*.tfrecord' --output_dir=out
    bert-tf-pretrain --input_file='data/train-*.tfrecord' --output_dir=out \
        --bert_config_file=configs/bert_tiny_config.json --do_train --do_eval \
        --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
        --num_train_steps=10000 --num_warmup_steps=1000 --learning_rate=1e-4

A rerun with the same --output_dir resumes from its latest checkpoint; a second run on an --output_dir
in use is refused, naming the first (bert_tf.data.output_lock). TensorBoard:
`tensorboard --logdir=OUTPUT_DIR` (runs "train" and "eval"). The trained model is also exported
in the original format to OUTPUT_DIR/export (bert_config.json, bert_model.ckpt.*, vocab.txt).
--objective=mlm or ltr trains the paper's "No NSP" and "LTR & No NSP" ablations instead
(bert_tf.pretraining.objective); their exports add pretraining.json naming the objective.
In a --flagfile, relative paths are relative to the flagfile's folder.
Keras 3 and tf.distribute replace the original's TPUEstimator.
--dynamic_masking (RoBERTa) draws new masks for every batch in the input pipeline, of --masking_unit
wordpiece, word or span (SpanBERT), at --masked_lm_prob, --mask_token_prob and --random_token_prob
(bert_tf.pretraining.dynamic_masking); feed it records written with create_pretraining_data --masking=none.
"""
from __future__ import annotations

import dataclasses

import bert_tf._env  # noqa: F401
import tensorflow as tf
from absl import logging

from bert_tf import cli
from bert_tf.pretraining import input_pipeline
from bert_tf.pretraining import objective as objectives
from bert_tf.training import evaluation, results as eval_results, run_setup
from bert_tf.training import trainer as training
from bert_tf.model.heads import BertPretrainingModel
from bert_tf.options import OptionError, option
from bert_tf.training.options import MIXED_PRECISION, OPTIMIZERS, TrainingOptions  # noqa: F401
from bert_tf.pretraining.instances import MASKING_UNITS, InstanceOptions

_MASKING = InstanceOptions()  # data preparation's masking defaults, declared there once
_MASKING_FLAGS = ("masking_unit", "masked_lm_prob", "mask_token_prob", "random_token_prob")



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
    objective: str = option(
        objectives.DEFAULT_OBJECTIVE, "What to pre-train (the paper's Table 5 ablations): mlm_nsp: masked LM + next "
        "sentence prediction (the original); mlm: masked LM only (\"No NSP\"); ltr: a left-to-right LM predicting "
        "the next token at every position under a causal attention mask, from the same records (\"LTR & No "
        "NSP\"; fine-tuning keeps the mask). The export records it (pretraining.json, bert_config.json).",
        enum=objectives.OBJECTIVE_NAMES)
    num_train_steps: int = option(100000, "Number of training steps.", positive=True)
    num_warmup_steps: int = option(10000, "Number of warmup steps.", non_negative=True)
    max_eval_steps: int = option(100, "Maximum number of eval steps.", positive=True)
    poly_power: float = option(1.0, "Power of the polynomial learning-rate decay (the original: 1).")
    dynamic_masking: bool = option(
        False, "Draw new masks for every batch in the input pipeline (RoBERTa's dynamic masking), from --seed and "
        "the batch's position: deterministic and exactly resumable. Reads records written with "
        "create_pretraining_data --masking=none, or masked ones (their masks are undone first). Needs --vocab_file.")
    masking_unit: str = option(_MASKING.masking_unit, "With --dynamic_masking: what is masked: single WordPieces, "
                               "whole words, or SpanBERT's spans of whole words.", enum=MASKING_UNITS)
    masked_lm_prob: float = option(_MASKING.masked_lm_prob, "With --dynamic_masking: the share of tokens masked "
                                   "(at most --max_predictions_per_seq per sequence, at least 1).", positive=True,
                                   maximum=1)
    mask_token_prob: float = option(_MASKING.mask_token_prob, "With --dynamic_masking: of the masked positions, the "
                                    "share shown as [MASK].", non_negative=True, maximum=1)
    random_token_prob: float = option(_MASKING.random_token_prob, "With --dynamic_masking: of the masked positions, "
                                      "the share shown as a random word; the rest keep their token.",
                                      non_negative=True, maximum=1)

    def validate(self) -> None:
        """One readable error (naming the flag) for settings that cannot work."""
        if not (self.do_train or self.do_eval):
            raise OptionError("at least one of --do_train or --do_eval must be True")
        super().validate()
        self._validate_masking()

    def _validate_masking(self) -> None:
        """The masking flags belong to --dynamic_masking, which needs the vocab (and a masked LM)."""
        if not self.dynamic_masking:
            given = [name for name in _MASKING_FLAGS if getattr(self, name) != getattr(_MASKING, name)]
            if given:
                raise OptionError(f"--{given[0]} applies only with --dynamic_masking (masked records carry their "
                                  "masks: create_pretraining_data takes the same flag)")
            return
        if not self.vocab_file:
            raise OptionError("--dynamic_masking needs --vocab_file (the [MASK], [CLS] and [SEP] ids, the random "
                              "words and the ## pieces of words come from it)")
        if self.objective == "ltr":
            raise OptionError("--dynamic_masking draws masks for a masked LM; --objective=ltr reads none")
        self.masking_options().validate()

    def masking_options(self) -> InstanceOptions:
        """The --dynamic_masking options, in data preparation's terms."""
        return InstanceOptions(max_seq_length=self.max_seq_length, max_predictions_per_seq=self.max_predictions_per_seq,
                               masked_lm_prob=self.masked_lm_prob, mask_token_prob=self.mask_token_prob,
                               random_token_prob=self.random_token_prob, masking_unit=self.masking_unit)


def run(options: PretrainingOptions) -> dict[str, float]:
    """Trains and/or evaluates; returns the eval results (or the last training scalars)."""
    options.validate()
    strategy, config = run_setup.start(options, options.max_seq_length)
    config = objectives.model_config(options.objective, config, options.bert_config_file)
    config = run_setup.with_causal_attention(config, config.causal_attention, options.init_checkpoint,
                                             flag=f"--objective={options.objective}")
    files = input_pipeline.expand_input_files(options.input_file)
    input_pipeline.check_record_files(files, options.max_seq_length, options.max_predictions_per_seq,
                                      require_masks=not options.dynamic_masking and options.objective != "ltr")
    logging.info("Input: %s", input_pipeline.describe(files))
    with run_setup.output_dir_lock(options, strategy):
        run_setup.configure(options, strategy, config)
        with input_pipeline.reading(files):  # a damaged or unfit record: one line naming its file
            return _train_and_evaluate(options, strategy, config, files)


def _train_and_evaluate(options: PretrainingOptions, strategy, config, files: list[str]) -> dict[str, float]:
    with strategy.scope():
        model = BertPretrainingModel(config)
        optimizer = run_setup.make_optimizer(options, options.num_train_steps, options.num_warmup_steps,
                                             options.poly_power)
    results: dict[str, float] = {}
    if options.do_train:
        results = _train(options, strategy, model, optimizer, config, files)
    if options.do_eval:
        results = _evaluate(options, strategy, model, files)
    return results


def _dataset_fn(options: PretrainingOptions, files: list[str], global_batch_size: int, is_training: bool,
                config):
    masking = _dynamic_masking(options)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        return input_pipeline.pretraining_dataset(
            files, batch_size=context.get_per_replica_batch_size(global_batch_size),
            max_seq_length=options.max_seq_length, max_predictions_per_seq=options.max_predictions_per_seq,
            is_training=is_training, input_context=context, seed=options.seed,
            deterministic=True if options.deterministic else None, vocab_size=config.vocab_size,
            type_vocab_size=config.type_vocab_size, masking=masking)

    return dataset_fn


def _dynamic_masking(options: PretrainingOptions):
    """The input pipeline's masking for --dynamic_masking, keyed by --seed; None without it."""
    if not options.dynamic_masking:
        return None
    from bert_tf.pretraining.dynamic_masking import DynamicMasking

    return DynamicMasking.from_vocab_file(options.vocab_file, options.masking_options(), options.seed)


def _train(options, strategy, model, optimizer, config, files) -> dict[str, float]:
    input_pipeline.check_batch_size(options.train_batch_size, strategy.num_replicas_in_sync)
    trainer = training.Trainer(strategy, model, optimizer, objectives.OBJECTIVES[options.objective],
                               run_setup.loop_config(options, options.num_train_steps),
                               _dataset_fn(options, files, options.train_batch_size, True, config))
    objectives.check_and_record(options.output_dir, options.objective,
                                resuming=trainer.manager.latest_checkpoint is not None, write=trainer.chief)
    run_setup.initialise(trainer, options.init_checkpoint)
    scalars = trainer.train()
    run_setup.export_original(trainer, config, options, objectives.export_files(options.objective))
    return scalars


def _evaluate(options, strategy, model, files) -> dict[str, float]:
    input_pipeline.check_batch_size(options.eval_batch_size, strategy.num_replicas_in_sync, "--eval_batch_size")
    step = eval_results.restore_for_eval(model, options.output_dir, options.init_checkpoint)
    results = evaluation.evaluate(strategy, model, objectives.OBJECTIVES[options.objective],
                                  _dataset_fn(options, files, options.eval_batch_size, False, model.bert_config),
                                  options.max_eval_steps)
    if training.is_chief(strategy):
        eval_results.report_eval(options.output_dir, results, step)
    return {**results, "global_step": step}


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-pretrain` / run_pretraining.py: flags to PretrainingOptions, then `run`."""
    cli.run_program(run, PretrainingOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
