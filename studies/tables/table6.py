"""Table 6: the model's size (layers L, hidden width H, attention heads A), pre-trained and fine-tuned the same way.

Four sizes of Google's miniature BERTs, each pre-trained by the pretraining study exactly as its BERT-Mini
(MLM + NSP, 80/10/10; the same records, 3,000 steps of 32 × 128 tokens, lr 2e-4, seed): L=2/H=128 (BERT-Tiny),
L=2/H=256, L=4/H=256 (BERT-Mini, the pretraining study's `mlm_nsp`) and L=6/H=256. Columns as the paper's:
the held-out masked-LM perplexity (80/10/10 masking, 100 batches of the held-out shard), and dev accuracy on
MRPC (first 2,000 training pairs) and SST-2 (first 5,000 sentences, seq 64) fine-tuned with Table 5's recipe (lr
1e-4, batch 32, 2 epochs, warm-up 10%); MNLI, the paper's third column, is not run here. At the paper scale the
rows are the paper's own sizes (L/H/A 3/768/12, 6/768/3, 6/768/12, 12/768/12 = BERT-Base, 12/1024/16, 24/1024/16 =
BERT-Large) with the paper's two pre-training phases; the paper's BERT-Base row reads LM ppl 3.99, MNLI-m 84.4,
MRPC 86.7, SST-2 92.9.
"""
from __future__ import annotations

from studies import mini_bert
from studies.mini_bert import VARIANTS
from studies.pretrain_runs import held_out_eval
from studies.study import Claim, Column, Run, Study, Table

ROWS = {"smoke": ("L2_H128_A2",), "machine": ("L2_H128_A2", "L2_H256_A4", "mlm_nsp", "L6_H256_A4"),
        "paper": ("L3_H768_A12", "L6_H768_A3", "L6_H768_A12", "mlm_nsp", "L12_H1024_A16", "L24_H1024_A16")}
TASKS = {"MRPC": 1.5, "SST-2": 2.0}  # task: machine minutes per run


def runs(scale: str, seeds) -> list[Run]:
    rows = ROWS[scale]
    found = [held_out_eval(VARIANTS[name], scale, f"ppl-{name}", other_study=True) for name in rows]
    return found + mini_bert.finetune_plan(scale, seeds, rows, TASKS, smoke=(rows, ("MRPC",)))


# The paper's Table 6 (dev; LM perplexity of held-out training data): its rows are the paper scale's.
PAPER = {("L3_H768_A12",): {"perplexity": 5.84, "mrpc_accuracy": 79.8, "sst2_accuracy": 88.4},
         ("L6_H768_A3",): {"perplexity": 5.24, "mrpc_accuracy": 82.2, "sst2_accuracy": 90.7},
         ("L6_H768_A12",): {"perplexity": 4.68, "mrpc_accuracy": 84.8, "sst2_accuracy": 91.3},
         ("L12_H1024_A16",): {"perplexity": 3.54, "mrpc_accuracy": 86.9, "sst2_accuracy": 93.3},
         ("L24_H1024_A16",): {"perplexity": 3.23, "mrpc_accuracy": 87.8, "sst2_accuracy": 93.7}}
NAMES = {(name,): VARIANTS[name].row for name in (*ROWS["machine"], *ROWS["paper"])} | \
    {("mlm_nsp",): "L=4, H=256, A=4 (BERT-Mini; BERT-Base, L=12, H=768, A=12, at the paper scale)"}

STUDY = Study(
    name="table6", title="Table 6: ablation over the model size",
    paper="Devlin et al. 2019, Table 6 (§5.2), dev",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("variant",),
                columns=(Column("perplexity", "LM ppl", digits=2), Column("mrpc_accuracy", "MRPC acc"),
                         Column("sst2_accuracy", "SST-2 acc")),
                paper=PAPER,
                claims=(Claim("a deeper model has a lower LM perplexity (L=4 against L=2, H=256)", "perplexity",
                              ("mlm_nsp",), ("L2_H256_A4",), lower_is_better=True),
                        Claim("a deeper model has a lower LM perplexity (L=6 against L=2, H=256)", "perplexity",
                              ("L6_H256_A4",), ("L2_H256_A4",), lower_is_better=True),
                        Claim("a wider model has a lower LM perplexity (H=256 against H=128, L=2)", "perplexity",
                              ("L2_H256_A4",), ("L2_H128_A2",), lower_is_better=True),
                        Claim("a larger model is more accurate on MRPC (L=4 against L=2, H=256)", "mrpc_accuracy",
                              ("mlm_nsp",), ("L2_H256_A4",)),
                        Claim("a larger model is more accurate on MRPC (L=6 against L=2, H=256)", "mrpc_accuracy",
                              ("L6_H256_A4",), ("L2_H256_A4",)),
                        Claim("a larger model is more accurate on MRPC (H=256 against H=128, L=2)", "mrpc_accuracy",
                              ("L2_H256_A4",), ("L2_H128_A2",)),
                        Claim("a larger model is more accurate on SST-2 (L=4 against L=2, H=256)", "sst2_accuracy",
                              ("mlm_nsp",), ("L2_H256_A4",)),
                        Claim("a larger model is more accurate on SST-2 (L=6 against L=2, H=256)", "sst2_accuracy",
                              ("L6_H256_A4",), ("L2_H256_A4",)),
                        Claim("a larger model is more accurate on SST-2 (H=256 against H=128, L=2)", "sst2_accuracy",
                              ("L2_H256_A4",), ("L2_H128_A2",))),
                row_names=NAMES),
    seeds={"smoke": 1, "machine": 2, "paper": 5})
