"""The original release's `tokenization` module name, for code ported from google-research/bert.

The implementation lives in `bert_tf.text.tokenization` (exact) and `bert_tf.text.fast_tokenization`.
"""
from bert_tf.text.tokenization import *  # noqa: F401,F403
from bert_tf.text.tokenization import (BasicTokenizer, FullTokenizer, TokenizerInputError,  # noqa: F401
                                       VocabError, WordpieceTokenizer, validate_case_matches_checkpoint)
