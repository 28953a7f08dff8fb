"""Re-runs the paper's studies and regenerates the report: `python -m studies` from the repository root, or
`make paper PAPER_ARGS='...'`.

    python -m studies --dry_run                       # the plan at the machine scale: runs, cost, what is done
    python -m studies --scale=smoke                   # every study end to end on tiny data (minutes)
    python -m studies --only=glue,table8 --seeds=3    # chosen studies, three seeds
    python -m studies --report_only                   # regenerate docs/paper.md from the store, nothing run
"""
from __future__ import annotations

import os
import signal
import sys

from absl import app, flags

from bert_tf.data.output_lock import holding, lock_folder
from bert_tf.errors import BertTfError
from studies import records, report, runner
from studies.records import Store, StudyError
from studies.study import SCALES, STRATEGIES
from studies.tables import by_name

FLAGS = flags.FLAGS
flags.DEFINE_enum("scale", "machine", SCALES, "smoke: tiny models and data, minutes; machine: what this repository "
                  "records on 2 CPU cores; paper: the paper's sizes and steps (a pod's work: plan it with --dry_run).")
flags.DEFINE_list("only", [], "Study names to run (default: all); --dry_run lists them.")
flags.DEFINE_list("runs", [], "Run keys to run (shell patterns, e.g. 'MRPC-s1-*'); the runs they read are included.")
flags.DEFINE_integer("seeds", None, "Seeds per run (default: each study's own count at the scale).")
flags.DEFINE_integer("jobs", 1, "Runs at a time (each a program that uses every core it finds): more than 1 "
                     "only where the machine has cores to spare, and never for speed studies.", lower_bound=1)
flags.DEFINE_boolean("dry_run", False, "Print the plan: every run, its estimated cost, which are done; run nothing.")
flags.DEFINE_boolean("report_only", False, "Regenerate the report from the store; run nothing.")
flags.DEFINE_string("work_dir", os.path.join(records.ROOT, "paper_runs"),
                    "Where runs write their outputs (STUDY/KEY under SCALE/); records point here.")
flags.DEFINE_string("store", os.path.join(records.ROOT, "studies", "results"),
                    "The results store: one STUDY.jsonl per study.")
flags.DEFINE_enum("strategy", None, STRATEGIES, "Paper scale: the accelerators our programs run on, "
                  "configs/strategies/STRATEGY.flags (default: $BERT_TF_STRATEGY, else tpu).")
flags.DEFINE_string("models_dir", None, "Paper scale: the folder of released checkpoints the fine-tuning studies "
                    "start from, e.g. MODELS_DIR/bert-base-uncased (default: $BERT_TF_MODELS, else models/).")
flags.DEFINE_string("report_dir", None, "Where the report goes (default: docs/ at the machine scale, "
                    "WORK_DIR/SCALE/report otherwise, so that a smoke run never overwrites the docs).")


def chosen_studies():
    studies = by_name()
    unknown = [name for name in FLAGS.only if name not in studies]
    if unknown:
        raise StudyError(f"--only: unknown stud{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
                         f"declared: {', '.join(studies)}")
    return [s for name, s in studies.items() if not FLAGS.only or name in FLAGS.only]


def report_dir() -> str:
    if FLAGS.report_dir:
        return FLAGS.report_dir
    return os.path.join(records.ROOT, "docs") if FLAGS.scale == "machine" else \
        os.path.join(FLAGS.work_dir, FLAGS.scale, "report")


def write_reports(store: Store) -> None:
    """The report of the chosen scale; at the machine scale into docs/, with the README's results block."""
    folder = report_dir()
    for path in report.write_reports(store, FLAGS.scale, folder):
        print(f"wrote {path}")
    if os.path.abspath(folder) == os.path.join(records.ROOT, "docs"):
        readme = os.path.join(records.ROOT, "README.md")
        if report.update_readme(readme, report.headline(store, FLAGS.scale)):
            print(f"wrote {readme} (results block)")


def stop_on_sigterm(signum: int, frame) -> None:
    """SIGTERM (a scheduler's stop, `kill`): the running programs are stopped too, and the runner ends with one
    line; their runs have no record, so the next `make paper` redoes them."""
    signal.signal(signum, signal.SIG_IGN)
    stopped = records.stop_children(signum)
    raise StudyError(f"stopped by signal {signum}: {stopped} running run(s) stopped, to be redone by the next run")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise StudyError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.strategy:
        os.environ["BERT_TF_STRATEGY"] = FLAGS.strategy
    if FLAGS.models_dir:
        os.environ["BERT_TF_MODELS"] = os.path.abspath(FLAGS.models_dir)
    store = Store(FLAGS.store)
    studies = chosen_studies()
    if FLAGS.report_only:
        write_reports(store)
        return
    planned = runner.plan(studies, FLAGS.scale, FLAGS.seeds, FLAGS.work_dir, store, by_name())
    items = runner.select(planned, FLAGS.runs)
    print(report.plan_text(items, store))
    if FLAGS.dry_run:
        return
    timed = sorted({i.study.name for i in items if i.study.kind == "speed" and not i.done})
    if FLAGS.jobs > 1 and timed and FLAGS.scale != "smoke":
        raise StudyError(f"--jobs={FLAGS.jobs}: speed studies time one run at a time ({', '.join(timed)}); "
                         "run them with --jobs=1")
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    with holding([lock_folder(FLAGS.work_dir, "--work_dir"), lock_folder(FLAGS.store, "--store")]):
        failed = runner.execute(items, store, jobs=FLAGS.jobs)
    write_reports(store)
    if failed:
        raise StudyError(f"{len(failed)} run(s) failed:\n  " + "\n  ".join(failed))


def run() -> None:
    try:
        app.run(main)
    except (StudyError, BertTfError) as e:
        print(f"paper: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run()
