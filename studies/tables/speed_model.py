"""Pre-training step and forward throughput: our BERT against KerasHub and Hugging Face torch, sequences/s.

A synthetic pre-training batch of 32 × 128 tokens with 20 masked positions (some rows padded), at L=4 H=256 A=4
I=1024 ("small") and BERT-Base shapes, vocab 30,522. Each window is a fresh process of one contender
(bench/model_contender.py): the model built, 1 warm-up + 3 timed forward passes (BERT-Base: 1 + 1), then as many
training steps (forward + MLM and NSP loss + backward + AdamW update, dropout on, no clipping), each library with
its own thread defaults; the contenders alternate within a round (ours, KerasHub, HF torch, HF torch with the MLM
head gathered at the masked positions), 3 rounds. Ours: BertPretrainingModel with the original's losses and
optimizer (AdamWeightDecay); KerasHub: BertBackbone + MaskedLMHead + a Dense NSP head, Keras' AdamW; HF:
BertForPreTraining (stock: the vocabulary projection at every position), torch's AdamW. Train GFLOP/s counts the
matmul FLOPs each model runs, training = 3 × forward. Figures are means over the rounds' windows, and the ratio
line a ratio of those means (the old bench_model.py gave the median of same-round ratios, steadier on a busy
machine: compare the records' load averages); speed has no paper scale (the paper scale runs the machine scale's
plan).
"""
from __future__ import annotations

from studies import speed_readers
from studies.study import Column, Run, Study, Table, Versus

CONTENDERS = ("ours", "keras_hub", "hf_torch", "hf_torch_gathered")  # bench_model.py's order
CONFIGS = {"small": 3, "base": 1}  # timed steps per phase (bench_model.py's DEFAULT_STEPS)
ROUNDS, WARMUP = 3, 1
SHAPE = ("--batch_size=32", "--seq_len=128", "--num_masked=20")
SMOKE = {"configs": {"tiny": 2}, "contenders": ("ours",), "rounds": 1,  # make test's budget: ours only
         "shape": ("--batch_size=4", "--seq_len=32", "--num_masked=5")}
NAMES = {"ours": "ours (bert_tf)", "keras_hub": "KerasHub", "hf_torch": "HF torch (stock MLM head)",
         "hf_torch_gathered": "HF torch (MLM head gathered)"}
CONFIG_NAMES = {"tiny": "L=2 H=64 (smoke)", "small": "L=4 H=256", "base": "BERT-Base"}
COST = {"tiny": 10, "small": 40, "base": 110}


def runs(scale: str, seeds) -> list[Run]:
    """Rounds of every config, the contenders alternating within each round; one process per window."""
    size = SMOKE if scale == "smoke" else {"configs": CONFIGS, "contenders": CONTENDERS, "rounds": ROUNDS,
                                            "shape": SHAPE}
    found = []
    for config, steps in size["configs"].items():
        for r in range(1, size["rounds"] + 1):
            for contender in size["contenders"]:
                found.append(Run(f"{config}-{contender}-r{r}", "bench.model_contender",
                                 (f"--contender={contender}", f"--config={config}", f"--steps={steps}",
                                  f"--warmup={WARMUP}", *size["shape"], "--out={out}"),
                                 speed_readers.model_window, ("result.json",),
                                 {"config": config, "contender": contender, "round": r}, COST[config]))
    return found


def versus(config: str, metric: str, what: str) -> Versus:
    return Versus(f"{CONFIG_NAMES[config]}, {what}", metric, (config, "ours"),
                  tuple((config, c) for c in CONTENDERS[1:]))


STUDY = Study(
    name="speed_model", title="Pre-training step and forward throughput: ours against KerasHub and HF torch",
    paper="No paper figure (the paper reports TPU pre-training time only); issue #12's model throughput",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("config", "contender"),
                columns=(Column("train_seq_per_s", "training seq/s", digits=2),
                         Column("forward_seq_per_s", "forward seq/s", digits=2),
                         Column("train_gflops", "training GFLOP/s")),
                row_names={(k, c): f"{v}: {NAMES[c]}" for k, v in CONFIG_NAMES.items() for c in CONTENDERS},
                versus=tuple(versus(config, metric, what) for config in CONFIGS
                             for metric, what in (("train_seq_per_s", "training"), ("forward_seq_per_s", "forward")))),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
