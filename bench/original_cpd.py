"""Runs the ORIGINAL google-research/bert create_pretraining_data.py under TensorFlow 2, unchanged:
`python -m bench.original_cpd /path/to/bert/create_pretraining_data.py --input_file=... (its flags)`.

The only shims: `import tensorflow` inside the original gets `tensorflow.compat.v1` (tf.flags, tf.app.run,
tf.logging, tf.gfile, tf.python_io), and its `import tokenization` gets the checkout's own tokenization.py. No
original code is copied or changed.
"""
from __future__ import annotations

import importlib.util
import os
import runpy
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main() -> None:
    from bert_tf._env import tf  # the real package, loaded quietly before the alias

    script = os.path.abspath(sys.argv[1])
    sys.modules["tensorflow"] = tf.compat.v1
    spec = importlib.util.spec_from_file_location("tokenization", os.path.join(os.path.dirname(script),
                                                                               "tokenization.py"))
    sys.modules["tokenization"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["tokenization"])
    sys.argv = [script, *sys.argv[2:]]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
