"""The pre-training runs of one variant and their held-out evaluations, as the pretraining study declares them and
as Table 6 scores its sizes: records from `create_pretraining_data`, `run_pretraining` itself, and
`run_pretraining --do_eval` on held-out instances.

On this machine a variant is one `run_pretraining` run with the scale's recipe (mini_bert.RECIPES). At the paper
scale it is the paper's schedule through the shipped flagfiles: phase 1 (`configs/NAME_phase1.flags`, seq 128)
then phase 2 (`configs/NAME_phase2.flags`, seq 512, from phase 1's export), each with the accelerators'
flagfile (`{strategy_flags}`); `pretrain-VARIANT` is always the run whose export the fine-tuning tables read.
"""
from __future__ import annotations

import json
import math
import os
from typing import Mapping

from studies import readers
from studies.records import ROOT
from studies.mini_bert import PRETRAINING, RECIPES, VOCAB, Variant, config_file, config_name, rule
from studies.study import Run, strategy_flags

HELD_OUT_RULES = {"": (0.8, 0.1), "_all_mask": (1.0, 0.0)}  # figure-name suffix: (mask, random) rates
PHASE_2 = (512, 80)  # the paper's phase 2: sequence length, masked positions


def held_out_figures(suffix: str, objective: str):
    """eval_results.txt of a held-out evaluation: perplexity (exp of the masked-LM loss, next-token for LTR) and
    the accuracies, each name with `suffix`."""
    def read(out: str, folders: Mapping[str, str]) -> dict[str, float]:
        found = readers.eval_results()(out, folders)
        loss = found["next_token_loss" if objective == "ltr" else "masked_lm_loss"]
        figures = {"perplexity": math.exp(loss), "masked_lm_accuracy": found.get("masked_lm_accuracy"),
                   "next_sentence_accuracy": found.get("next_sentence_accuracy")}
        return {name + suffix: value for name, value in figures.items() if value is not None}
    return read


def records_run(name: str, source: str, rates: tuple[float, float] | None, dupe_factor: int, scale: str,
                length: tuple[int, int] = (128, 20)) -> Run:
    """create_pretraining_data (the original's faithful mode) at the given (mask, random) rates, or unmasked
    (rates None: masks drawn in training by --dynamic_masking); `length`: (max_seq_length, max_predictions)."""
    masking = ("--masking=none",) if rates is None else (f"--mask_token_prob={rates[0]}",
                                                         f"--random_token_prob={rates[1]}")
    return Run(name, "bert_tf.pretraining.create_pretraining_data",
               (f"--input_file={source}", "--output_file={out}/records.tfrecord", f"--vocab_file={VOCAB}",
                "--do_lower_case", f"--max_seq_length={length[0]}", f"--max_predictions_per_seq={length[1]}",
                f"--dupe_factor={dupe_factor}", "--random_seed=12345", *masking),
               readers.nothing, ("records.tfrecord",), cost_s=5 if scale == "smoke" else 120, report=False)


def model_flags(variant: Variant, scale: str) -> tuple[str, ...]:
    """The model, vocabulary and objective flags every run of the variant gives run_pretraining."""
    return (f"--bert_config_file={config_file(variant, scale)}", f"--vocab_file={VOCAB}", "--max_seq_length=128",
            "--max_predictions_per_seq=20", f"--objective={variant.objective}", "--seed=12345", "--eval_batch_size=32")


def dynamic_flags(variant: Variant) -> tuple[str, ...]:
    return ("--dynamic_masking", f"--mask_token_prob={variant.mask_token_prob}",
            f"--random_token_prob={variant.random_token_prob}") if variant.dynamic else ()


