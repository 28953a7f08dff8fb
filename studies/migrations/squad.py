"""bench/results/bench_squad/VERSION-sSEED-SIDE.json (bench/bench_squad.py's accuracy phase, the original recipe at
lr 3e-5) -> the squad study's records of the same keys."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record
from studies.tables.squad import FIGURES, PAPER_RECIPE

NAME = re.compile(r"^(?P<version>v1\.1|v2\.0)-s(?P<seed>\d+)-(?P<side>ours|hf)\.json$")


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "bench_squad", "*.json"))):
        match = NAME.match(os.path.basename(path))
        if not match:
            continue
        result = load_json(path)
        figures = {new: result["scores"][old] for old, new in FIGURES.items() if old in result["scores"]}
        key = f"{match['version']}-s{match['seed']}-{match['side']}"
        program = "bench._hf_squad" if match["side"] == "hf" else "bert_tf.tasks.squad.program"
        found.append(migrated_record("squad", key, path, result, figures,
                                     {"version": match["version"], "recipe": PAPER_RECIPE,
                                      "seed": int(match["seed"]), "side": match["side"]},
                                     seconds=result.get("wall_s") or result.get("train_s"), program=program))
    return found
