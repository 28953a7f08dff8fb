"""The start and end of every training program, written once: strategy, config, seeds and precision;
the attention mask an init checkpoint was trained with; the optimizer; the loop's settings;
initialisation; the original-format export."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import ContextManager, Iterable, Mapping

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from absl import logging

from bert_tf import checkpoints
from bert_tf.checkpoints.model_folder import MODEL_CONFIG, model_folder
from bert_tf.data import output_lock
from bert_tf.data.atomic_io import write_json_atomic
from bert_tf.model.configs import BertConfig, ConfigError
from bert_tf.model.precision import warn_if_emulated
from bert_tf.training import trainer as training
from bert_tf.training.optimization import create_optimizer
from bert_tf.training.options import TrainingOptions

EXPORT_DIR = "export"
CAUSAL_KEY = "causal_attention"  # in MODEL_CONFIG (the run's architecture) and bert_config.json only when true


def start(options: TrainingOptions, max_seq_length: int) -> tuple[tf.distribute.Strategy, BertConfig]:
    """The strategy (first: a multi-worker strategy must precede any TF op) and the checked config.

    Programs check their inputs next, then take `output_dir_lock` and call `configure` inside it,
    so that a bad input fails before anything is logged or created.
    """
    strategy = training.make_strategy(options.strategy, options.tpu, options.collective_timeout)
    config = BertConfig.from_json_file(options.bert_config_file)
    config.validate(vocab_file=options.vocab_file, max_seq_length=max_seq_length, source=options.bert_config_file)
    return strategy, config


def configure(options: TrainingOptions, strategy: tf.distribute.Strategy, config: BertConfig) -> None:
    """Seeds, op determinism and the dtype policy; logs the setup, creates the output folder and checks
    that its checkpoints (if any) were written for this model's config (`check_model_config`)."""
    if options.seed is not None:
        keras.utils.set_random_seed(options.seed)
    if options.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.config.set_dtype_policy(options.mixed_precision)
    if options.mixed_precision == "mixed_bfloat16" and options.strategy != "tpu" \
            and not tf.config.list_logical_devices("GPU"):
        warn_if_emulated("--mixed_precision=mixed_bfloat16")
    logging.info("Strategy %s with %d replica(s); policy %s", options.strategy,
                 strategy.num_replicas_in_sync, options.mixed_precision)
    output_lock.make_output_dir(options.output_dir, "--output_dir")
    check_model_config(options.output_dir, config, write=training.is_chief(strategy))


# What makes checkpoints of two configs incompatible, though some keep every variable's shape
# (num_attention_heads, hidden_act): dropout and initializer_range may change between runs.
_ARCHITECTURE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                      "hidden_act", "max_position_embeddings", "type_vocab_size")


def check_model_config(output_dir: str, config: BertConfig, *, write: bool) -> None:
    """Refuses an `output_dir` whose checkpoints were written for another architecture, in one line;
    TensorFlow's shape checks cannot see a change that keeps every shape (e.g. num_attention_heads).
    The config is recorded in OUTPUT_DIR/model_config.json (by the chief: `write`) while the folder
    holds no checkpoint, or holds checkpoints of runs before this record existed."""
    path = os.path.join(output_dir, MODEL_CONFIG)
    current = {key: config.to_dict()[key] for key in _ARCHITECTURE_KEYS}
    if config.causal_attention:  # recorded only when true: absent means the original's bidirectional mask
        current[CAUSAL_KEY] = True
    latest = tf.train.latest_checkpoint(output_dir)
    if latest and os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            assert isinstance(saved, dict)
        except (OSError, ValueError, AssertionError):
            raise training.TrainingError(f"{path}: not the JSON object this program writes; it records the "
                                         f"config of {latest}: put it back or use a new --output_dir") from None
        changed = [key for key in _ARCHITECTURE_KEYS if key in saved and saved[key] != current[key]]
        if changed:
            key = changed[0]
            raise training.TrainingError(
                f"{latest} was written for a different model ({key} {saved[key]!r} there, per {path}, vs "
                f"{current[key]!r} here); use a new --output_dir")
        if bool(saved.get(CAUSAL_KEY, False)) != config.causal_attention:
            raise training.TrainingError(
                f"{latest} was written for a model with {_mask_name(bool(saved.get(CAUSAL_KEY)))} attention (per "
                f"{path}), this run's is {_mask_name(config.causal_attention)}; use a new --output_dir")
    elif write:
        write_json_atomic(path, current)


