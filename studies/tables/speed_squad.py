"""SQuAD v1.1 fine-tuning speed: our run_squad against Hugging Face, training and prediction examples/s.

MiniLM-L6-H384 with a span head drawn from seed 1, seq 384, doc stride 128, batch 32, on 2 CPU cores; each contender
a fresh process with its library's thread defaults, ours then Hugging Face within a round, rounds repeated. The
v1.1 dev file is split by article (no SQuAD train set is here): ours trains on the first half's windows for 2
warm-up + 10 timed steps in loops of 2 (its rate: the loops' own "seq/s" after the warm-up) and predicts the
windows of the other half's first two articles (652 questions, 657 windows) at batch 8, the original's
predict_batch_size (its rate after the first batch). Hugging Face: BertForQuestionAnswering (torch, sdpa,
bench/_hf_squad.py --speed) on the windows our run cached, in our batch order. No paper figure: the paper reports
no CPU fine-tuning speed.
"""
from __future__ import annotations

from studies import readers, speed_readers
from studies.study import Claim, Column, Run, Study, Table

TRAIN_WINDOWS = 5915  # the v1.1 training half's windows at seq 384, stride 128
PREDICT_QUESTIONS = 652  # the eval half's first two articles
WARMUP, TIMED, LOOP = 2, 10, 2  # bench_squad.py --phase=speed's defaults
NAMES = {"ours": "ours (run_squad)", "hf": "Hugging Face (BertForQuestionAnswering, torch)"}


def round_runs(r: int, smoke: bool) -> list[Run]:
    """Ours (training then prediction), then Hugging Face on the windows ours cached."""
    warmup, timed, loop = (1, 1, 1) if smoke else (WARMUP, TIMED, LOOP)
    epochs = (warmup + timed + 0.5) * 32 / (24 if smoke else TRAIN_WINDOWS)
    window = ("--max_seq_length=128", "--doc_stride=64") if smoke else ("--max_seq_length=384", "--doc_stride=128")
    windows = f"{{glob:ours-r{r}:features/squad-%s-*.tfrecord}}"
    found = [Run(f"ours-r{r}", "bert_tf.tasks.squad.program",
                 ("--do_train", "--train_file={run:data}/train.json", "--do_predict",
                  "--predict_file={run:predict_data}/eval.json", *window, "--init_checkpoint={run:init}",
                  "--learning_rate=3e-5", "--train_batch_size=32", f"--num_train_epochs={epochs:.6g}",
                  "--warmup_proportion=0.1", "--seed=1", f"--steps_per_loop={loop}", "--output_dir={out}"),
                 speed_readers.program_speed(warmup, loop), ("train/events.out.tfevents.*", "predictions.json"),
                 {"contender": "ours", "round": r}, 30 if smoke else 125)]
    if smoke:
        return found  # make test's budget: the smoke plan times our training only
    if r == 1:  # our seed-1 batch order over round 1's windows, for every HF run
        found.append(Run("order", "bench._batch_order",
                         (f"--train_file={windows % 'train'}", "--seed=1", "--batch_size=32",
                          f"--steps={warmup + timed}", "--out={out}"), readers.nothing, ("order.npy",), cost_s=10,
                         report=False))
    found.append(Run(f"hf-r{r}", "bench._hf_squad",
                     ("--speed", "--init={run:init}", f"--train={windows % 'train'}",
                      f"--predict={windows % 'predict'}", "--seed=1", "--order={run:order}/order.npy",
                      f"--warmup_steps={warmup}", f"--timed_steps={timed}", "--speed_predict_rows=100000",
                      "--out={out}"),
                     speed_readers.finetuning, ("result.json",), {"contender": "hf", "round": r}, 210))
    return found


def runs(scale: str, seeds) -> list[Run]:
    smoke = scale == "smoke"
    cut = ["--max_questions=24"] if smoke else []
    found = [Run("init", "studies.tools", ("seeded_head", "--base={minilm}", "--head=span", "--seed=1", "--out={out}"),
                 readers.nothing, ("model.safetensors",), cost_s=5, report=False),
             Run("data", "studies.tools", ("squad_split", "--src={shared}/squad/dev-v1.1.json", "--out={out}", *cut),
                 readers.nothing, ("train.json", "eval.json"), cost_s=2, report=False),
             # eval.json: the eval half's first two articles (whole paragraphs), the prediction set
             Run("predict_data", "studies.tools",
                 ("squad_split", "--src={shared}/squad/dev-v1.1.json", "--out={out}", "--whole_paragraphs",
                  f"--max_questions={8 if smoke else PREDICT_QUESTIONS}"),
                 readers.nothing, ("eval.json",), cost_s=2, report=False)]
    for r in (1,) if smoke else (1, 2):
        found += round_runs(r, smoke)
    return found


STUDY = Study(
    name="speed_squad", title="SQuAD v1.1 fine-tuning speed: run_squad against Hugging Face",
    paper="No paper figure (the paper reports no CPU fine-tuning speed); issue #14's speed comparison",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("contender",),
                columns=(Column("train_examples_per_s", "training windows/s", digits=2),
                         Column("predict_b8_examples_per_s", "prediction windows/s, batch 8")),
                claims=(Claim("our training outruns Hugging Face's", "train_examples_per_s", ("ours",), ("hf",)),
                        Claim("our prediction outruns Hugging Face's", "predict_b8_examples_per_s", ("ours",),
                              ("hf",))),
                row_names={(k,): v for k, v in NAMES.items()}),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
