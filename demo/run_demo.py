"""The main job, end to end, in a few minutes on a CPU: `make demo` runs this.

1. learn a WordPiece vocab from the corpus        (data_prep/create_vocab.py)
2. make static-masked pre-training records         (data_prep/create_pretraining_data.py)
3. evaluate the untrained model                    (run_pretraining.py --do_eval)
4. pre-train a BERT-Tiny-sized model, evaluate it   (run_pretraining.py --do_train --do_eval)
5. fill in [MASK] in sentences of the corpus with the exported original-format checkpoint

Each step is the real command a user runs; the demo prints it. Point it at real data with flags:

    python demo/run_demo.py --corpus='my_docs/*.txt' --work_dir=/tmp/my_run --num_train_steps=20000
"""
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import bert_tf._env  # noqa: E402,F401
from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", os.path.join(ROOT, "demo", "corpus.txt"),
                    "Text to pre-train on: one sentence per line, blank lines between documents (globs, commas).")
flags.DEFINE_string("work_dir", os.path.join(ROOT, "demo_output"), "Where the vocab, records and model go.")
flags.DEFINE_integer("vocab_size", 600, "WordPiece vocab size (the demo corpus has ~200 distinct words).")
flags.DEFINE_integer("num_unused", 99, "[unusedN] tokens in the vocab.")
flags.DEFINE_integer("max_seq_length", 64, "Sequence length of the records and the model.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per sequence.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the corpus with different masks.")
flags.DEFINE_integer("num_train_steps", 2000, "Pre-training steps.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size.")
flags.DEFINE_float("learning_rate", 4e-4, "Peak learning rate (AdamWeightDecay, linear warmup and decay).")
flags.DEFINE_integer("hidden_size", 128, "BERT-Tiny: 128 (A = H / 64, I = 4H).")
flags.DEFINE_integer("num_hidden_layers", 2, "BERT-Tiny: 2.")
flags.DEFINE_bool("fresh", True, "Start from an empty --work_dir (False: reuse what is there, resuming training).")
flags.DEFINE_integer("seed", 12345, "Seed for data and model.")


def step(title: str, args: list[str]) -> None:
    """Runs one real command, showing it and its output; exits on failure."""
    print(f"\n=== {title}\n$ {' '.join(shlex.quote(a) for a in args)}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT)
    if done.returncode:
        sys.exit(f"demo: '{title}' failed (exit {done.returncode}); see its output above")
    print(f"--- done in {time.perf_counter() - started:.1f} s", flush=True)


def read_results(path: str) -> dict[str, float]:
    with open(path, encoding="utf-8") as f:
        return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if " = " in line)}


