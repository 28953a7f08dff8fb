"""Small helpers shared by the command-line entry points (no TensorFlow import)."""
from __future__ import annotations

import argparse
import sys
from typing import Callable


def parse_bool(text: str) -> bool:
    """argparse type for true/false flags written the absl way (`--do_lower_case=false`)."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def run_or_exit(run: Callable[[], None], errors: tuple[type[BaseException], ...], prog: str) -> None:
    """Runs `run`; an expected error becomes one line on stderr and exit status 1, no traceback."""
    try:
        run()
    except errors as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(1)
