"""Creates masked-LM / next-sentence pretraining TFRecords from text (the original BERT's program).

  python data_prep/create_pretraining_data.py --input_file=corpus.txt --output_file=out.tfrecord \
      --vocab_file=vocab.txt [--mode=faithful|sharded] [--num_workers=N] [--gzip] [--overwrite]

Input: one sentence per line, a blank line between documents. --mode=faithful (default) writes
exactly the original's records (same records, same order) into the comma list of --output_file,
round-robin. --mode=sharded treats --output_file as a prefix and writes PREFIX-00000.tfrecord, ...
(see bert_tf/pretraining/sharded.py for how it differs; files PREFIX-NNNNN.tfrecord left by an earlier,
larger run are deleted). Both write PREFIX.summary.json.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

from bert_tf.pretraining import instances as pd  # noqa: E402
from bert_tf.pretraining import sharded as spd  # noqa: E402
from bert_tf.pretraining.records import file_sha256, write_json_atomic  # noqa: E402
from bert_tf.text.tokenization import TokenizerInputError, VocabError  # noqa: E402

flags.DEFINE_string("input_file", None, "Input text file(s): comma-separated list of files or globs.")
flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated (faithful); "
                    "one output prefix (sharded).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words rather than single WordPieces.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences shorter than the maximum length.")
flags.DEFINE_enum("mode", "faithful", ["faithful", "sharded"],
                  "faithful: record-for-record the original's output. sharded: independent shards on all "
                  "cores with bounded memory (statistically equivalent, different records).")
flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores).")
flags.DEFINE_integer("docs_per_shard", 500, "Most documents per shard (sharded mode).")
flags.DEFINE_integer("max_shard_chars", 500_000, "Most characters of text per shard (sharded mode); a shard "
                     "closes at whichever limit comes first.")
flags.DEFINE_enum("tokenizer", "exact", ["exact", "fast"],
                  "Tokenization path; the ids are identical. exact: no TensorFlow, light and cheap to fork "
                  "(the default: on the 7 MiB wiki it tokenizes in ~1.8 s). fast: tensorflow-text, whose "
                  "import costs ~3 s and ~540 MB per process; only worth it on far larger corpora.")
flags.DEFINE_bool("gzip", False, "Write gzip-compressed TFRecords (read with compression_type='GZIP').")
flags.DEFINE_bool("overwrite", False, "Redo outputs that are already complete.")

FLAGS = flags.FLAGS


def _flag_values() -> dict:
    names = ["input_file", "output_file", "vocab_file", "do_lower_case", "do_whole_word_mask", "max_seq_length",
             "max_predictions_per_seq", "random_seed", "dupe_factor", "masked_lm_prob", "short_seq_prob", "mode",
             "docs_per_shard", "max_shard_chars", "tokenizer", "gzip"]
    return {name: FLAGS[name].value for name in names}


def _already_complete(summary_file: str, flag_values: dict, vocab_sha256: str) -> bool:
    import json
    try:
        with open(summary_file, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    return (old.get("flags") == flag_values and old.get("vocab_sha256") == vocab_sha256
            and all(os.path.isfile(f["file"]) for f in old.get("files", [])))


def create(log=logging.info) -> dict:
    """Runs the program for the parsed FLAGS; returns the summary (also written to disk)."""
    if not os.path.isfile(FLAGS.vocab_file):
        raise pd.DataPrepError(f"--vocab_file: file not found: {FLAGS.vocab_file}")
    options = pd.InstanceOptions(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, FLAGS.masked_lm_prob,
                                 FLAGS.short_seq_prob, FLAGS.do_whole_word_mask, FLAGS.dupe_factor)
    options.validate()
    warning = options.masking_warning()
    if warning:
        logging.warning(warning)
    input_files = pd.expand_input_patterns(FLAGS.input_file)
    output_files = [f for f in FLAGS.output_file.split(",") if f]
    num_workers = FLAGS.num_workers or os.cpu_count() or 1
    flag_values, vocab_sha256 = _flag_values(), file_sha256(FLAGS.vocab_file)
    if FLAGS.mode == "faithful":
        if FLAGS.gzip:
            output_files = [f if f.endswith(".gz") else f + ".gz" for f in output_files]
        summary_file = pd.summary_path(output_files[0])
        if not FLAGS.overwrite and _already_complete(summary_file, flag_values, vocab_sha256):
            log(f"outputs already complete ({summary_file}); --overwrite to redo")
            return {}
        summary = pd.run_faithful(input_files, output_files, FLAGS.vocab_file, FLAGS.do_lower_case, options,
                                  FLAGS.random_seed, tokenizer=FLAGS.tokenizer, num_workers=num_workers,
                                  compress=FLAGS.gzip, log=log)
    else:
        if len(output_files) != 1:
            raise pd.DataPrepError("--output_file: sharded mode takes one output prefix, not a list")
        prefix = output_files[0]
        prefix = prefix[:-len(".tfrecord")] if prefix.endswith(".tfrecord") else prefix
        summary_file = prefix + ".summary.json"
        shard_options = spd.ShardOptions(options, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.random_seed,
                                         FLAGS.tokenizer)
        summary = spd.run_sharded(input_files, prefix, shard_options, num_workers=num_workers,
                                  docs_per_shard=FLAGS.docs_per_shard, max_shard_chars=FLAGS.max_shard_chars,
                                  compress=FLAGS.gzip,
                                  overwrite=FLAGS.overwrite, log=log)
    summary.update(flags=flag_values, vocab_sha256=vocab_sha256, input_files=input_files)
    write_json_atomic(summary_file, summary)
    log(f"Wrote {summary['instances']} total instances; summary: {summary_file}")
    return summary


def main(argv) -> None:
    del argv
    try:
        create()
    except (pd.DataPrepError, VocabError, TokenizerInputError, OSError) as e:
        sys.exit(f"create_pretraining_data: error: {e}")


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("output_file")
    flags.mark_flag_as_required("vocab_file")
    app.run(main)