def model_config() -> dict:
    h = FLAGS.hidden_size
    return {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": h,
            "initializer_range": 0.02, "intermediate_size": 4 * h, "max_position_embeddings": 512,
            "num_attention_heads": max(1, h // 64), "num_hidden_layers": FLAGS.num_hidden_layers,
            "type_vocab_size": 2, "vocab_size": FLAGS.vocab_size}


def fill_masks(export_dir: str, corpus_files: list[str], count: int = 4) -> None:
    """Masks the last word of a few corpus sentences and prints the model's top guesses."""
    import numpy as np

    from bert_tf.text import tokenization
    from bert_tf.checkpoints import load_tf1_checkpoint
    from bert_tf.model.configs import BertConfig
    from bert_tf.model.heads import BertPretrainingModel

    tokenizer = tokenization.FullTokenizer(os.path.join(export_dir, "vocab.txt"), do_lower_case=True)
    model = BertPretrainingModel(BertConfig.from_json_file(os.path.join(export_dir, "bert_config.json")))
    load_tf1_checkpoint(model, os.path.join(export_dir, "bert_model.ckpt"))
    with open(corpus_files[0], encoding="utf-8") as f:
        sentences = [line.strip() for line in f if len(line.split()) >= 5]
    rng = random.Random(FLAGS.seed)
    # Two sentences of the demo corpus' easiest pattern (consecutive week days) when it has them,
    # then random ones: the model gets the first kind right long before the invented facts.
    easy = [s for s in sentences if " opens on " in s]
    chosen = rng.sample(easy, min(2, len(easy))) + rng.sample(sentences, min(count, len(sentences)))
    print("\n=== Fill in [MASK] (the masked word is the sentence's last word before the period)")
    for sentence in chosen[:count]:
        words = sentence.split()
        target = words[-2] if words[-1] == "." else words[-1]
        masked = " ".join(words[:-2] + ["[MASK]", words[-1]] if words[-1] == "." else words[:-1] + ["[MASK]"])
        left, right = masked.split("[MASK]")
        tokens = ["[CLS]", *tokenizer.tokenize(left), "[MASK]", *tokenizer.tokenize(right), "[SEP]"]
        position = tokens.index("[MASK]")
        ids = tokenizer.convert_tokens_to_ids(tokens)
        inputs = {"input_ids": np.array([ids], np.int32), "input_mask": np.ones((1, len(ids)), np.int32),
                  "segment_ids": np.zeros((1, len(ids)), np.int32),
                  "masked_lm_positions": np.array([[position]], np.int32)}
        log_probs = model(inputs)["masked_lm_log_probs"].numpy()[0, 0]
        best = np.argsort(-log_probs)[:3]
        guesses = ", ".join(f"{tokenizer.inv_vocab[int(i)]} ({np.exp(log_probs[i]):.0%})" for i in best)
        print(f"  {masked}\n      expected: {target:<12} model: {guesses}")


def main(argv):
    del argv
    work = os.path.abspath(FLAGS.work_dir)
    if FLAGS.fresh and os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work, exist_ok=True)
    python = sys.executable
    vocab, records = os.path.join(work, "vocab.txt"), os.path.join(work, "records", "train.tfrecord")
    config_path, pretrain_dir = os.path.join(work, "bert_config.json"), os.path.join(work, "pretrain")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(model_config(), f, indent=2, sort_keys=True)
    seq = [f"--max_seq_length={FLAGS.max_seq_length}", f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}"]
    step("1/5 learn a WordPiece vocab", [
        python, "data_prep/create_vocab.py", f"--input={FLAGS.corpus}", f"--output={vocab}",
        f"--vocab_size={FLAGS.vocab_size}", f"--num_unused={FLAGS.num_unused}"])
    os.makedirs(os.path.dirname(records), exist_ok=True)
    step("2/5 create static-masked pre-training records", [
        python, "data_prep/create_pretraining_data.py", f"--input_file={FLAGS.corpus}", f"--output_file={records}",
        f"--vocab_file={vocab}", f"--dupe_factor={FLAGS.dupe_factor}", f"--random_seed={FLAGS.seed}", *seq])
    common = [python, "run_pretraining.py", f"--bert_config_file={config_path}", f"--input_file={records}",
              f"--vocab_file={vocab}", f"--train_batch_size={FLAGS.train_batch_size}", "--eval_batch_size=32",
              "--max_eval_steps=20", f"--seed={FLAGS.seed}", *seq]
    before_dir = os.path.join(work, "untrained")
    step("3/5 evaluate the untrained model", [*common, f"--output_dir={before_dir}", "--do_eval"])
    step("4/5 pre-train (MLM + NSP) and evaluate", [
        *common, f"--output_dir={pretrain_dir}", "--do_train", "--do_eval",
        f"--num_train_steps={FLAGS.num_train_steps}", f"--num_warmup_steps={FLAGS.num_train_steps // 10}",
        f"--learning_rate={FLAGS.learning_rate}", "--steps_per_loop=100",
        f"--save_checkpoints_steps={max(100, FLAGS.num_train_steps // 4)}"])
    before = read_results(os.path.join(before_dir, "eval_results.txt"))
    after = read_results(os.path.join(pretrain_dir, "eval_results.txt"))
    print("\n=== 5/5 results (eval on the demo records)")
    print(f"  {'metric':<24}{'before':>10}{'after':>10}")
    for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"):
        print(f"  {key:<24}{before[key]:>10.4f}{after[key]:>10.4f}")
    import glob
    fill_masks(os.path.join(pretrain_dir, "export"), sorted(glob.glob(FLAGS.corpus.split(",")[0])))
    print(f"\nTensorBoard:  {python} -m tensorboard.main --logdir={pretrain_dir}")
    print(f"Checkpoints:  {pretrain_dir}/ckpt-*  (rerun with --nofresh to resume)")
    print(f"Original-format export (bert_config.json, bert_model.ckpt.*, vocab.txt): {pretrain_dir}/export")


if __name__ == "__main__":
    app.run(main)
