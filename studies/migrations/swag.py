"""bench/results/bench_ablations_d10/swag-MODEL-sSEED.json (bench/bench_ablations.py --phase=swag: run_swag.py from
the study's MLM + NSP export, "mini_mlm_nsp", or random init, "mini_random") -> the swag study's records."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record
from studies.migrations._ablations import FOLDER

NAME = re.compile(r"^swag-(?P<model>mini_mlm_nsp|mini_random)-s(?P<seed>\d+)\.json$")
VARIANTS = {"mini_mlm_nsp": "mlm_nsp", "mini_random": "random_init"}
PROGRAM = "bert_tf.tasks.multiple_choice.program"


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, FOLDER, "swag-*.json"))):
        match = NAME.match(os.path.basename(path))
        if not match:
            continue
        result, variant = load_json(path), VARIANTS[match["model"]]
        labels = {"task": "swag", "variant": variant, "seed": int(match["seed"])}
        found.append(migrated_record("swag", f"swag-{variant}-s{match['seed']}", path, result,
                                     {"swag_accuracy": result["scores"]["accuracy"]}, labels,
                                     seconds=result.get("wall_s"), program=PROGRAM))
    return found
