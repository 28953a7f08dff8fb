"""The options every training program shares (pre-training, fine-tuning), declared once.

Names, defaults and help follow the original release's run_pretraining.py / run_classifier.py, plus
bert_tf's distribution and speed options. A program's options class inherits `TrainingOptions` and adds
its own. `do_lower_case` is not here: pre-training reads records tokenized beforehand, so only the
programs that tokenize text declare it.
"""
from __future__ import annotations

import dataclasses

from bert_tf.options import Options, option

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
OPTIMIZERS = ("adamw", "lamb")
MIXED_PRECISION = ("float32", "mixed_bfloat16", "mixed_float16")

_COMPATIBILITY = "Accepted for compatibility"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingOptions(Options):
    """Model, files, batch sizes, checkpoints, distribution, precision and seeds of a training run."""

    bert_config_file: str | None = option(
        None, "The config json file of the BERT model (the architecture).", required=True, path=True)
    output_dir: str | None = option(
        None, "Where checkpoints, summaries, eval results and the export go.", required=True, path=True)
    init_checkpoint: str | None = option(
        None, "Initial checkpoint: the original TF1 format or a bert_tf training checkpoint (ignored when "
        "--output_dir already holds one: that run resumes).", path=True)
    vocab_file: str | None = option(
        None, "Vocab to check the config against and copy into the export.", path=True)
    train_batch_size: int = option(32, "Total (global) batch size for training.", positive=True)
    eval_batch_size: int = option(8, "Total (global) batch size for eval.", positive=True)
    learning_rate: float = option(5e-5, "The initial learning rate for Adam.", positive=True)
    save_checkpoints_steps: int = option(1000, "How often to save the model checkpoint.", positive=True)
    keep_checkpoint_max: int = option(5, "How many recent checkpoints to keep.", positive=True)
    steps_per_loop: int = option(
        100, "Steps per compiled loop; logs and summaries come once a loop.", positive=True)
    iterations_per_loop: int | None = option(
        None, "The original's steps per TPU loop; here an alias of --steps_per_loop.", alias_of="steps_per_loop")
    num_accumulation_steps: int = option(
        1, "Micro-batches of --train_batch_size summed per update.", positive=True)
    strategy: str = option(
        "default", "tf.distribute strategy; the global batch is split over the replicas and the input files "
        "over the workers.", enum=STRATEGIES)
    tpu: str | None = option(None, "The TPU for --strategy=tpu (name, grpc:// address or 'local').")
    collective_timeout: float = option(
        600.0, "--strategy=multi_worker_mirrored: seconds one worker waits in one all-reduce for the others before "
        "it stops with one line (a peer that is alive but stuck; one that dies is noticed by TensorFlow's "
        "heartbeats in about 10 s). 0: wait forever.", non_negative=True)
    use_tpu: bool = option(False, "Use a TPU (same as --strategy=tpu).", alias_of="strategy", alias_value="tpu")
    tpu_name: str | None = option(
        None, "The TPU to use (name, grpc:// address or 'local'); same as --tpu.", alias_of="tpu")
    master: str | None = option(None, f"{_COMPATIBILITY}; use --tpu_name.", alias_of="tpu")
    tpu_zone: str | None = option(None, f"{_COMPATIBILITY} (the TPU resolver finds the zone).")
    gcp_project: str | None = option(None, f"{_COMPATIBILITY}.")
    num_tpu_cores: int = option(8, f"{_COMPATIBILITY}; the strategy counts the cores.")
    optimizer: str = option(
        "adamw", "adamw: the original AdamWeightDecay (no bias correction); lamb: layer-wise adaptive moments "
        "(NVIDIA/MLPerf BERT), for large batches.", enum=OPTIMIZERS)
    mixed_precision: str = option("float32", "Keras dtype policy.", enum=MIXED_PRECISION)
    jit_compile: bool = option(False, "Compile the training step with XLA.")
    seed: int | None = option(None, "Seed for weights, dropout and input shuffling.")
    deterministic: bool = option(
        False, "Deterministic ops and input order (reproducible, resumable bit for bit; slower).")
