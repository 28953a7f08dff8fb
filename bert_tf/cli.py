"""Small helpers shared by the command-line entry points (no TensorFlow import)."""
from __future__ import annotations

import argparse

from bert_tf.errors import run_or_exit  # noqa: F401  (the one error-to-exit wrapper)


def parse_bool(text: str) -> bool:
    """argparse type for true/false flags written the absl way (`--do_lower_case=false`)."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
