"""Raw WikiExtractor output and Project Gutenberg books -> one sentence per line, sharded.

Run from a clone; the program is bert_tf.pretraining.prepare_corpus,
installed as `bert-tf-prepare-corpus`. `--help` lists the flags.
"""
import os
import sys

# data_prep/ is this script's folder; its parent holds this clone's bert_tf (the program warns if that
# source tree lacks the native tokenizer an installed build has).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.pretraining.prepare_corpus import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
