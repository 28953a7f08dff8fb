"""Fine-tuning speed on MRPC: our run_classifier against Hugging Face, training and prediction examples/s.

MiniLM-L6-H384 with a classifier head drawn from seed 1, seq 128, batch 32, on 2 CPU cores; each contender a fresh
process with its library's thread defaults, the contenders one after another within a round, rounds repeated.
Training: our program (`run_classifier`) for 5 warm-up + 40 timed steps in loops of 5, its rate the loops' own
"seq/s" after the warm-up; with its default dynamic padding (batches cut to their longest row) and with
`--nodynamic_padding` (the original's fixed length). Prediction: `bench/_ours_predict_speed.py`, the program's
own prediction call over the dev set (408 rows, 3 passes), steady rate with tracing cancelled, at batch 8 and 32.
Hugging Face: BertForSequenceClassification (torch, sdpa attention, bench/_hf_classifier.py --speed) on the rows
our run cached, in our batch order, padded to 128 (run_glue.py's default, "fixed") or to each batch's longest row
("dynamic"). No paper figure: the paper reports no CPU fine-tuning speed.
"""
from __future__ import annotations

from studies import readers, speed_readers
from studies.study import Claim, Column, Run, Study, Table

MRPC_TRAIN_ROWS = 3667
WARMUP, TIMED, LOOP, PASSES, REPEATS = 5, 40, 5, 3, 2  # bench_classifier.py --phase=speed's defaults
SMOKE = dict(warmup=1, timed=2, loop=1, rows=(64, 32))
NAMES = {"ours_train": "ours, training (dynamic padding, the default)",
         "ours_train_fixed": "ours, training (--nodynamic_padding)",
         "hf_dynamic": "Hugging Face, training + prediction (dynamic padding)",
         "hf_fixed": "Hugging Face, training + prediction (padded to 128)",
         "ours_predict": "ours, prediction (dynamic padding)",
         "ours_predict_fixed": "ours, prediction (--nodynamic_padding)"}


def program(data: str, extra: tuple[str, ...] = (), length: int = 128) -> tuple[str, ...]:
    """Our classifier program's flags for MRPC from the seeded head folder (the recipe of bench_classifier)."""
    return ("--task_name=MRPC", f"--data_dir={data}", "--init_checkpoint={run:init}", f"--max_seq_length={length}",
            "--learning_rate=2e-5", "--train_batch_size=32", "--warmup_proportion=0.1", "--seed=1",
            "--output_dir={out}", *extra)


def round_runs(r: int, data: str, size: dict, smoke: bool) -> list[Run]:
    """One round: ours training both ways, ours prediction both ways, then Hugging Face both ways."""
    warmup, timed, loop = size["warmup"], size["timed"], size["loop"]
    epochs = (warmup + timed + 0.5) * 32 / (size["rows"][0] if smoke else MRPC_TRAIN_ROWS)
    cost = (lambda seconds: 20.0) if smoke else (lambda seconds: seconds)
    found = []
    for name, fixed in (("ours_train", False), ("ours_train_fixed", True))[:1 if smoke else 2]:
        found.append(Run(f"{name}-r{r}", "bert_tf.tasks.classifier",
                         ("--do_train", *program(data, (f"--num_train_epochs={epochs:.6g}", f"--steps_per_loop={loop}",
                                                        *(["--nodynamic_padding"] if fixed else [])),
                                                  32 if smoke else 128)),
                         speed_readers.program_speed(warmup, loop), ("train/events.out.tfevents.*",),
                         {"contender": name, "round": r}, cost(95.0 if fixed else 65.0)))
    if not smoke:
        for name, fixed in (("ours_predict", False), ("ours_predict_fixed", True)):
            found.append(Run(f"{name}-r{r}", "bench._ours_predict_speed",
                             ("--batch_sizes=8,32", f"--repeats={size['repeats']}", f"--passes={size['passes']}", "--",
                              "--do_eval", *program(data, ("--nodynamic_padding",) if fixed else ())),
                             speed_readers.result_line, ("features/mrpc-eval-*.tfrecord",),
                             {"contender": name, "round": r}, cost(90.0 if fixed else 70.0)))
    if smoke:
        return found  # make test's budget: the smoke plan times our training only
    train = f"{{glob:ours_train-r{r}:features/mrpc-train-*.tfrecord}}"
    if r == 1:  # our seed-1 batch order over the rows round 1 cached, for every HF run
        found.append(Run("order", "bench._batch_order",
                         (f"--train_file={train}", "--seed=1", "--batch_size=32", f"--steps={warmup + timed}",
                          "--out={out}"), readers.nothing, ("order.npy",), cost_s=10, report=False))
    for name, dynamic in (("hf_fixed", False), ("hf_dynamic", True)):
        found.append(Run(f"{name}-r{r}", "bench._hf_classifier",
                         ("--speed", "--init={run:init}", f"--train={train}",
                          f"--dev={{glob:ours_predict-r{r}:features/mrpc-eval-*.tfrecord}}", "--num_labels=2",
                          "--seed=1", "--order={run:order}/order.npy", f"--warmup_steps={warmup}",
                          f"--timed_steps={timed}", "--speed_predict_batch_sizes=8,32",
                          f"--speed_predict_passes={size['passes']}", *(["--dynamic_padding"] if dynamic else []),
                          "--out={out}"),
                         speed_readers.finetuning, ("result.json",), {"contender": name, "round": r},
                         110.0 if dynamic else 200.0))
    return found


def runs(scale: str, seeds) -> list[Run]:
    smoke = scale == "smoke"
    size = SMOKE if smoke else dict(warmup=WARMUP, timed=TIMED, loop=LOOP, passes=PASSES, repeats=REPEATS)
    found = [Run("init", "studies.tools", ("seeded_head", "--base={minilm}", "--num_labels=2", "--seed=1", "--out={out}"),
                 readers.nothing, ("model.safetensors",), cost_s=5, report=False)]
    data = "{shared}/glue/MRPC"
    if smoke:
        found.append(Run("data", "studies.tools", ("glue_subset", "--src={shared}/glue/MRPC", "--train_rows=64",
                                                   "--dev_rows=32", "--out={out}"), readers.nothing,
                         ("train.tsv", "dev.tsv"), cost_s=1, report=False))
        data = "{run:data}"
    for r in (1,) if smoke else (1, 2):
        found += round_runs(r, data, size, smoke)
    return found


STUDY = Study(
    name="speed_classifier", title="Fine-tuning speed on MRPC: run_classifier against Hugging Face",
    paper="No paper figure (the paper reports no CPU fine-tuning speed); issue #12's speed comparison",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("contender",),
                columns=(Column("train_examples_per_s", "training ex/s"),
                         Column("predict_b8_examples_per_s", "prediction ex/s, batch 8"),
                         Column("predict_b32_examples_per_s", "prediction ex/s, batch 32")),
                claims=(Claim("our training outruns Hugging Face's (both dynamic padding)", "train_examples_per_s",
                              ("ours_train",), ("hf_dynamic",)),
                        Claim("our training outruns Hugging Face's (both padded to 128)", "train_examples_per_s",
                              ("ours_train_fixed",), ("hf_fixed",)),
                        Claim("our prediction outruns Hugging Face's at batch 32 (dynamic padding)",
                              "predict_b32_examples_per_s", ("ours_predict",), ("hf_dynamic",))),
                row_names={(k,): v for k, v in NAMES.items()}),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
