"""Issue #13's "pre-training helps" table for our own BERT-Mini: each result folder of bench/bench_ablations.py
(one pre-training scale) with its MLM + NSP model against random init on SST-2, every fine-tuning seed, and the
held-out masked-LM loss beside the context-free one (bench/bench_ablations.py --phase=helps_report).

A row "wins clearly" when every seed of the pre-trained model beats every seed of random init by at least
MARGIN points of dev accuracy: a gain that the spread of fine-tuning seeds cannot explain. Rows that share one
pre-trained model and differ only in the fine-tuning recipe are then judged as the paper picks its fine-tuning
hyper-parameters: each init at its own best recipe on dev (best_recipe_report).
"""
from __future__ import annotations

import json
import math
import os
import statistics

from bench._ablation_report import load_folder, task_figures

MARGIN = 2.0
TASK = "sst2"


PRETRAINED = ("mlm_nsp", "mlm")
OBJECTIVES = {"mlm_nsp": "MLM + NSP", "mlm": "MLM only"}
CORPUS_TEXT = {"wiki_books": "wiki + books", "sst2_train": "SST-2 train text (no labels)"}


def pretrained_variant(results: dict) -> str:
    """The folder's pre-trained variant: the first of PRETRAINED it ran."""
    return next((v for v in PRETRAINED if f"pretrain-{v}" in results), PRETRAINED[0])


def scale_text(scale: dict, variant: str, reset: dict | None = None) -> str:
    """The pre-training knobs that differ between folders, as one cell; `reset`: the folder's
    embedding_reset.json (bench/reset_pretrained_parts.py), when a part of its export was drawn again."""
    vocab = f"learned {scale['vocab_size']}" if scale.get("vocab_size") else "bert-base-uncased (30522)"
    start = (f"continued from `{scale['init_checkpoint']}`, then " if scale.get("init_checkpoint") else "")
    return (f"{start}{OBJECTIVES[variant]} on {CORPUS_TEXT[scale.get('corpus', 'wiki_books')]}: "
            f"{scale['steps']} steps × {scale['batch']} × seq {scale['max_seq_length']} "
            f"({scale['max_predictions']} predictions), records dupe_factor {scale.get('dupe_factor', 1)}, "
            f"lr {scale['learning_rate']:g}, vocab {vocab}" + (f"; then {reset_text(reset)}" if reset else ""))


def reset_text(reset: dict) -> str:
    """What bench/reset_pretrained_parts.py drew again from the initializer."""
    if reset["parts"] == "rare_words":
        return (f"**the word embeddings of the {reset['tokens_reset']} tokens seen fewer than {reset['min_count']} "
                "times in that corpus drawn again** from the initializer")
    if reset["parts"] == "words":
        return "**the whole word-embedding table drawn again** from the initializer"
    if reset["parts"] == "pooler":
        return "**the pooler drawn again** from the initializer (embeddings and transformer layers kept)"
    if reset["parts"] == "top_layers":
        top = "top layer" if reset["layers"] == 1 else f"top {reset['layers']} layers"
        return f"**the {top} and the pooler drawn again** from the initializer (the rest kept)"
    return "**the transformer layers and pooler drawn again** from the initializer (embeddings kept)"


def figures_text(values: list[float]) -> str:
    if not values:
        return "–"
    per_seed = ", ".join(f"{v:.1f}" for v in values)
    return f"{statistics.mean(values):.1f} ({per_seed})" if len(values) > 1 else per_seed


def clear_gap(pretrained: list[float], random_init: list[float]) -> float | None:
    """The worst pre-trained seed minus the best random-init seed (None until both have run)."""
    return min(pretrained) - max(random_init) if pretrained and random_init else None


def verdict(pretrained: list[float], random_init: list[float]) -> str:
    gap = clear_gap(pretrained, random_init)
    if gap is None:
        return "random init only (a recipe searched for the paper's protocol)" if random_init else "not run"
    if gap >= MARGIN:
        return f"**wins clearly** (worst seed {gap:+.1f} over the best random-init seed)"
    mean_gain = statistics.mean(pretrained) - statistics.mean(random_init)
    return f"does not win clearly (mean {mean_gain:+.1f}; worst seed vs best random seed {gap:+.1f})"


