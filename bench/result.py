"""How a contender hands its figures to the studies runner: OUT/result.json, written whole or not at all, and the
same figures as one `RESULT {json}` line in its log (what a person reading the log sees)."""
from __future__ import annotations

import json
import os
from typing import Iterable


def report(out: str, result: dict, quiet: Iterable[str] = ()) -> dict:
    """Writes `result` to OUT/result.json and prints it as a RESULT line (less the `quiet` keys: bulky details
    kept for the file alone); returns it."""
    # imported here: a contender that must show it runs without bert_tf (the SavedModel's) loads first
    from bert_tf.data.atomic_io import write_json_atomic

    os.makedirs(out, exist_ok=True)
    write_json_atomic(os.path.join(out, "result.json"), result)
    shown = {k: v for k, v in result.items() if k not in set(quiet)}
    print("RESULT " + json.dumps(shown), flush=True)
    return result
