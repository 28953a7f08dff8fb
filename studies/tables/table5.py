"""Table 5: the pre-training tasks (next-sentence prediction, a left-to-right LM) ablated at BERT-Mini scale.

The BERT-Mini variants of the pretraining study (MLM + NSP as BERT; No NSP; LTR & No NSP, which keeps its causal
mask when fine-tuned; and no pre-training at all) each fine-tuned by our programs with one recipe (lr 1e-4,
batch 32, 2 epochs, warm-up 10%) on MRPC (first 2,000 training pairs), SST-2 (first 5,000 sentences, seq 64) and
SQuAD v1.1 (the dev file's article split, first 600 questions of each half, seq 128, stride 96). MNLI and QNLI,
the paper's other columns, are not run here. The paper's rows are BERT-Base after 1M steps; ours after 3,000.
"""
from __future__ import annotations

from studies import mini_bert
from studies.mini_bert import VARIANTS
from studies.study import Claim, Column, Run, Study, Table

ROWS = ("mlm_nsp", "mlm", "ltr", "random_init")
TASKS = {"MRPC": 1.5, "SST-2": 2.0, "squad": 2.0}  # task: machine minutes per run


def runs(scale: str, seeds) -> list[Run]:
    return mini_bert.finetune_plan(scale, seeds, ROWS, TASKS, smoke=(("mlm_nsp", "random_init"), ("MRPC",)))


PAPER = {("mlm_nsp",): {"mrpc_accuracy": 86.7, "sst2_accuracy": 92.7, "squad_f1": 88.5},
         ("mlm",): {"mrpc_accuracy": 86.5, "sst2_accuracy": 92.6, "squad_f1": 87.9},
         ("ltr",): {"mrpc_accuracy": 77.5, "sst2_accuracy": 92.1, "squad_f1": 77.8}}

STUDY = Study(
    name="table5", title="Table 5: ablation of the pre-training tasks",
    paper="Devlin et al. 2019, Table 5 (§5.1), BERT-Base dev",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("variant",),
                columns=(Column("mrpc_accuracy", "MRPC acc"), Column("sst2_accuracy", "SST-2 acc"),
                         Column("squad_f1", "SQuAD F1")),
                paper=PAPER,
                claims=(Claim("NSP helps SQuAD (MLM + NSP above No NSP)", "squad_f1", ("mlm_nsp",), ("mlm",)),
                        Claim("NSP helps MRPC", "mrpc_accuracy", ("mlm_nsp",), ("mlm",)),
                        Claim("a bidirectional LM beats left-to-right on SQuAD", "squad_f1", ("mlm",), ("ltr",)),
                        Claim("a bidirectional LM beats left-to-right on MRPC", "mrpc_accuracy", ("mlm",), ("ltr",)),
                        Claim("pre-training beats random initialisation (SQuAD)", "squad_f1", ("mlm_nsp",),
                              ("random_init",))),
                row_names={(name,): VARIANTS[name].row for name in ROWS}),
    seeds={"smoke": 1, "machine": 2, "paper": 5})
