"""Table 8: the masking procedure's replacement rates (and dynamic masking) ablated at BERT-Mini scale.

The BERT-Mini variants of the pretraining study that differ only in what a chosen position shows during
pre-training ([MASK] / the same token / a random token: 80/10/10 as BERT, 100/0/0, 80/0/20, 80/20/0, 0/20/80,
0/0/100; the rates of the static records, or RoBERTa's masks drawn anew per batch), each fine-tuned on CoNLL-2003
(first 300 training documents, first 25 dev documents) by our `run_ner`: fine-tuned (lr 1e-4, 3 epochs), and
feature-based on the last four layers concatenated, frozen, into a BiLSTM of 64 units (lr 1e-3, 4 epochs); and on
MRPC as the classification column (the paper's is MNLI, not run here). The paper's rows are BERT-Base after 1M
steps; ours after 3,000.
"""
from __future__ import annotations

from studies import mini_bert
from studies.mini_bert import VARIANTS
from studies.study import Claim, Column, Run, Study, Table

ROWS = ("mlm_nsp", "mask100", "mask80_rnd20", "mask80_same20", "same20_rnd80", "rnd100", "dynamic")
TASKS = {"MRPC": 1.5, "ner_ft": 5.0, "ner_fb": 2.0}  # task: machine minutes per run


def runs(scale: str, seeds) -> list[Run]:
    return mini_bert.finetune_plan(scale, seeds, ROWS, TASKS, smoke=(("mlm_nsp", "mask100"), ("ner_fb",)))


# MASK / SAME / RND rates: the paper's dev MNLI, NER fine-tuned and NER feature-based (last four layers) figures.
PAPER = {("mlm_nsp",): {"ner_ft_f1": 95.4, "ner_fb_f1": 94.9}, ("mask100",): {"ner_ft_f1": 94.9, "ner_fb_f1": 94.0},
         ("mask80_rnd20",): {"ner_ft_f1": 95.2, "ner_fb_f1": 94.6},
         ("mask80_same20",): {"ner_ft_f1": 95.2, "ner_fb_f1": 94.7},
         ("same20_rnd80",): {"ner_ft_f1": 94.8, "ner_fb_f1": 94.6},
         ("rnd100",): {"ner_ft_f1": 94.9, "ner_fb_f1": 94.6}}

STUDY = Study(
    name="table8", title="Table 8: ablation of the masking procedure",
    paper="Devlin et al. 2019, Table 8 (Appendix C.2), BERT-Base dev",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("variant",),
                columns=(Column("mrpc_accuracy", "MRPC acc"), Column("ner_ft_f1", "NER fine-tuned F1"),
                         Column("ner_fb_f1", "NER feature-based F1")),
                paper=PAPER,
                claims=(Claim("80/10/10 beats [MASK] only for the feature-based NER", "ner_fb_f1", ("mlm_nsp",),
                              ("mask100",)),
                        Claim("80/10/10 beats [MASK] only for the fine-tuned NER", "ner_ft_f1", ("mlm_nsp",),
                              ("mask100",)),
                        Claim("80/10/10 beats random tokens only (0/0/100) for the feature-based NER", "ner_fb_f1",
                              ("mlm_nsp",), ("rnd100",))),
                row_names={(name,): VARIANTS[name].row for name in ROWS}),
    seeds={"smoke": 1, "machine": 2, "paper": 5})
