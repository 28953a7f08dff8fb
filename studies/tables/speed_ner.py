"""CoNLL-2003 NER fine-tuning speed: our run_ner against Hugging Face, training sentences (rows) per second.

MiniLM-L6-H384 with a tagging head drawn from seed 1 (the 9 CoNLL tags), seq 128, batch 32, lr 5e-5, on 2 CPU
cores; each contender a fresh process with its library's thread defaults, ours then Hugging Face within a round,
rounds repeated. Ours (`run_ner`, training only, document context: the program's default) runs 10 warm-up + 40
timed steps in loops of 10 over the 14,042 training rows, its rate the loops' own "seq/s" after the warm-up;
Hugging Face (BertForTokenClassification, torch, sdpa, bench/_hf_ner.py --speed) trains on the rows our run
cached, in our batch order. No paper figure: the paper reports no CPU fine-tuning speed.
"""
from __future__ import annotations

from studies import readers, speed_readers
from studies.study import Claim, Column, Run, Study, Table

LABELS = "O,B-LOC,I-LOC,B-MISC,I-MISC,B-ORG,I-ORG,B-PER,I-PER"  # run_ner's order of the training file's tags
TRAIN_ROWS, SMOKE_ROWS = 14042, 28  # training rows: all, and the first 2 documents'
WARMUP, TIMED, LOOP = 10, 40, 10  # bench_ner.py --phase=speed's defaults
NAMES = {"ours": "ours (run_ner)", "hf": "Hugging Face (BertForTokenClassification, torch)"}


def round_runs(r: int, data: str, smoke: bool) -> list[Run]:
    """Ours (training only), then Hugging Face on the rows ours cached."""
    warmup, timed, loop = (1, 1, 1) if smoke else (WARMUP, TIMED, LOOP)
    epochs = (warmup + timed + 0.5) * 32 / (SMOKE_ROWS if smoke else TRAIN_ROWS)
    rows = f"{{glob:ours-r{r}:features/ner-train-*.tfrecord}}"
    found = [Run(f"ours-r{r}", "bert_tf.tasks.ner.program",
                 (f"--data_dir={data}", "--init_checkpoint={run:init}", f"--label_list={LABELS}", "--do_train",
                  "--max_seq_length=128", "--train_batch_size=32", "--learning_rate=5e-5",
                  f"--num_train_epochs={epochs:.6g}", "--warmup_proportion=0.1", "--seed=1",
                  f"--steps_per_loop={loop}", "--output_dir={out}"),
                 speed_readers.program_speed(warmup, loop), ("train/events.out.tfevents.*",),
                 {"contender": "ours", "round": r}, 25 if smoke else 120)]
    if smoke:
        return found  # make test's budget: the smoke plan times our training only
    if r == 1:  # our seed-1 batch order over round 1's rows, for every HF run
        found.append(Run("order", "bench._batch_order",
                         (f"--train_file={rows}", "--seed=1", "--batch_size=32", f"--steps={warmup + timed}",
                          "--out={out}"), readers.nothing, ("order.npy",), cost_s=10, report=False))
    found.append(Run(f"hf-r{r}", "bench._hf_ner",
                     ("--speed", "--init={run:init}", f"--train={rows}", "--seed=1",
                      "--order={run:order}/order.npy", "--learning_rate=5e-5",
                      f"--warmup_steps={warmup}", f"--timed_steps={timed}", "--out={out}"),
                     speed_readers.finetuning, ("result.json",), {"contender": "hf", "round": r}, 160))
    return found


def runs(scale: str, seeds) -> list[Run]:
    smoke = scale == "smoke"
    found = [Run("init", "studies.tools", ("seeded_head", "--base={minilm}", "--head=tagger", f"--label_list={LABELS}",
                                           "--seed=1", "--out={out}"),
                 readers.nothing, ("model.safetensors",), cost_s=5, report=False)]
    data = "{shared}/conll2003"
    if smoke:
        found.append(Run("data", "studies.tools", ("conll_subset", "--src={shared}/conll2003", "--out={out}",
                                                   "--documents=2"), readers.nothing, ("train.txt",), cost_s=1,
                         report=False))
        data = "{run:data}"
    for r in (1,) if smoke else (1, 2):
        found += round_runs(r, data, smoke)
    return found


STUDY = Study(
    name="speed_ner", title="CoNLL-2003 NER fine-tuning speed: run_ner against Hugging Face",
    paper="No paper figure (the paper reports no CPU fine-tuning speed); the NER issue's speed comparison",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("contender",),
                columns=(Column("train_examples_per_s", "training rows/s"),),
                claims=(Claim("our training outruns Hugging Face's", "train_examples_per_s", ("ours",), ("hf",)),),
                row_names={(k,): v for k, v in NAMES.items()}),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
