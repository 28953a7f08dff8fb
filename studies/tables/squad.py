"""SQuAD v1.1 and v2.0, our run_squad against Hugging Face on the same weights, windows and batch order.

No SQuAD train set is in the shared data, so each dev file is split by article (`studies.tools squad_split`): the
first half trains (each question's first answer), the rest is predicted and scored with the official figures.
MiniLM-L6-H384 plus a span head drawn from the seed is fine-tuned by our `run_squad` program and by transformers'
BertForQuestionAnswering in its own process (bench/_hf_squad.py), which trains on the windows our run cached, in
the batch order our pipeline drew; its logits are turned into predictions and figures by our program's
`--raw_logits_file` replay, so both sides share the post-processing and the official evaluation. The original
recipe (lr 3e-5, batch 32, 2 epochs, seq 384, stride 128) teaches MiniLM spans on v1.1 but not on v2.0, where 53%
of the training windows target [CLS] and both sides learn only "no answer" (HasAns F1 about 0), nor does lr 1e-4.
The third v2.0 recipe adds to training the 13 articles of the v1.1 dev file that the v2.0 dev file lacks
(answerable questions only, no article shared with the evaluated half; 28% of the training questions are then
unanswerable) at lr 5e-5.
"""
from __future__ import annotations

from studies import readers
from studies.study import Column, Run, Study, Table, base_model, strategy_flags

DEV = {"v1.1": "dev-v1.1.json", "v2.0": "dev-v2.0.json"}
# recipe label: (learning rate, key infix, extra training articles)
RECIPES = {"lr 3e-5": ("3e-5", "", False), "lr 1e-4": ("1e-4", "-lr1e-4", False),
           "lr 5e-5, + 13 v1.1 articles": ("5e-5", "-plus", True)}
PAPER_RECIPE = "lr 3e-5"
SMOKE_QUESTIONS = 24  # each half's first questions at the smoke scale
FIGURES = {"exact_match": "exact_match", "exact": "exact_match", "f1": "f1", "HasAns_f1": "has_answer_f1",
           "NoAns_f1": "no_answer_f1", "best_f1": "best_f1"}


def figures(out: str, folders) -> dict[str, float]:
    """eval_results.json's official figures, v1.1's and v2.0's under one set of names."""
    found = readers.json_results("eval_results.json")(out, folders)
    return {new: found[old] for old, new in FIGURES.items() if old in found}


def version_runs(version: str, recipe: str, seed: int, scale: str) -> list[Run]:
    """Ours, our batch order, Hugging Face and its replay, for one version, recipe and seed."""
    smoke = scale == "smoke"
    learning_rate, infix, extra = RECIPES[recipe]
    tag = f"{version}{infix}-s{seed}"
    task = "squad_v2" if version == "v2.0" else "squad"
    window = ["--max_seq_length=128", "--doc_stride=64"] if smoke else ["--max_seq_length=384", "--doc_stride=128"]
    data, epochs = f"{{run:data-{version}{'-plus' if extra else ''}}}", 1.0 if smoke else 2.0
    negative = ["--version_2_with_negative"] if version == "v2.0" else []
    predict = [f"--predict_file={data}/eval.json", *window, *negative]
    training = [f"--learning_rate={learning_rate}", "--train_batch_size=32", f"--num_train_epochs={epochs}",
              "--warmup_proportion=0.1", f"--seed={seed}"]
    init, ours, hf = f"init-squad-s{seed}", f"{tag}-ours", f"{tag}-hf_train"
    windows = f"{{glob:{ours}:features/{task}-%s-*.tfrecord}}"
    row = {"version": version, "recipe": recipe, "seed": seed}
    cost = 60.0 if smoke else (70 if extra else 40) * 60.0
    runs = [
        Run(ours, "bert_tf.tasks.squad.program",
            ("--do_train", f"--train_file={data}/train.json", "--do_predict", *predict,
             f"--init_checkpoint={{run:{init}}}", *training, "--output_dir={out}", *strategy_flags(scale)),
            figures, ("eval_results.json", "raw_logits.jsonl"), row | {"side": "ours"}, cost),
        Run(f"order-{tag}", "bench._batch_order",
            (f"--train_file={windows % 'train'}", f"--seed={seed}", "--batch_size=32", f"--epochs={epochs}",
             "--out={out}"), readers.nothing, ("order.npy",), cost_s=10, report=False),
        Run(hf, "bench._hf_squad",
            (f"--init={{run:{init}}}", f"--train={windows % 'train'}", f"--predict={windows % 'predict'}",
             f"--order={{run:order-{tag}}}/order.npy", *training, "--out={out}"),
            readers.nothing, ("raw_logits.jsonl", "result.json"), cost_s=cost * 2, report=False),
        Run(f"{tag}-hf", "bert_tf.tasks.squad.program",
            (f"--raw_logits_file={{run:{hf}}}/raw_logits.jsonl", *predict, f"--vocab_file={{run:{init}}}/vocab.txt",
             "--output_dir={out}"),
            figures, ("eval_results.json",), row | {"side": "hf"}, cost_s=30)]
    return runs[:1] if scale == "paper" else runs  # Hugging Face: this machine's parity check, a CPU peer


def runs(scale: str, seeds) -> list[Run]:
    smoke = scale == "smoke"
    found = []
    for version, dev in (*DEV.items(), ("v2.0-plus", DEV["v2.0"])):
        if smoke and version == "v2.0":
            continue  # the smoke plan runs v2.0 with the extra articles only
        extra = ("--extra_train={shared}/squad/dev-v1.1.json",) if version.endswith("-plus") else ()
        found.append(Run(f"data-{version}", "studies.tools",
                         ("squad_split", f"--src={{shared}}/squad/{dev}", "--out={out}", *extra,
                          *([f"--max_questions={SMOKE_QUESTIONS}"] if smoke else [])),
                         readers.nothing, ("train.json", "eval.json"), cost_s=2, report=False))
    for seed in seeds:
        found.append(Run(f"init-squad-s{seed}", "studies.tools",
                         ("seeded_head", f"--base={base_model(scale)}", "--head=span", f"--seed={seed}", "--out={out}"),
                         readers.nothing, ("model.safetensors",), cost_s=5, report=False))
        found += version_runs("v1.1", PAPER_RECIPE, seed, scale)
    for recipe in (("lr 5e-5, + 13 v1.1 articles",) if smoke else RECIPES):
        found += version_runs("v2.0", recipe, 1, scale)
    return found


# The paper's BERT-Base v1.1 dev figures (Table 2) and BERT-Large v2.0 dev figures (Table 3; no Base v2.0 row)
# beside our MiniLM's on half the dev articles: a scale, not a target.
PAPER = {("v1.1", PAPER_RECIPE, "ours"): {"exact_match": 80.8, "f1": 88.5},
         ("v2.0", PAPER_RECIPE, "ours"): {"exact_match": 78.7, "f1": 81.9}}

STUDY = Study(
    name="squad", title="SQuAD v1.1 and v2.0: our run_squad against Hugging Face, same weights and windows",
    paper="Devlin et al. 2019, Table 2 (SQuAD v1.1) and Table 3 (SQuAD v2.0)",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("version", "recipe", "side"),
                columns=(Column("exact_match", "EM"), Column("f1", "F1"), Column("has_answer_f1", "HasAns F1"),
                         Column("no_answer_f1", "NoAns F1"), Column("best_f1", "best F1")),
                paper=PAPER),
    seeds={"smoke": 1, "machine": 3, "paper": 5})
