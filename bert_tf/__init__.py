"""bert_tf: a TensorFlow 2 / Keras 3 reproduction of Google's BERT."""

__version__ = "0.1.0"
