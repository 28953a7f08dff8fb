"""Table 7: CoNLL-2003 NER, fine-tuned against feature-based (the encoder frozen), with our run_ner program.

MiniLM-L6-H384 (uncased) plus a tagging head drawn from the seed, fine-tuned on CoNLL-2003 train with the paper's
appendix recipe (lr 5e-5, batch 32, 3 epochs, warm-up 10%, seq 128, document context, first sub-token labels) by
our `run_ner` and by transformers' BertForTokenClassification in its own process (bench/_hf_ner.py) on the rows our
run cached, in the batch order our pipeline drew, its logits tagged by our program's code (bench/_ner_runs.py).
The feature-based rows freeze the encoder and feed the layers each row names into a two-layer BiLSTM (256 units
per direction here, 768 in the paper; lr 1e-3, 4 epochs: the paper gives no recipe) by `run_ner
--mode=feature_based`; the rows share the first row's cache of frozen per-layer tables. Every file is scored by
the same conlleval code; dev is valid.txt. The paper's rows are BERT-Base (cased, 12 layers) dev F1.
"""
from __future__ import annotations

import os
from typing import Mapping

from studies import readers
from studies.study import Claim, Column, Run, Study, Table, base_model, strategy_flags

LABELS = "O,B-LOC,I-LOC,B-MISC,I-MISC,B-ORG,I-ORG,B-PER,I-PER"  # run_ner's order of the training file's tags
FEATURES = {"sum_all": "Weighted sum all 6 layers", "embeddings": "Embeddings",
            "second_to_last": "Second-to-last hidden", "last": "Last hidden",
            "sum_last_four": "Weighted sum last four hidden", "concat_last_four": "Concat last four hidden"}
SMOKE_FEATURES = ("last", "concat_last_four")
SMOKE_DOCUMENTS = 3
LSTM_UNITS = {"smoke": 16, "machine": 256, "paper": 768}