def row(name: str, results: dict) -> tuple[str, bool]:
    """One folder's table row (`results`: its loaded files), and whether its pre-trained model wins clearly."""
    saved = results.get("scale", {})
    scale, recipe = saved.get("pretrain"), saved.get("recipe")
    variant = pretrained_variant(results)
    pretrain = results.get(f"pretrain-{variant}", {})
    unigram = results.get("unigram", {}).get("masked_lm_loss")
    held_out = pretrain.get("held_out", {}).get("masked_lm_loss")
    loss = "–" if held_out is None else f"{held_out:.3f} (ppl {math.exp(held_out):.0f})"
    context_free = "–" if unigram is None else f"{unigram:.3f} (ppl {math.exp(unigram):.0f})"
    wall = pretrain.get("pretrain_wall_s")
    wall_text = "–" if not wall else f"{wall / 60:.0f}"
    fine_tuning = f"{recipe['sst2_examples']} sentences, {recipe_name(recipe)}" if recipe else "–"
    ours, random_init = (task_figures(results, TASK, v) for v in (variant, "random_init"))
    gap = clear_gap(ours, random_init)
    pretraining = scale_text(scale, variant, results.get("embedding_reset")) if scale and ours else "–"
    return (f"| `{name}` | {pretraining} | {wall_text} | {loss} | "
            f"{context_free} | {fine_tuning} | {figures_text(ours)} | {figures_text(random_init)} | "
            f"{verdict(ours, random_init)} |", gap is not None and gap >= MARGIN)


def pretraining_key(results: dict) -> str:
    """What makes two folders' pre-trained models and fine-tuning data the same: the pre-training scale (older
    folders' scale files lack the later fields, which then hold their defaults), any part drawn again, and the
    number of SST-2 sentences; the learning rate and epochs are left out, being what the recipe search varies."""
    saved = results.get("scale", {})
    scale = {"corpus": "wiki_books", "init_checkpoint": "", **saved.get("pretrain", {})}
    reset = {key: value for key, value in results.get("embedding_reset", {}).items() if key != "source"}
    return json.dumps([scale, reset, saved.get("recipe", {}).get("sst2_examples")], sort_keys=True)


def random_init_key(results: dict) -> str:
    """What makes two folders' random-init runs the same model on the same data: the vocab (random init has no
    other tie to the pre-training) and the number of SST-2 sentences."""
    saved = results.get("scale", {})
    return json.dumps([saved.get("pretrain", {}).get("vocab_size", 0), saved.get("recipe", {}).get("sst2_examples")])


def best_recipe(group: dict[str, dict], variant_of) -> tuple[str, list[float]] | None:
    """(folder name, seed figures) of the folder in `group` (name -> results) whose mean SST-2 accuracy is highest
    for `variant_of(results)`; a recipe screened on one seed and stopped competes only when no folder ran two (one
    lucky seed is not a mean); None when no folder ran it."""
    figures = [(statistics.mean(values), name, values) for name, results in group.items()
               if (values := task_figures(results, TASK, variant_of(results)))]
    if not figures:
        return None
    fewest_seeds = min(2, max(len(values) for _, _, values in figures))
    _, name, values = max(figure for figure in figures if len(figure[2]) >= fewest_seeds)
    return name, values


def recipe_text(results: dict) -> str:
    return recipe_name(results.get("scale", {}).get("recipe", {}))


def recipe_name(recipe: dict) -> str:
    """"lr 0.0001, 4 epochs": the fine-tuning recipe a row's runs share."""
    epochs = recipe.get("epochs", 0)
    return f"lr {recipe.get('learning_rate', 0):g}, {epochs:g} epoch{'' if epochs == 1 else 's'}"


