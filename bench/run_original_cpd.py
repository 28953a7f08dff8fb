"""Runs the ORIGINAL google-research/bert create_pretraining_data.py under TensorFlow 2 (benchmark reference).

  python bench/run_original_cpd.py /path/to/bert/create_pretraining_data.py --input_file=... (its flags)

The only shim: `import tensorflow` inside the original gets `tensorflow.compat.v1` (tf.flags, tf.app.run,
tf.logging, tf.gfile, tf.python_io), and the original's folder goes on sys.path for `import tokenization`.
No original code is copied or changed.
"""
import os
import runpy
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_tf._env import tf as tensorflow  # noqa: E402  (the real package, loaded quietly before the alias)

sys.modules["tensorflow"] = tensorflow.compat.v1


def main() -> None:
    script = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.dirname(script))
    sys.argv = [script] + sys.argv[2:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