def _mask_name(causal: bool) -> str:
    return "causal (left-to-right)" if causal else "bidirectional"


def causal_attention_of(init_checkpoint: str | None) -> bool | None:
    """Whether the --init_checkpoint model was trained with the causal mask, as its folder records it:
    its bert_config.json (an export or a release) or model_config.json (a bert_tf training folder);
    None when the folder records neither (or there is no init checkpoint)."""
    folder = model_folder(init_checkpoint)
    if folder is None:
        return None
    config_path = os.path.join(folder, "bert_config.json")
    if os.path.isfile(config_path):
        try:
            return BertConfig.from_json_file(config_path).causal_attention
        except ConfigError:
            return None
    try:
        with open(os.path.join(folder, MODEL_CONFIG), encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    return bool(saved.get(CAUSAL_KEY, False)) if isinstance(saved, dict) else None


def with_causal_attention(config: BertConfig, requested: bool | None, init_checkpoint: str | None,
                          flag: str = "--causal_attention") -> BertConfig:
    """The run's config with the attention mask to use: `requested` when given, else the init checkpoint's
    (else the config file's). A mask other than the checkpoint's is allowed (the paper tried it: an LTR
    model fine-tuned without its mask did worse) but logged as a warning."""
    recorded = causal_attention_of(init_checkpoint)
    causal = requested if requested is not None else recorded if recorded is not None else config.causal_attention
    if recorded is not None and causal != recorded:
        logging.warning("%s: %s was pre-trained with %s attention; this run uses %s attention", flag,
                        init_checkpoint, _mask_name(recorded), _mask_name(causal))
    if causal:
        logging.info("Causal (left-to-right) attention: each token attends only to itself and earlier ones")
    return dataclasses.replace(config, causal_attention=causal)


def output_dir_lock(options: TrainingOptions, strategy: tf.distribute.Strategy) -> ContextManager:
    """Creates --output_dir and, on the chief, holds its exclusive lock for the block: a second run on
    the same folder is refused naming this one. Other workers write only into private subfolders."""
    if not training.is_chief(strategy):
        output_lock.make_output_dir(options.output_dir, "--output_dir")
        return contextlib.nullcontext()
    return output_lock.lock_folder(options.output_dir, "--output_dir")


def make_optimizer(options: TrainingOptions, num_train_steps: int, num_warmup_steps: int, power: float = 1.0):
    """The run's optimizer (call inside strategy.scope()); mixed_float16 gets dynamic loss scaling."""
    optimizer = create_optimizer(options.learning_rate, num_train_steps, num_warmup_steps, power=power,
                                 optimizer=options.optimizer)
    if options.mixed_precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def loop_config(options: TrainingOptions, num_train_steps: int) -> training.LoopConfig:
    """The training loop's settings from the shared options."""
    return training.LoopConfig(
        output_dir=options.output_dir, num_train_steps=num_train_steps, global_batch_size=options.train_batch_size,
        steps_per_loop=options.steps_per_loop, save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max, num_accumulation_steps=options.num_accumulation_steps,
        jit_compile=options.jit_compile)


def initialise(trainer: training.Trainer, init_checkpoint: str | None, *, allow_missing: Iterable[str] = ()) -> None:
    """Loads --init_checkpoint into a fresh run (a run that resumes keeps its own checkpoint)."""
    if trainer.manager.latest_checkpoint is None and init_checkpoint:
        kind = checkpoints.load_init_checkpoint(trainer.model, init_checkpoint, allow_missing=allow_missing)
        logging.info("Initialised from %s (%s checkpoint)", init_checkpoint, kind)


def export_original(trainer: training.Trainer, config: BertConfig, options: TrainingOptions,
                    extra_files: Mapping[str, str] | None = None) -> None:
    """On the chief: OUTPUT_DIR/export in the original release's layout (config, TF1 checkpoint, vocab),
    with the task's `extra_files` ({name: text}, e.g. label_list.txt)."""
    if trainer.chief:
        folder = os.path.join(options.output_dir, EXPORT_DIR)
        checkpoints.export_original_folder(trainer.model, config, folder, options.vocab_file, extra_files)
        logging.info("Exported the original checkpoint format to %s", folder)
