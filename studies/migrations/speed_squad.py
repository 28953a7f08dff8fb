"""bench/results/bsq_speed/speed-SIDE-rROUND.json (bench/bench_squad.py --phase=speed --work_dir=/work/bsq_speed,
the round docs/benchmarks.md rendered) -> the speed_squad study's records SIDE-rROUND. The older round in
bench_squad/speed-*.json, which no doc rendered, is left out."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record
from studies.speed_readers import FINETUNING, pick

NAME = re.compile(r"^speed-(?P<side>ours|hf)-r(?P<round>\d+)\.json$")
PROGRAMS = {"ours": "bert_tf.tasks.squad.program", "hf": "bench._hf_squad"}


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "bsq_speed", "speed-*.json"))):
        match = NAME.match(os.path.basename(path))
        if match:
            result = load_json(path)
            found.append(migrated_record("speed_squad", f"{match['side']}-r{match['round']}", path, result,
                                         pick(result, FINETUNING),
                                         {"contender": match["side"], "round": int(match["round"])},
                                         program=PROGRAMS[match["side"]]))
    return found
