"""Pre-training the BERT-Mini variants of Tables 5 and 8: one run_pretraining run per variant, scored on held-out
documents.

BERT-Mini (4 layers, hidden 256) pre-trained by our `run_pretraining` from static-masked records that our
`create_pretraining_data` writes from the shared wiki and books (the multiple-choice proxy set's book left out;
`prepare_corpus` puts document i in shard i mod 20 and shard 19 is held out), 3,000 steps of 32 sequences of 128
tokens at lr 2e-4 in mixed bfloat16 here, the same records, steps and seed for every variant but what the variant
changes. Each export is evaluated by `run_pretraining --do_eval` on 100 batches of held-out instances: masked with
the original's 80/10/10 rule (the column Table 6 calls LM perplexity), and with every target shown as [MASK], what
context alone predicts, comparable across the masking rows (an LTR model's figure is its next-token perplexity,
not comparable with a masked LM's). The fine-tuning tables read these runs' exports.
"""
from __future__ import annotations

import math
import os
from typing import Mapping

from studies import mini_bert, readers
from studies.mini_bert import RECIPES, VARIANTS, Variant
from studies.study import Column, Run, Study, Table

BOOKS = ",".join(f"{{shared}}/corpus/books/{name}" for name in ("1342-0.txt", "16-0.txt", "1661-0.txt",
                                                                  "2701-0.txt", "84-0.txt"))
HELD_OUT_RULES = {"": (0.8, 0.1), "_all_mask": (1.0, 0.0)}


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


def records_run(name: str, source: str, rates: tuple[float, float] | None, dupe_factor: int, scale: str) -> Run:
    """create_pretraining_data (the original's faithful mode) at the given (mask, random) rates, or unmasked
    (rates None: masks drawn in training by --dynamic_masking)."""
    masking = ("--masking=none",) if rates is None else (f"--mask_token_prob={rates[0]}",
                                                         f"--random_token_prob={rates[1]}")
    return Run(name, "bert_tf.pretraining.create_pretraining_data",
               (f"--input_file={source}", "--output_file={out}/records.tfrecord", f"--vocab_file={mini_bert.VOCAB}",
                "--do_lower_case", "--max_seq_length=128", "--max_predictions_per_seq=20",
                f"--dupe_factor={dupe_factor}", "--random_seed=12345", *masking),
               readers.nothing, ("records.tfrecord",), cost_s=5 if scale == "smoke" else 120, report=False)


def model_flags(variant: Variant) -> tuple[str, ...]:
    return (f"--bert_config_file={mini_bert.CONFIG}", f"--vocab_file={mini_bert.VOCAB}", "--max_seq_length=128",
            "--max_predictions_per_seq=20", f"--objective={variant.objective}", "--seed=12345", "--eval_batch_size=32")


def variant_runs(variant: Variant, scale: str) -> list[Run]:
    """The variant's pre-training and its held-out evaluations."""
    recipe = RECIPES[scale]
    dynamic = ("--dynamic_masking", f"--mask_token_prob={variant.mask_token_prob}",
               f"--random_token_prob={variant.random_token_prob}") if variant.dynamic else ()
    runs = [Run(f"pretrain-{variant.name}", "bert_tf.pretraining.program",
                (*model_flags(variant), f"--input_file={{run:records-{variant.records}}}/records.tfrecord",
                 "--output_dir={out}", "--do_train", f"--train_batch_size={recipe.batch}",
                 f"--num_train_steps={recipe.steps}", f"--num_warmup_steps={max(1, recipe.steps // 10)}",
                 f"--learning_rate={recipe.learning_rate}", f"--steps_per_loop={recipe.steps_per_loop}",
                 f"--save_checkpoints_steps={min(recipe.steps, 250)}", f"--mixed_precision={recipe.mixed_precision}",
                 *dynamic),
                readers.nothing, ("export/bert_model.ckpt.index",), {"variant": variant.name},
                20.0 if scale == "smoke" else 50 * 60.0)]
    for suffix, rates in HELD_OUT_RULES.items():
        if suffix and variant.objective == "ltr":
            continue  # an LTR model predicts next tokens: [MASK] rates do not apply
        runs.append(Run(f"eval-{variant.name}{suffix.replace('_', '-')}", "bert_tf.pretraining.program",
                        (*model_flags(variant), f"--input_file={{run:heldout-{mini_bert.rule(*rates)}}}/records.tfrecord",
                         "--do_eval", f"--init_checkpoint={{run:pretrain-{variant.name}}}/export",
                         f"--max_eval_steps={recipe.held_out_batches}", "--output_dir={out}"),
                        held_out_figures(suffix, variant.objective), ("eval_results.txt",),
                        {"variant": variant.name}, 10.0 if scale == "smoke" else 60.0))
    return runs


def runs(scale: str, seeds) -> list[Run]:
    recipe = RECIPES[scale]
    corpus = recipe.corpus if scale == "smoke" else f"{recipe.corpus.split(',')[0]},{BOOKS}"
    variants = [VARIANTS[n] for n in mini_bert.SMOKE_VARIANTS] if scale == "smoke" else \
        [v for v in VARIANTS.values() if v.pretrained]
    found = [Run("corpus", "bert_tf.pretraining.prepare_corpus",
                 (f"--input={corpus}", "--output_dir={out}", "--num_shards=20", "--min_chars_per_doc=300"),
                 readers.nothing, ("corpus-*.txt",), cost_s=5 if scale == "smoke" else 120, report=False)]
    for suffix, rates in HELD_OUT_RULES.items():
        found.append(records_run(f"heldout-{mini_bert.rule(*rates)}", mini_bert.HELD_OUT_SHARD, rates, 1, scale))
    for name in dict.fromkeys(v.records for v in variants):
        rates = None if name == "unmasked" else next((v.mask_token_prob, v.random_token_prob) for v in variants
                                                     if v.records == name)
        found.append(records_run(f"records-{name}", mini_bert.TRAINING_SHARDS, rates, recipe.dupe_factor, scale))
    for variant in variants:
        found += variant_runs(variant, scale)
    return found


STUDY = Study(
    name="pretraining", title="Pre-training the BERT-Mini variants: held-out masked-LM perplexity",
    paper="Devlin et al. 2019, §3.1 and Appendix A.2 (the procedure); the variants of Tables 5 and 8",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("variant",),
                columns=(Column("perplexity", "ppl, 80/10/10"), Column("perplexity_all_mask", "ppl, [MASK] only"),
                         Column("masked_lm_accuracy", "MLM acc", True),
                         Column("masked_lm_accuracy_all_mask", "MLM acc, [MASK] only", True),
                         Column("next_sentence_accuracy", "NSP acc", True)),
                row_names={(v.name,): v.row for v in VARIANTS.values() if v.pretrained}),
    seeds={"smoke": 1, "machine": 1, "paper": 1})
