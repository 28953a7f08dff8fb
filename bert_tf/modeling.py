"""The original release's `modeling` module name, for code ported from google-research/bert.

`BertConfig` and `BertModel` live in `bert_tf.model`; heads in `bert_tf.model.heads`.
"""
from bert_tf.model.activations import gelu, get_activation  # noqa: F401
from bert_tf.model.bert import *  # noqa: F401,F403
from bert_tf.model.bert import BertModel  # noqa: F401
from bert_tf.model.configs import BertConfig  # noqa: F401
