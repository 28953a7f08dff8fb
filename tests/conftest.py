import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(__file__))


import pytest  # noqa: E402


@pytest.fixture
def float64_policy():
    """Keras' float64 policy for the test (head parity with the original: only its own round-off is left)."""
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float64")
    yield
    keras.config.set_dtype_policy(previous)
