"""Builds a SWAG-layout multiple-choice proxy set (train.csv, val.csv, test.csv) from one held-back book.

Run from a clone; the program is bert_tf.tasks.multiple_choice.proxy_set. `--help` lists the flags.
A proxy for SWAG, not SWAG: see that module's documentation.
"""
import os
import sys

# data_prep/ is this script's folder; its parent holds this clone's bert_tf (the program warns if that
# source tree lacks the native tokenizer an installed build has).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.tasks.multiple_choice.proxy_set import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