def conll_figures(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """conlleval's overall precision, recall and F1 of a run's dev and test predictions files."""
    from bert_tf.tasks.ner import conlleval

    found = {}
    for split, name in (("dev", "eval_predictions.txt"), ("test", "test_predictions.txt")):
        result = conlleval.evaluate(conlleval.read_predictions(os.path.join(out, name)))
        found |= {f"{split}_precision": result.precision, f"{split}_recall": result.recall, f"{split}_f1": result.f1}
    return found


def seed_runs(seed: int, scale: str) -> list[Run]:
    smoke = scale == "smoke"
    data = "{run:data-conll}" if smoke else "{shared}/conll2003"
    init, ours = f"init-ner-s{seed}", f"finetune-s{seed}-ours"
    common = (f"--data_dir={data}", f"--init_checkpoint={{run:{init}}}", f"--label_list={LABELS}",
              "--do_train", "--do_eval", "--do_predict", "--max_seq_length=128", "--train_batch_size=32",
              "--warmup_proportion=0.1", f"--seed={seed}", "--output_dir={out}", *strategy_flags(scale),
              *(("--do_lower_case=false",) if scale == "paper" else ()))  # the paper's NER model is cased
    epochs = 1.0 if smoke else 3.0
    rows = f"{{glob:{ours}:features/ner-%s-*.tfrecord}}"
    outputs = ("eval_predictions.txt", "test_predictions.txt")
    minutes = 1 if smoke else 95
    runs = [
        Run(init, "studies.tools", ("seeded_head", f"--base={base_model(scale, cased=True)}", "--head=tagger",
                                    f"--label_list={LABELS}", f"--seed={seed}", "--out={out}"),
            readers.nothing, ("model.safetensors",), cost_s=5, report=False),
        Run(ours, "bert_tf.tasks.ner.program", (*common, "--learning_rate=5e-5", f"--num_train_epochs={epochs}"),
            conll_figures, outputs, {"features": "finetune", "side": "ours", "seed": seed}, minutes * 60.0),
        Run(f"order-ner-s{seed}", "bench._batch_order",
            (f"--train_file={rows % 'train'}", f"--seed={seed}", "--batch_size=32", f"--epochs={epochs}",
             "--out={out}"), readers.nothing, ("order.npy",), cost_s=10, report=False),
        Run(f"finetune-s{seed}-hf_train", "bench._hf_ner",
            (f"--init={{run:{init}}}", f"--train={rows % 'train'}", f"--eval={rows % 'eval'}",
             f"--predict={rows % 'predict'}", f"--seed={seed}", f"--order={{run:order-ner-s{seed}}}/order.npy",
             "--learning_rate=5e-5", f"--num_train_epochs={epochs}", "--out={out}"),
            readers.nothing, ("logits-eval.npy", "logits-predict.npy"), cost_s=minutes * 90.0, report=False),
        Run(f"finetune-s{seed}-hf", "bench._ner_runs",
            (f"--logits_dir={{run:finetune-s{seed}-hf_train}}", f"--ours_dir={{run:{ours}}}", f"--data_dir={data}",
             f"--vocab_file={{run:{init}}}/vocab.txt", f"--label_list={LABELS}", "--out={out}"),
            conll_figures, outputs, {"features": "finetune", "side": "hf", "seed": seed}, cost_s=30)]
    if scale == "paper":
        runs = runs[:2]  # the Hugging Face side is this machine's parity check, not the paper's (a CPU peer)
    first = None
    for features in SMOKE_FEATURES if smoke else FEATURES:
        key = f"{features}-s{seed}-ours"
        cache = "{out}/frozen" if first is None else f"{{run:{first}}}/frozen"
        runs.append(Run(key, "bert_tf.tasks.ner.program",
                        (*common, "--mode=feature_based", f"--features={features}",
                         f"--lstm_units={LSTM_UNITS[scale]}", "--max_words=128", "--learning_rate=1e-3",
                         f"--num_train_epochs={1.0 if smoke else 4.0}", f"--feature_cache_dir={cache}"),
                        conll_figures, outputs, {"features": features, "side": "ours", "seed": seed},
                        (1 if smoke else 17 if first else 35) * 60.0))
        first = first or key
    return runs


def runs(scale: str, seeds) -> list[Run]:
    found = []
    if scale == "smoke":
        found.append(Run("data-conll", "studies.tools",
                         ("conll_subset", "--src={shared}/conll2003", f"--documents={SMOKE_DOCUMENTS}", "--out={out}"),
                         readers.nothing, ("train.txt", "valid.txt", "test.txt"), cost_s=1, report=False))
    for seed in seeds:
        found += seed_runs(seed, scale)
    return found


PAPER = {("finetune", "ours"): {"dev_f1": 96.4}, ("embeddings", "ours"): {"dev_f1": 91.0},
         ("second_to_last", "ours"): {"dev_f1": 95.6}, ("last", "ours"): {"dev_f1": 94.9},
         ("sum_last_four", "ours"): {"dev_f1": 95.9}, ("concat_last_four", "ours"): {"dev_f1": 96.1},
         ("sum_all", "ours"): {"dev_f1": 95.5}}
PAPER_ORDER = ("embeddings", "second_to_last", "last", "sum_last_four", "concat_last_four", "sum_all")
NAMES = {("finetune", "ours"): "Fine-tuning (ours)", ("finetune", "hf"): "Fine-tuning (Hugging Face)"}
NAMES |= {(features, "ours"): f"Feature-based: {FEATURES[features]}" for features in PAPER_ORDER}

STUDY = Study(
    name="table7", title="Table 7: CoNLL-2003 NER, fine-tuning against feature-based",
    paper="Devlin et al. 2019, Table 7 (§5.3)",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("features", "side"),
                columns=(Column("dev_f1", "dev F1"), Column("test_f1", "test F1")),
                paper=PAPER,
                claims=(Claim("fine-tuning beats the best feature-based row (concat last four)", "dev_f1",
                              ("finetune", "ours"), ("concat_last_four", "ours")),
                        Claim("concatenating the last four layers beats the last layer alone", "dev_f1",
                              ("concat_last_four", "ours"), ("last", "ours")),
                        Claim("the last hidden layer beats the embeddings alone", "dev_f1",
                              ("last", "ours"), ("embeddings", "ours"))),
                row_names=NAMES),
    seeds={"smoke": 1, "machine": 1, "paper": 5})
