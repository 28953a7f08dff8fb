"""bench/results/bench_ner/speed-SIDE-rROUND.json (bench/bench_ner.py --phase=speed, training only)
-> the speed_ner study's records SIDE-rROUND."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record
from studies.speed_readers import FINETUNING, pick

NAME = re.compile(r"^speed-(?P<side>ours|hf)-r(?P<round>\d+)\.json$")
PROGRAMS = {"ours": "bert_tf.tasks.ner.program", "hf": "bench._hf_ner"}


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "bench_ner", "speed-*.json"))):
        match = NAME.match(os.path.basename(path))
        if match:
            result = load_json(path)
            found.append(migrated_record("speed_ner", f"{match['side']}-r{match['round']}", path, result,
                                         pick(result, FINETUNING),
                                         {"contender": match["side"], "round": int(match["round"])},
                                         program=PROGRAMS[match["side"]]))
    return found
