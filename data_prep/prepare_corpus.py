"""Raw WikiExtractor output and Project Gutenberg books -> one sentence per line, sharded.

The output is the input format of create_pretraining_data.py: one sentence per line, a
blank line between documents. See docs/data_prep.md.

  python data_prep/prepare_corpus.py \
    --input='../shared/data/corpus/wiki/*/wiki_*,../shared/data/corpus/books/*.txt' \
    --output_dir=/tmp/corpus --num_shards=4 --dedup
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from bert_tf.pretraining import corpus  # noqa: E402
from bert_tf.cli import run_or_exit  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_string("input", None, "Comma-separated globs of input files.")
flags.DEFINE_string("output_dir", None, "Directory for the output shards (created if needed).")
flags.DEFINE_string("output_prefix", "corpus", "Shard names: <prefix>-00000-of-0000N.txt.")
flags.DEFINE_enum("format", "auto", list(corpus.FORMATS),
                  "wiki: WikiExtractor <doc> files; books: plain text / Project Gutenberg; "
                  "auto: detected per file.")
flags.DEFINE_integer("num_shards", 0, "Number of output shards (document i -> shard i mod N). "
                     "0: use --shard_size_mb.")
flags.DEFINE_float("shard_size_mb", 0.0, "Start a new shard once one holds this many MiB "
                   "(used when --num_shards=0; 0 means a single shard).")
flags.DEFINE_integer("min_sentences_per_doc", 1, "Drop documents with fewer sentences.")
flags.DEFINE_integer("min_chars_per_doc", 0, "Drop documents with fewer characters of text.")
flags.DEFINE_bool("dedup", False, "Keep only the first of documents with identical text.")
flags.DEFINE_string("language", "en", "Language code given to the sentence segmenter.")


def run() -> None:
    """Read, segment, filter and write; prints a one-line summary."""
    start = time.time()
    files = corpus.expand_inputs(FLAGS.input.split(","))
    writer = corpus.ShardWriter(FLAGS.output_dir, FLAGS.output_prefix, FLAGS.num_shards,
                                FLAGS.shard_size_mb)
    try:
        for doc in corpus.corpus_documents(files, FLAGS.format, FLAGS.language,
                                           FLAGS.min_sentences_per_doc,
                                           FLAGS.min_chars_per_doc, FLAGS.dedup):
            writer.write(doc)
    except BaseException:
        writer.abort()
        raise
    names = writer.close()
    print(f"{len(files)} input files -> {writer.num_documents} documents, "
          f"{writer.num_sentences} sentences in {len(names)} shards under {FLAGS.output_dir} "
          f"({time.time() - start:.1f} s)")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    run_or_exit(run, "prepare_corpus.py")


if __name__ == "__main__":
    flags.mark_flags_as_required(["input", "output_dir"])
    app.run(main)
