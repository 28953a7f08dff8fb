"""Where the original google-research/bert is, when a user has a checkout of it: the speed studies then time its
tokenizer and its create_pretraining_data.py beside ours. Nothing of it is shipped or fetched here.

    python -m studies --only=speed_tokenizer,speed_data_prep --original_bert=/path/to/google-research/bert
    BERT_TF_ORIGINAL_BERT=/path/to/google-research/bert make paper PAPER_ARGS=--only=speed_data_prep
"""
from __future__ import annotations

import os

from absl import flags

flags.DEFINE_string("original_bert", None, "A checkout of google-research/bert (tokenization.py, "
                    "create_pretraining_data.py): the speed studies then time the original too. Default: "
                    "$BERT_TF_ORIGINAL_BERT, else the original is not declared.")


def checkout() -> str | None:
    """The checkout's folder (--original_bert, else $BERT_TF_ORIGINAL_BERT), or None when neither names one."""
    chosen = flags.FLAGS.original_bert if flags.FLAGS.is_parsed() else None
    folder = chosen or os.environ.get("BERT_TF_ORIGINAL_BERT")
    return os.path.abspath(folder) if folder else None
