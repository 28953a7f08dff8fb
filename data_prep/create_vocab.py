"""Learn a WordPiece vocab.txt (original BERT layout) from text files. See docs/data_prep.md.

Run from a clone; the program is bert_tf.text.create_vocab,
installed as `bert-tf-create-vocab`. `--help` lists the flags.
"""
import os
import sys

# data_prep/ is this script's folder; its parent holds this clone's bert_tf (the program warns if that
# source tree lacks the native tokenizer an installed build has).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.text.create_vocab import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
