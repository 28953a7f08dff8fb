"""`make paper` as a user meets it: the plan of every study at every scale, the whole smoke plan end to end with a
`kill -9` in the middle, and the report regenerated from the store byte for byte."""
from __future__ import annotations

import filecmp
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from studies import report
from studies.records import Store
from studies.tables import STUDIES
from tests.shared_data import REPO_ROOT, shared_path


def paper(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studies", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=1200, **kwargs)


@pytest.mark.parametrize("scale", ["smoke", "machine", "paper"])
def test_the_dry_run_prints_every_study_and_its_runs_at_each_scale(scale, tmp_path):
    shared_path("glue")
    done = paper("--dry_run", f"--scale={scale}", f"--work_dir={tmp_path}", f"--store={tmp_path / 'store'}")
    assert done.returncode == 0, done.stderr
    for study in STUDIES:
        assert f"{study.name}: " in done.stdout
        for run in study.plan(scale):
            assert f"todo  {run.key}" in done.stdout
    assert "plan: " in done.stdout.splitlines()[-1]
    assert not os.path.exists(tmp_path / "store")  # a dry run writes nothing


def test_an_unknown_study_is_one_readable_line():
    done = paper("--dry_run", "--only=table99")
    assert done.returncode == 1 and done.stderr.strip().startswith("paper: error: --only: unknown study table99")


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_the_smoke_plan_survives_kill_9_redoing_only_the_unfinished_run(tmp_path):
    """Every study at the smoke scale, killed (runner and child, SIGKILL) while the first fine-tuning run trains,
    then run again: the finished runs are skipped, the killed one is redone, and the report is written."""
    shared_path("glue")
    work, store_dir = tmp_path / "work", tmp_path / "store"
    args = ("--scale=smoke", f"--work_dir={work}", f"--store={store_dir}", "--jobs=2")
    store, killed_log = Store(str(store_dir)), work / "smoke" / "glue" / "MRPC-s1-ours.log"
    first = subprocess.Popen([sys.executable, "-m", "studies", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: killed_log.exists() and killed_log.stat().st_size > 200, 300, "MRPC-s1-ours to start")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    before = store.latest("glue", "smoke")
    assert "init-MRPC-s1" in before and "MRPC-s1-ours" not in before

    second = paper(*args)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "done  init-MRPC-s1" in second.stdout and "todo  MRPC-s1-ours" in second.stdout
    after = store.latest("glue", "smoke")
    assert after["init-MRPC-s1"] == before["init-MRPC-s1"]  # skipped, not re-run
    for study in STUDIES:
        keys = {run.key for run in study.plan("smoke")}
        assert keys <= set(store.latest(study.name, "smoke")), study.name
    report = work / "smoke" / "report" / "paper.md"
    text = report.read_text(encoding="utf-8")
    for study in STUDIES:
        if study.kind == "paper":
            assert f"## {study.title}" in text
    assert "(n=1)" in text

    again = paper("--report_only", *args, f"--report_dir={tmp_path / 'again'}")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "paper.md").read_bytes() == report.read_bytes()
    match = filecmp.dircmp(tmp_path / "again" / "paper", work / "smoke" / "report" / "paper")
    assert not match.diff_files and not match.left_only and not match.right_only


def test_sigterm_stops_the_runner_and_the_program_it_runs_with_one_line(tmp_path):
    """A scheduler's stop (SIGTERM to the runner alone) reaches the running program too: nothing of the plan is
    left running, the stopped run has no record, and the runner says so in one line."""
    shared_path("glue")
    work, store_dir = tmp_path / "work", tmp_path / "store"
    folder = work / "smoke" / "pretraining"
    runner = subprocess.Popen([sys.executable, "-m", "studies", "--scale=smoke", "--only=pretraining",
                               f"--work_dir={work}", f"--store={store_dir}"], cwd=REPO_ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: any(log.stat().st_size > 200 for log in folder.glob("pretrain-*.log")), 300,
                 "a pre-training run to start")
        runner.send_signal(signal.SIGTERM)
        _, err = runner.communicate(timeout=120)
        left = subprocess.run(["pgrep", "-s", str(runner.pid)], capture_output=True, text=True).stdout.split()
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
    assert runner.returncode == 1 and err.strip().splitlines()[-1].startswith(
        "paper: error: stopped by signal 15: 1 running run(s) stopped"), err[-2000:]
    assert not left, f"processes of the plan still running: {left}"
    stored = Store(str(store_dir)).latest("pretraining", "smoke")
    assert "corpus" in stored and not any(key.startswith("pretrain-") for key in stored)


def test_the_committed_report_is_what_the_committed_store_generates(tmp_path):
    done = paper("--report_only", f"--report_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    for name in sorted(os.listdir(tmp_path)):
        generated, committed = tmp_path / name, REPO_ROOT / "docs" / name
        if generated.is_dir():
            match = filecmp.dircmp(generated, committed)
            assert not match.diff_files and not match.left_only, f"docs/{name}/ differs from the store's report"
        else:
            assert generated.read_bytes() == committed.read_bytes(), \
                f"docs/{name} is not what `make paper PAPER_ARGS=--report_only` generates"


def test_the_readme_results_block_is_what_the_committed_store_generates():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(report.README_BEGIN, 1)[1].split(report.README_END, 1)[0]
    expected = report.headline(Store(str(REPO_ROOT / "studies" / "results")), "machine")
    assert block == "\n" + expected, "README.md's results block is not what `make paper PAPER_ARGS=--report_only` writes"


def test_every_stored_record_names_its_study_key_commit_and_cpu():
    store = Store(str(REPO_ROOT / "studies" / "results"))
    names = {s.name for s in STUDIES}
    for study in store.studies():
        assert study in names, f"studies/results/{study}.jsonl belongs to no declared study"
        for record in store.load(study):
            assert record["study"] == study and record["key"] and record["commit"] and record["cpu"], \
                json.dumps(record)[:300]
            assert record["origin"] in ("run", "migrated")
            assert record["origin"] == "run" or record["source"].startswith("bench/results/")
            if record["origin"] == "migrated" and not (REPO_ROOT / record["source"]).exists():
                assert record.get("source_commit"), f"{record['key']}: its old file is gone and no commit holds it"


def options_class(program: str) -> type:
    """The options dataclass a program of ours parses its flags into (the one its module declares)."""
    import dataclasses
    import importlib

    module = importlib.import_module(program)
    found = [c for name, c in vars(module).items() if isinstance(c, type) and dataclasses.is_dataclass(c)
             and name.endswith("Options") and c.__module__ == program]
    assert len(found) == 1, f"{program} declares {len(found)} options classes"
    return found[0]


def released_model(folder) -> str:
    """A stand-in for a run's output folder: a BERT-Base config and vocabulary, as a model folder holds them."""
    import shutil

    if not folder.exists():
        folder.mkdir(parents=True)
        shutil.copy(REPO_ROOT / "configs" / "bert_base_config.json", folder / "bert_config.json")
        shutil.copy(shared_path("vocab", "uncased", "vocab.txt"), folder / "vocab.txt")
    return str(folder)


@pytest.mark.parametrize("strategy", ["tpu", "mirrored", "multi_worker_mirrored"])
def test_every_paper_scale_run_of_our_programs_parses_with_its_flagfiles(strategy, tmp_path, monkeypatch):
    """The paper plan is not run here, but every command it would give our programs parses and validates, the
    shipped phase flagfiles and the accelerators' flagfile included, for each --strategy."""
    import bert_tf._env  # noqa: F401
    from bert_tf.options import parse
    from bert_tf.tasks import finetune
    from bert_tf.tasks.finetune import FinetuningOptions
    from studies import runner

    monkeypatch.setenv("BERT_TF_STRATEGY", strategy)
    monkeypatch.setenv("BERT_TF_MODELS", str(tmp_path / "models"))
    checked = 0
    for study in STUDIES:
        for run in study.plan("paper", seeds=1):
            if not run.program.startswith("bert_tf."):
                continue
            folders = {need: released_model(tmp_path / need) for need in run.needs}
            argv = [runner.resolve(flag, str(tmp_path / "out"), folders) for flag in run.flags]
            options = parse(options_class(run.program), argv, program=run.program)
            if isinstance(options, FinetuningOptions):
                options = finetune.resolve(options)  # what the program does first: the model folder's config
            options.validate()
            if study.kind == "paper" and getattr(options, "do_train", False):
                assert options.strategy == strategy, f"{study.name}/{run.key} trains without {strategy}'s flagfile"
            checked += 1
    assert checked > 100


def test_the_paper_scale_pre_trains_the_papers_sizes_in_two_phases():
    from studies.tables import by_name

    runs = {run.key: run for run in by_name()["pretraining"].plan("paper")}
    phase1, phase2 = runs["phase1-mlm_nsp"], runs["pretrain-mlm_nsp"]
    assert "--flagfile={repo}/configs/bert_base_phase1.flags" in phase1.flags
    assert "--flagfile={repo}/configs/bert_base_phase2.flags" in phase2.flags
    assert "--init_checkpoint={run:phase1-mlm_nsp}/export" in phase2.flags
    assert "--flagfile={repo}/configs/bert_large_phase2.flags" in runs["pretrain-L24_H1024_A16"].flags
    table6 = {run.labels.get("variant") for run in by_name()["table6"].plan("paper")}
    assert {"L3_H768_A12", "L6_H768_A3", "L6_H768_A12", "mlm_nsp", "L12_H1024_A16", "L24_H1024_A16"} <= table6


def test_the_paper_scale_fine_tunes_the_originals_base_models_without_the_cpu_peers():
    from studies.tables import by_name

    glue = {run.key: run for run in by_name()["glue"].plan("paper", seeds=1)}
    assert "--base={models}/bert-base-uncased" in glue["init-MRPC-s1"].flags
    ner = {run.key: run for run in by_name()["table7"].plan("paper", seeds=1)}
    assert "--base={models}/bert-base-cased" in ner["init-ner-s1"].flags
    assert "--do_lower_case=false" in ner["finetune-s1-ours"].flags  # the paper's NER model is cased
    for study in ("glue", "squad", "table7"):
        programs = {run.program for run in by_name()[study].plan("paper", seeds=1)}
        assert not any(p.startswith("bench._hf") for p in programs), study
