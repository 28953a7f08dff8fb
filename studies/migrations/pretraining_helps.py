"""bench/results/{d10_,mini_,v7k_,v8k_,sst2_,random_init_}*/ (bench/bench_ablations.py work dirs, one per pre-training
recipe of issue #13) -> the pretraining_helps study's records, labelled by recipe (the folder's name) and init.

Per folder: sst2-INIT-sSEED.json (SST-2 dev accuracy in %) becomes the record FOLDER-sst2-INIT-sSEED, and
pretrain-INIT.json (held-out figures) the record FOLDER-pretrain-INIT, with the context-free loss of unigram.json as
`context_free_perplexity`. scale.json (the pre-training and fine-tuning recipe), embedding_reset.json (the part drawn
again) and cpu.json (the folder's CPU and wall seconds) become labels of every record of the folder. The ablation
study's own row (bench_ablations_d10: its SST-2 and pre-training files were migrated to table5 and pretraining and
deleted) is read from the commit before that deletion. No file names a commit or a CPU model: both stay "not recorded".
"""
from __future__ import annotations

import glob
import json
import math
import os
import re
import subprocess

from studies.migrate import load_json, migrated_record
from studies.records import ROOT

PREFIXES = ("d10_", "mini_", "v7k_", "v8k_", "sst2_", "random_init_")
D10, D10_COMMIT = "bench_ablations_d10", "bc43a02^"  # the commit before D10's migrated files were deleted
D10_FILES = ("scale.json", "unigram.json", "pretrain-mlm_nsp.json", "sst2-mlm_nsp-s1.json", "sst2-mlm_nsp-s2.json",
             "sst2-random_init-s1.json", "sst2-random_init-s2.json")
FINETUNE = re.compile(r"^sst2-(?P<init>mlm_nsp|mlm|random_init)-s(?P<seed>\d+)\.json$")
PRETRAIN = re.compile(r"^pretrain-(?P<init>mlm_nsp|mlm)\.json$")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def reset_text(reset: dict) -> str:
    """What bench/reset_pretrained_parts.py drew again (embedding_reset.json), in words."""
    part = reset["parts"]
    if part == "rare_words":
        return f"word embeddings of the {reset['tokens_reset']} tokens seen fewer than {reset['min_count']} times"
    if part == "top_layers":
        return f"top {reset['layers']} layer(s) and pooler"
    return {"words": "word embeddings", "encoder": "transformer layers and pooler", "pooler": "pooler"}[part]


def recipe_labels(scale: dict, reset: dict | None, cpu: dict | None) -> dict[str, object]:
    """A folder's recipe as labels: pre-training (scale.json "pretrain"), the part drawn again, SST-2 fine-tuning
    (its "recipe"), and the CPU and wall seconds of all the folder's runs (cpu.json of a single work dir)."""
    pre, tune = scale["pretrain"], scale["recipe"]
    labels = {"pretrain_corpus": pre.get("corpus", "wiki_books"), "continued_from": pre.get("init_checkpoint") or None,
              "pretrain_steps": pre["steps"], "pretrain_batch": pre["batch"],
              "pretrain_seq_length": pre["max_seq_length"], "pretrain_learning_rate": pre["learning_rate"],
              "vocab_size": pre.get("vocab_size") or 30522, "dupe_factor": pre.get("dupe_factor", 1),
              "sst2_sentences": tune["sst2_examples"], "finetune_learning_rate": tune["learning_rate"],
              "finetune_epochs": tune["epochs"]}
    if reset:
        labels["reset"] = reset_text(reset)
    if cpu and "cpu_s" in cpu:
        labels |= {"folder_cpu_s": round(cpu["cpu_s"]), "folder_wall_s": round(cpu["wall_s"]), "jobs": cpu["jobs"]}
    return labels


def pretrain_metrics(result: dict, unigram: dict | None) -> dict[str, float]:
    """Held-out perplexity (80/10/10 and [MASK] only), masked-LM accuracy, and the context-free perplexity."""
    found = {"perplexity": result.get("perplexity"), "perplexity_all_mask": result.get("perplexity_all_mask"),
             "masked_lm_accuracy": (result.get("held_out") or {}).get("masked_lm_accuracy"),
             "context_free_perplexity": math.exp(unigram["masked_lm_loss"]) if unigram else None}
    return {name: value for name, value in found.items() if value is not None}


def folder_records(folder: str, files: dict[str, dict], paths: dict[str, str]) -> list[dict]:
    """The records of one recipe folder from its loaded files ({name: content}) at `paths` ({name: path})."""
    labels = recipe_labels(files["scale.json"], files.get("embedding_reset.json"), files.get("cpu.json"))
    found = []
    for name in sorted(files):
        pretrain, finetune = PRETRAIN.match(name), FINETUNE.match(name)
        result = files[name]
        if pretrain:
            found.append(migrated_record(
                "pretraining_helps", f"{folder}-pretrain-{pretrain['init']}", paths[name], result,
                pretrain_metrics(result, files.get("unigram.json")), {"recipe": folder, "init": pretrain["init"],
                                                                      **labels},
                seconds=result.get("pretrain_wall_s"), program="bert_tf.pretraining.program"))
        elif finetune:
            found.append(migrated_record(
                "pretraining_helps", f"{folder}-sst2-{finetune['init']}-s{finetune['seed']}", paths[name], result,
                {"sst2_accuracy": result["scores"]["accuracy"]},
                {"recipe": folder, "init": finetune["init"], "seed": int(finetune["seed"]), **labels},
                seconds=result.get("wall_s"), program="bert_tf.tasks.classifier"))
    return found


def d10_records(results: str) -> list[dict]:
    """The ablation study's row, its files read from D10_COMMIT (source_commit: the last commit holding each); none
    in a clone without that history (migrate then keeps the records it made before)."""
    files, paths, commits = {}, {}, {}
    for name in D10_FILES:
        relative = f"bench/results/{D10}/{name}"
        try:
            files[name] = json.loads(git("show", f"{D10_COMMIT}:{relative}"))
            commits[name] = git("log", "-1", "--format=%h", D10_COMMIT, "--", relative).strip()
        except subprocess.CalledProcessError:
            return []
        paths[name] = os.path.join(results, D10, name)
    found = folder_records(D10, files, paths)
    for record in found:
        record["source_commit"] = commits[os.path.basename(record["source"])]
    return found


def migrate(results: str) -> list[dict]:
    found = d10_records(results)
    for folder in sorted(glob.glob(os.path.join(results, "*"))):
        name = os.path.basename(folder)
        if not name.startswith(PREFIXES) or not os.path.exists(os.path.join(folder, "scale.json")):
            continue
        paths = {os.path.basename(p): p for p in glob.glob(os.path.join(folder, "*.json"))}
        found += folder_records(name, {n: load_json(p) for n, p in paths.items()}, paths)
    return found
