"""SWAG (multiple choice) at BERT-Mini scale: the pretraining study's MLM + NSP model against random init, on a proxy.

SWAG itself is not in the shared data (nothing is downloaded here). Our `proxy_set` program
(bert_tf.tasks.multiple_choice.proxy_set) builds a proxy in SWAG's layout from the one book kept out of
pre-training (Anna Karenina: a context sentence, its true next sentence and three distractor sentences of the same
book; 5,085 training and 601 dev examples, split by chapter; chance is 25%). Our `run_swag`
(bert_tf.tasks.multiple_choice.program) fine-tunes the pretraining study's MLM + NSP BERT-Mini export, and the same
config from random init, with the ablation recipe (lr 1e-4, batch 16, 2 epochs, warm-up 10%, seq 128) and scores
dev accuracy. The paper's figure is BERT-Base fine-tuned on SWAG itself (dev 81.6, Table 4): a scale reference, not
a target.
"""
from __future__ import annotations

from studies import mini_bert
from studies.mini_bert import VARIANTS
from studies.study import Claim, Column, Run, Study, Table

ROWS = ("mlm_nsp", "random_init")
TASKS = {"swag": 18.0}  # task: machine minutes per run


def runs(scale: str, seeds) -> list[Run]:
    return mini_bert.finetune_plan(scale, seeds, ROWS, TASKS, smoke=(ROWS, ("swag",)))


STUDY = Study(
    name="swag", title="SWAG (multiple choice): pre-trained against random init on a proxy set",
    paper="Devlin et al. 2019, Table 4 (§4.4), BERT-Base dev",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("variant",), columns=(Column("swag_accuracy", "SWAG-proxy dev acc"),),
                paper={("mlm_nsp",): {"swag_accuracy": 81.6}},
                claims=(Claim("pre-training beats random initialisation (SWAG)", "swag_accuracy", ("mlm_nsp",),
                              ("random_init",)),),
                row_names={(name,): VARIANTS[name].row for name in ROWS}),
    seeds={"smoke": 1, "machine": 2, "paper": 5})
