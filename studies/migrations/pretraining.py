"""bench/results/bench_ablations_d10/pretrain-VARIANT.json -> the pretraining study's records: the pre-training run
(its wall seconds) and its held-out evaluations (80/10/10 and [MASK] only)."""
from __future__ import annotations

import glob
import os

from studies.migrate import load_json, migrated_record
from studies.migrations._ablations import FOLDER

PROGRAM = "bert_tf.pretraining.program"


def held_out(result: dict, suffix: str) -> dict[str, float]:
    figures = result.get(f"held_out{suffix}") or {}
    found = {"perplexity": result.get(f"perplexity{suffix}"), "masked_lm_accuracy": figures.get("masked_lm_accuracy"),
             "next_sentence_accuracy": figures.get("next_sentence_accuracy")}
    return {name + suffix: value for name, value in found.items() if value is not None}


def migrate(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, FOLDER, "pretrain-*.json"))):
        variant = os.path.basename(path)[len("pretrain-"):-len(".json")]
        result, labels = load_json(path), {"variant": variant}
        found.append(migrated_record("pretraining", f"pretrain-{variant}", path, result, {}, labels,
                                     seconds=result.get("pretrain_wall_s"), program=PROGRAM))
        for suffix, key in (("", f"eval-{variant}"), ("_all_mask", f"eval-{variant}-all-mask")):
            if held_out(result, suffix):
                found.append(migrated_record("pretraining", key, path, result, held_out(result, suffix), labels,
                                             seconds=None, program=PROGRAM))
    return found
