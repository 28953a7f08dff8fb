"""create_pretraining_data, sharded mode, as an Apache Beam pipeline: same shards, same records.

Run from a clone; the program is bert_tf.pretraining.beam_create_pretraining_data,
installed as `bert-tf-beam-create-pretraining-data`. `--help` lists the flags.
"""
import os
import sys

# data_prep/ is this script's folder; its parent holds this clone's bert_tf (the program warns if that
# source tree lacks the native tokenizer an installed build has).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.pretraining.beam_create_pretraining_data import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
