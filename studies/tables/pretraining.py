"""Pre-training the BERT-Mini variants of Tables 5 and 8 and the sizes of Table 6: one run_pretraining run per
variant, scored on held-out documents.

BERT-Mini (4 layers, hidden 256) pre-trained by our `run_pretraining` from static-masked records that our
`create_pretraining_data` writes from the shared wiki and books (the multiple-choice proxy set's book left out;
`prepare_corpus` puts document i in shard i mod 20 and shard 19 is held out), 3,000 steps of 32 sequences of 128
tokens at lr 2e-4 in mixed bfloat16 here, the same records, steps and seed for every variant but what the variant
changes (Table 6's sizes: the model's layers, width and heads). Each export is evaluated by `run_pretraining
--do_eval` on 100 batches of held-out instances: masked with the original's 80/10/10 rule (the column Table 6 calls
LM perplexity), and with every target shown as [MASK], what context alone predicts, comparable across the masking
rows (an LTR model's figure is its next-token perplexity, not comparable with a masked LM's). The fine-tuning tables
read these runs' exports. At the paper scale each variant is a BERT-Base (the sizes the paper's) pre-trained by the
paper's two phases (studies/pretrain_runs.py).
"""
from __future__ import annotations

from studies import mini_bert, readers
from studies.mini_bert import RECIPES, VARIANTS
from studies.pretrain_runs import HELD_OUT_RULES, PHASE_2, records_run, variant_runs
from studies.study import Column, Run, Study, Table

BOOKS = ",".join(f"{{shared}}/corpus/books/{name}" for name in ("1342-0.txt", "16-0.txt", "1661-0.txt",
                                                                  "2701-0.txt", "84-0.txt"))


def runs(scale: str, seeds) -> list[Run]:
    recipe = RECIPES[scale]
    corpus = recipe.corpus if scale == "smoke" else f"{recipe.corpus.split(',')[0]},{BOOKS}"
    variants = [VARIANTS[n] for n in mini_bert.SMOKE_VARIANTS] if scale == "smoke" else \
        [v for v in VARIANTS.values() if v.pretrained and scale in v.scales]
    found = [Run("corpus", "bert_tf.pretraining.prepare_corpus",
                 (f"--input={corpus}", "--output_dir={out}", "--num_shards=20", "--min_chars_per_doc=300"),
                 readers.nothing, ("corpus-*.txt",), cost_s=5 if scale == "smoke" else 120, report=False)]
    for suffix, rates in HELD_OUT_RULES.items():
        found.append(records_run(f"heldout-{mini_bert.rule(*rates)}", mini_bert.HELD_OUT_SHARD, rates, 1, scale))
    for name in dict.fromkeys(v.records for v in variants):
        rates = None if name == "unmasked" else next((v.mask_token_prob, v.random_token_prob) for v in variants
                                                     if v.records == name)
        found.append(records_run(f"records-{name}", mini_bert.TRAINING_SHARDS, rates, recipe.dupe_factor, scale))
        if scale == "paper":  # phase 2's longer sequences
            found.append(records_run(f"records{PHASE_2[0]}-{name}", mini_bert.TRAINING_SHARDS, rates,
                                     recipe.dupe_factor, scale, PHASE_2))
    for variant in variants:
        found += variant_runs(variant, scale)
    return found


STUDY = Study(
    name="pretraining", title="Pre-training the BERT-Mini variants and sizes: held-out masked-LM perplexity",
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
