"""The original release's `optimization` module name, for code ported from google-research/bert.

The implementation lives in `bert_tf.training.optimization`.
"""
from bert_tf.training.optimization import *  # noqa: F401,F403
from bert_tf.training.optimization import AdamWeightDecay, Lamb, WarmupPolynomialDecay, create_optimizer  # noqa: F401
