"""bench/results/bench_classifier/speed-NAME-rROUND.json (bench/bench_classifier.py --phase=speed, the 6
contenders of 2 rounds) -> the speed_classifier study's records NAME-rROUND."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record
from studies.speed_readers import FINETUNING, pick

NAME = re.compile(r"^speed-(?P<name>ours_train|ours_train_fixed|ours_predict|ours_predict_fixed|hf_fixed|hf_dynamic)"
                  r"-r(?P<round>\d+)\.json$")
PROGRAMS = {"ours_train": "bert_tf.tasks.classifier", "ours_predict": "bench._ours_predict_speed",
            "hf": "bench._hf_classifier"}


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "bench_classifier", "speed-*.json"))):
        match = NAME.match(os.path.basename(path))
        if not match:
            continue
        result, name = load_json(path), match["name"]
        program = next(p for prefix, p in PROGRAMS.items() if name.startswith(prefix))
        found.append(migrated_record("speed_classifier", f"{name}-r{match['round']}", path, result,
                                     pick(result, FINETUNING), {"contender": name, "round": int(match["round"])},
                                     program=program))
    return found
