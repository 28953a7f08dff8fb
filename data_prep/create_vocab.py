"""Learn a WordPiece vocab.txt (original BERT layout) from text files. See docs/data_prep.md.

  python data_prep/create_vocab.py --input='/tmp/corpus/corpus-*.txt' \
    --output=/tmp/vocab.txt --vocab_size=30522 --do_lower_case=True --learner=tokenizers
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from bert_tf.pretraining import corpus  # noqa: E402
from bert_tf.text import vocab_learning  # noqa: E402
from bert_tf.cli import run_or_exit  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_string("input", None, "Comma-separated globs of text files (e.g. the output of "
                    "prepare_corpus.py: one sentence per line); blank lines are ignored.")
flags.DEFINE_string("output", None, "Path of the vocab.txt to write.")
flags.DEFINE_integer("vocab_size", 30522, "Exact number of tokens in the vocabulary.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased model), as "
                  "FullTokenizer(do_lower_case=...) will.")
flags.DEFINE_integer("num_unused", vocab_learning.DEFAULT_NUM_UNUSED,
                     "Number of [unusedN] tokens (>= 99; 994 in the released uncased vocab).")
flags.DEFINE_enum("learner", "tensorflow_text", list(vocab_learning.LEARNERS),
                  "tensorflow_text: no extra dependency, slow (minutes per few MB); "
                  "tokenizers: Hugging Face `tokenizers` (optional package), ~25x faster.")
flags.DEFINE_integer("max_unique_chars", 1000, "Keep only this many most frequent characters.")
flags.DEFINE_integer("max_input_words", 5_000_000,
                     "Learn from only this many most frequent distinct words.")
flags.DEFINE_integer("sample_every", 1, "Read only every N-th line (a quick, deterministic "
                     "subsample of a large corpus).")


def _lines(files, every):
    index = 0
    for path in files:
        for line in corpus.read_lines(path):
            if line.strip():
                if index % every == 0:
                    yield line
                index += 1


def run() -> None:
    """Count words, learn, write; prints a one-line summary."""
    start = time.time()
    if FLAGS.vocab_size <= 0 or FLAGS.sample_every <= 0:
        raise vocab_learning.VocabError("--vocab_size and --sample_every must be positive")
    files = corpus.expand_inputs(FLAGS.input.split(","))
    counts = vocab_learning.count_words(_lines(files, FLAGS.sample_every), FLAGS.do_lower_case)
    counted = time.time()
    tokens = vocab_learning.learn_vocab(counts, FLAGS.vocab_size, FLAGS.num_unused,
                                        FLAGS.max_unique_chars, FLAGS.learner,
                                        FLAGS.max_input_words)
    vocab_learning.write_vocab(FLAGS.output, tokens)
    print(f"{len(files)} files, {sum(counts.values())} words ({len(counts)} distinct) -> "
          f"{len(tokens)} tokens in {FLAGS.output} (counting {counted - start:.1f} s, "
          f"learning {time.time() - counted:.1f} s)")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    run_or_exit(run, "create_vocab.py")


if __name__ == "__main__":
    flags.mark_flags_as_required(["input", "output"])
    app.run(main)
