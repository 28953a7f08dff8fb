"""Import TensorFlow quietly. Every module of ours that uses TensorFlow imports this first.

TensorFlow's C++ start-up lines (oneDNN notice, "Could not find cuda drivers", absl's
"All log messages before absl::InitializeLog()") are written straight to file descriptor 2
before any log level applies, so they are muted only while TensorFlow loads. oneDNN itself
stays on: it is worth ~37% CPU throughput. Set BERT_TF_VERBOSE_TF=1 to see everything.
"""
import logging
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if os.environ.get("BERT_TF_VERBOSE_TF") != "1":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _import_tensorflow_quietly():
    if "tensorflow" in sys.modules or os.environ.get("BERT_TF_VERBOSE_TF") == "1":
        import tensorflow
        return tensorflow
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            import tensorflow
            # Device discovery logs cuInit failures on machines without a GPU driver.
            tensorflow.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return tensorflow


class _DropPerSaveChatter(logging.Filter):
    """TensorFlow's checkpoint saver logs "Sharding callback duration: N microseconds" at INFO on every save
    (tensorflow/python/checkpoint/functional_saver.py, through absl's logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Sharding callback duration")


tf = _import_tensorflow_quietly()
if os.environ.get("BERT_TF_VERBOSE_TF") != "1":
    logging.getLogger("absl").addFilter(_DropPerSaveChatter())
