"""Pre-train BERT (masked LM + next sentence) on TFRecords from data_prep/create_pretraining_data.py.

The original release's flags and defaults, plus distribution and speed options:

    python run_pretraining.py --flagfile=configs/bert_tiny_phase1.flags
    python run_pretraining.py --input_file='data/train-*.tfrecord' --output_dir=out \
        --bert_config_file=configs/bert_tiny_config.json --do_train --do_eval \
        --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
        --num_train_steps=10000 --num_warmup_steps=1000 --learning_rate=1e-4

A rerun with the same --output_dir resumes from its latest checkpoint. TensorBoard:
`tensorboard --logdir=OUTPUT_DIR` (runs "train" and "eval"). The trained model is also exported
in the original format to OUTPUT_DIR/export (bert_config.json, bert_model.ckpt.*, vocab.txt).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bert_tf._env  # noqa: E402,F401
from absl import app, flags, logging  # noqa: E402

from bert_tf.pretraining import program as pretraining  # noqa: E402
from bert_tf.training.trainer import STRATEGIES  # noqa: E402

FLAGS = flags.FLAGS

# The original run_pretraining.py flags.
flags.DEFINE_string("bert_config_file", None, "The config json file of the BERT model (the architecture).")
flags.DEFINE_string("input_file", None, "Input TFRecord file(s): comma-separated globs.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries, eval results and the export go.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: the original TF1 format or a bert_tf "
                    "training checkpoint (ignored when --output_dir already holds one: that run resumes).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length; must equal the records'.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked LM predictions per sequence; "
                     "must equal the records'.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the input files.")
flags.DEFINE_integer("train_batch_size", 32, "Total (global) batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total (global) batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", None, "The original's steps per TPU loop; here an alias "
                     "of --steps_per_loop.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_bool("use_tpu", False, "Use a TPU (same as --strategy=tpu).")
flags.DEFINE_string("tpu_name", None, "The TPU to use (name, grpc:// address or 'local').")
flags.DEFINE_string("tpu_zone", None, "Accepted for compatibility (the TPU resolver finds the zone).")
flags.DEFINE_string("gcp_project", None, "Accepted for compatibility.")
flags.DEFINE_string("master", None, "Accepted for compatibility; use --tpu_name.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; the strategy counts the cores.")

# bert_tf additions.
flags.DEFINE_enum("strategy", "default", list(STRATEGIES), "tf.distribute strategy; the global batch is "
                  "split over the replicas and the input files over the workers.")
flags.DEFINE_enum("optimizer", "adamw", list(pretraining.OPTIMIZERS),
                  "adamw: the original AdamWeightDecay (no bias correction); lamb: layer-wise "
                  "adaptive moments (NVIDIA/MLPerf BERT), for large batches.")
flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial learning-rate decay (the original: 1).")
flags.DEFINE_integer("num_accumulation_steps", 1, "Micro-batches of --train_batch_size summed per update.")
flags.DEFINE_enum("mixed_precision", "float32", list(pretraining.MIXED_PRECISION), "Keras dtype policy.")
flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")
flags.DEFINE_integer("steps_per_loop", 100, "Steps per compiled loop; logs and summaries come once a loop.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "How many recent checkpoints to keep.")
flags.DEFINE_string("vocab_file", None, "Vocab to check the config against and copy into the export.")
flags.DEFINE_integer("seed", None, "Seed for weights, dropout and input shuffling.")
flags.DEFINE_bool("deterministic", False, "Deterministic ops and input order (reproducible, resumable "
                  "bit for bit; slower).")


def options_from_flags() -> pretraining.PretrainingOptions:
    steps_per_loop = FLAGS.iterations_per_loop if FLAGS.iterations_per_loop else FLAGS.steps_per_loop
    return pretraining.PretrainingOptions(
        bert_config_file=FLAGS.bert_config_file, input_file=FLAGS.input_file, output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint, vocab_file=FLAGS.vocab_file, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, do_train=FLAGS.do_train, do_eval=FLAGS.do_eval,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        learning_rate=FLAGS.learning_rate, num_train_steps=FLAGS.num_train_steps,
        num_warmup_steps=FLAGS.num_warmup_steps, poly_power=FLAGS.poly_power,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps, keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        max_eval_steps=FLAGS.max_eval_steps, steps_per_loop=steps_per_loop,
        num_accumulation_steps=FLAGS.num_accumulation_steps,
        strategy="tpu" if FLAGS.use_tpu else FLAGS.strategy, tpu=FLAGS.tpu_name or FLAGS.master,
        optimizer=FLAGS.optimizer, mixed_precision=FLAGS.mixed_precision, jit_compile=FLAGS.jit_compile,
        seed=FLAGS.seed, deterministic=FLAGS.deterministic)


def main(argv):
    del argv
    logging.set_verbosity(logging.INFO)
    from bert_tf import checkpoints
    from bert_tf.model import configs
    from bert_tf.pretraining import input_pipeline
    from bert_tf.text import tokenization
    from bert_tf.training import trainer as training

    errors = (training.TrainingError, input_pipeline.InputError, configs.ConfigError,
              checkpoints.CheckpointError, checkpoints.CheckpointMismatchError, tokenization.VocabError)
    try:
        pretraining.run(options_from_flags())
    except errors as e:  # each names the flag, file or variable; no deep traceback
        sys.exit(f"run_pretraining.py: error: {e}")


if __name__ == "__main__":
    for name in ("bert_config_file", "input_file", "output_dir"):
        flags.mark_flag_as_required(name)
    app.run(main)
