"""bench/results/bench_ner/sSEED-SIDE.json (bench/bench_ner.py's accuracy phase) and t7-sSEED-FEATURES.json (its
table7 phase, BiLSTM of 256 units) -> the table7 study's records."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record

FINETUNE = re.compile(r"^s(?P<seed>\d+)-(?P<side>ours|hf)\.json$")
FEATURE_BASED = re.compile(r"^t7-s(?P<seed>\d+)-(?P<features>[a-z_]+)\.json$")


def figures(scores: dict) -> dict[str, float]:
    return {f"{split}_{name}": scores[split][name] for split in ("dev", "test") for name in ("precision", "recall", "f1")
            if name in scores.get(split, {})}


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "bench_ner", "*.json"))):
        name = os.path.basename(path)
        finetune, feature_based = FINETUNE.match(name), FEATURE_BASED.match(name)
        if not (finetune or feature_based):
            continue
        result = load_json(path)
        if finetune:
            features, side, seed = "finetune", finetune["side"], int(finetune["seed"])
            program = "bench._hf_ner" if side == "hf" else "bert_tf.tasks.ner.program"
        else:
            features, side, seed = feature_based["features"], "ours", int(feature_based["seed"])
            program = "bert_tf.tasks.ner.program"
        found.append(migrated_record("table7", f"{features}-s{seed}-{side}", path, result, figures(result["scores"]),
                                     {"features": features, "side": side, "seed": seed},
                                     seconds=result.get("wall_s") or result.get("train_s"), program=program))
    return found
