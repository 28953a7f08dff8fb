"""bench/results/bench_classifier/TASK-sSEED-SIDE.json (bench/bench_classifier.py's accuracy and random_init
phases) -> the glue study's records of the same keys."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record

NAME = re.compile(r"^(?P<task>[A-Za-z0-9-]+)-s(?P<seed>\d+)-(?P<side>ours|hf|ours_random)\.json$")
LEGACY_COMMIT = "5623c65"  # what bench_classifier's results saved without a commit ran at (its LEGACY)


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "bench_classifier", "*.json"))):
        match = NAME.match(os.path.basename(path))
        if not match:
            continue
        result = load_json(path)
        if "scores" not in result:
            continue
        key = f"{match['task']}-s{match['seed']}-{match['side']}"
        program = "bench._hf_classifier" if match["side"] == "hf" else "bert_tf.tasks.classifier"
        found.append(migrated_record("glue", key, path, result, result["scores"],
                                     {"task": match["task"], "seed": int(match["seed"]), "side": match["side"]},
                                     commit=result.get("commit") or LEGACY_COMMIT, program=program))
    return found