def best_recipe_report(folders: dict[str, dict]) -> list[str]:
    """The paper's protocol over the rows (name -> results) that share a pre-trained model: each init at the
    fine-tuning recipe (learning rate, epochs) that is best on dev for it, then the same clear-win test. Random init
    takes its best over every row with its vocab and SST-2 training set, whichever pre-trained model the row holds:
    a recipe searched for one row's random init counts for all, including rows where only random init ran. Rows
    whose verdict this cannot change (one row, random init best at that row's own recipe) are left out."""
    groups: dict[str, dict[str, dict]] = {}
    pools: dict[str, dict[str, dict]] = {}
    for name, results in folders.items():
        pools.setdefault(random_init_key(results), {})[name] = results
        if task_figures(results, TASK, pretrained_variant(results)):
            groups.setdefault(pretraining_key(results), {})[name] = results
    lines = ["| pre-trained model (rows) | recipes searched | random init: recipes searched | pre-trained, best "
             "recipe | random init, best recipe | |", "|---|---|---|---|---|---|"]
    for group in groups.values():
        pool = pools[random_init_key(next(iter(group.values())))]
        ours, random_init = best_recipe(group, pretrained_variant), best_recipe(pool, lambda results: "random_init")
        if not ours or not random_init:
            continue
        (ours_name, ours), (random_name, random_init) = ours, random_init
        if len(group) == 1 and recipe_key(pool[random_name]) == recipe_key(group[ours_name]):
            continue
        searched = "; ".join(recipe_text(results) for results in group.values())
        random_recipes = {recipe_key(results): recipe_text(results) for results in pool.values()
                          if task_figures(results, TASK, "random_init")}
        random_searched = "; ".join(random_recipes[key] for key in sorted(random_recipes))
        lines.append(f"| {', '.join(f'`{n}`' for n in group)} | {searched} | {random_searched} | "
                     f"{figures_text(ours)} at {recipe_text(group[ours_name])} | {figures_text(random_init)} at "
                     f"{recipe_text(pool[random_name])} | {verdict(ours, random_init)} |")
    return lines if len(lines) > 2 else []


def recipe_key(results: dict) -> tuple[float, float]:
    """(learning rate, epochs) of a folder's fine-tuning recipe: what the recipe search varies."""
    recipe = results.get("scale", {}).get("recipe", {})
    return recipe.get("learning_rate", 0), recipe.get("epochs", 0)


def report(folders: list[str]) -> str:
    lines = ["| results (bench/results/) | BERT-Mini pre-training (80/10/10, seed 12345) | "
             "pre-training wall min | held-out MLM loss | context-free loss | SST-2 fine-tuning | SST-2 pre-trained | "
             "SST-2 random init | |",
             "|---|---|---:|---:|---:|---|---:|---:|---|"]
    loaded = {os.path.basename(folder): load_folder(folder) for folder in folders}
    rows = [row(name, results) for name, results in loaded.items()]
    lines += [text for text, _ in rows]
    won = [name for name, (_, w) in zip(loaded, rows) if w]
    summary = (f"Rows that win clearly, each at its own fine-tuning recipe (the same for both inits): "
               f"{', '.join(f'`{name}`' for name in won)}." if won else
               "None of our own pre-training runs wins clearly over random init yet.")
    protocol = best_recipe_report(loaded)
    if protocol:
        summary += ("\n\nThe paper's protocol (it picks each model's fine-tuning learning rate and epochs on dev): "
                    "the rows that share one pre-trained model and one SST-2 training set, each init at the recipe "
                    "best for it (random init: over every row with its vocab and training set).\n\n"
                    + "\n".join(protocol))
    return "\n".join([
        "## Our own BERT-Mini pre-trained against random init on SST-2 (issue #13)", "",
        "BERT-Mini (L=4, H=256, A=4) pre-trained by our `run_pretraining.py` on the row's corpus: the shared wiki + "
        "books (the ablation study's corpus, records and held-out split), or the text of SST-2's train.tsv with its "
        "labels dropped (documents of 10 consecutive lines, every 20th held out; the dev set is never read), "
        "from scratch or continued from a wiki + books model (domain-adaptive pre-training), then fine-tuned by our "
        "`run_classifier.py` on the "
        "first SST-2 training sentences (the row's count; seq 64, batch 32, warmup 10%, the row's learning rate and "
        "epochs) "
        "and scored on the whole dev set; random init is the same program and recipe without `--init_checkpoint` "
        "(the vocab and config of its row). Dev accuracy in %: mean (each seed, in seed order). Pre-training ran on one or two "
        "threads beside other work, with mixed_bfloat16 matmuls. Held-out MLM loss: on the held-out 80/10/10 records; "
        "context-free: each token's training frequency (the early plateau of MLM training). A row wins clearly "
        f"when every pre-trained seed beats every random-init seed by at least {MARGIN:.0f} points.", "",
        *lines, "", summary])