def machine_minutes(variant: Variant) -> float:
    """The estimated minutes of the variant's pre-training here: BERT-Mini's 50, scaled by layers × width² (the
    vocabulary's share of small models' time keeps it at 30% or more)."""
    with open(os.path.join(ROOT, "configs", f"{config_name(variant, 'machine')}_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    return 50.0 * max(0.3, config["num_hidden_layers"] * config["hidden_size"] ** 2 / (4 * 256 ** 2))


def pretrain_runs(variant: Variant, scale: str) -> list[Run]:
    """The variant's pre-training: one run here, the paper's two phases at the paper scale."""
    recipe, labels = RECIPES[scale], {"variant": variant.name}
    if scale == "paper":
        return paper_phases(variant, labels)
    return [Run(f"pretrain-{variant.name}", "bert_tf.pretraining.program",
                (*model_flags(variant, scale), f"--input_file={{run:records-{variant.records}}}/records.tfrecord",
                 "--output_dir={out}", "--do_train", f"--train_batch_size={recipe.batch}",
                 f"--num_train_steps={recipe.steps}", f"--num_warmup_steps={max(1, recipe.steps // 10)}",
                 f"--learning_rate={recipe.learning_rate}", f"--steps_per_loop={recipe.steps_per_loop}",
                 f"--save_checkpoints_steps={min(recipe.steps, 250)}", f"--mixed_precision={recipe.mixed_precision}",
                 *dynamic_flags(variant)),
                readers.nothing, ("export/bert_model.ckpt.index",), labels,
                20.0 if scale == "smoke" else machine_minutes(variant) * 60.0)]


def paper_phases(variant: Variant, labels: Mapping[str, object]) -> list[Run]:
    """Phase 1 (seq 128) and phase 2 (seq 512, from phase 1's export) with the shipped flagfiles; their steps,
    batch and learning rate are the flagfiles' (the paper's)."""
    name, common = config_name(variant, "paper"), (f"--vocab_file={VOCAB}", f"--objective={variant.objective}",
                                                    "--seed=12345", *dynamic_flags(variant))
    phase1, long_records = f"phase1-{variant.name}", f"records{PHASE_2[0]}-{variant.records}"
    return [Run(phase1, "bert_tf.pretraining.program",
                (f"--flagfile={{repo}}/configs/{name}_phase1.flags", *strategy_flags("paper"), *common,
                 f"--input_file={{run:records-{variant.records}}}/records.tfrecord", "--output_dir={out}"),
                readers.nothing, ("export/bert_model.ckpt.index",), labels, 4 * 24 * 3600.0, report=False),
            Run(f"pretrain-{variant.name}", "bert_tf.pretraining.program",
                (f"--flagfile={{repo}}/configs/{name}_phase2.flags", *strategy_flags("paper"), *common,
                 f"--input_file={{run:{long_records}}}/records.tfrecord", f"--init_checkpoint={{run:{phase1}}}/export",
                 "--output_dir={out}"),
                readers.nothing, ("export/bert_model.ckpt.index",), labels, 24 * 3600.0)]


def held_out_eval(variant: Variant, scale: str, key: str, suffix: str = "", *, other_study: bool = False) -> Run:
    """`run_pretraining --do_eval` of the variant's export on the held-out records masked by HELD_OUT_RULES[suffix];
    `other_study`: declared by a study other than the pretraining study, which holds the runs it reads."""
    ref = f"{PRETRAINING}/" if other_study else ""
    return Run(key, "bert_tf.pretraining.program",
               (*model_flags(variant, scale), f"--input_file={{run:{ref}heldout-{rule(*HELD_OUT_RULES[suffix])}}}"
                "/records.tfrecord", "--do_eval", f"--init_checkpoint={{run:{ref}pretrain-{variant.name}}}/export",
                f"--max_eval_steps={RECIPES[scale].held_out_batches}", "--output_dir={out}", *strategy_flags(scale)),
               held_out_figures(suffix, variant.objective), ("eval_results.txt",), {"variant": variant.name},
               10.0 if scale == "smoke" else 60.0)


def variant_runs(variant: Variant, scale: str) -> list[Run]:
    """The variant's pre-training and its held-out evaluations (80/10/10, and [MASK] only but for LTR, whose
    model predicts next tokens)."""
    runs = pretrain_runs(variant, scale)
    for suffix in HELD_OUT_RULES:
        if not (suffix and variant.objective == "ltr"):
            runs.append(held_out_eval(variant, scale, f"eval-{variant.name}{suffix.replace('_', '-')}", suffix))
    return runs
