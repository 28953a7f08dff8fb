"""The ablation study's old files (bench/bench_ablations.py's work dir, kept as bench/results/bench_ablations_d10):
TASK-VARIANT-sSEED.json fine-tuning scores in percent, and pretrain-VARIANT.json pre-training and held-out figures.
They record neither commit nor CPU (their cpu.json holds CPU seconds): both stay "not recorded"."""
from __future__ import annotations

import glob
import os
import re

from studies.migrate import load_json, migrated_record

FOLDER = "bench_ablations_d10"
TASKS = {"mrpc": "MRPC", "sst2": "SST-2", "squad": "squad", "ner_ft": "ner_ft", "ner_fb": "ner_fb"}
PROGRAMS = {"mrpc": "bert_tf.tasks.classifier", "sst2": "bert_tf.tasks.classifier",
            "squad": "bert_tf.tasks.squad.program", "ner_ft": "bert_tf.tasks.ner.program",
            "ner_fb": "bert_tf.tasks.ner.program"}
FINETUNE = re.compile(r"^(?P<task>mrpc|sst2|squad|ner_ft|ner_fb)-(?P<variant>[a-z0-9_]+)-s(?P<seed>\d+)\.json$")


def finetuning(results: str, study: str, tasks: tuple[str, ...], variants: tuple[str, ...]) -> list[dict]:
    """`study`'s records of the fine-tuning files of `tasks` (the study's task names) and `variants`; metric names
    as studies.mini_bert.task_scores gives them (e.g. mrpc_accuracy)."""
    found = []
    for path in sorted(glob.glob(os.path.join(results, FOLDER, "*-s*.json"))):
        match = FINETUNE.match(os.path.basename(path))
        if not match or TASKS[match["task"]] not in tasks or match["variant"] not in variants:
            continue
        result = load_json(path)
        wanted = ("f1",) if match["task"].startswith("ner") else tuple(result["scores"])
        metrics = {f"{match['task']}_{name}": result["scores"][name] for name in wanted}
        labels = {"task": TASKS[match["task"]], "variant": match["variant"], "seed": int(match["seed"])}
        found.append(migrated_record(study, os.path.basename(path)[:-len(".json")], path, result, metrics, labels,
                                     seconds=result.get("wall_s"), program=PROGRAMS[match["task"]]))
    return found
