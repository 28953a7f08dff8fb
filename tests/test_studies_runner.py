"""The studies runner: a plan of declared runs, records that verify against their outputs, resumption that redoes
only what is not whole, and progress lines. The runs are real child processes (`studies.tools glue_subset` on
the shared MRPC files: a program with outputs, cheap enough to run many times)."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from studies import readers, runner
from studies.records import Store, StudyError, verifies
from studies.study import Column, Run, Study, Table
from tests.shared_data import shared_path


def count_rows(out: str, folders) -> dict[str, float]:
    with open(os.path.join(out, "train.tsv"), encoding="utf-8") as f:
        return {"rows": float(len(f.readlines()) - 1)}


def subset_study(rows: int = 5) -> Study:
    """Two runs, the second reading the first's output: MRPC cut to `rows`, then to 2 rows of that."""
    def runs(scale, seeds):
        return [Run("first", "studies.tools", ("glue_subset", "--src={shared}/glue/MRPC", f"--train_rows={rows}",
                                               "--dev_rows=3", "--out={out}"),
                    count_rows, ("train.tsv", "dev.tsv"), {"name": "first"}, cost_s=2),
                Run("second", "studies.tools", ("glue_subset", "--src={run:first}", "--train_rows=2", "--out={out}"),
                    count_rows, ("train.tsv",), {"name": "second"}, cost_s=2)]
    return Study("subset", "MRPC cut down", "no paper", "A test study.", runs,
                 Table(rows=("name",), columns=(Column("rows", "rows", digits=0),)))


@pytest.fixture
def places(tmp_path, monkeypatch):
    shared_path("glue", "MRPC")
    return str(tmp_path / "work"), Store(str(tmp_path / "store"))


def run_all(study, work, store, scale="smoke"):
    items = runner.plan([study], scale, None, work, store)
    return items, runner.execute(items, store, say=lambda line: None)


def test_a_completed_plan_is_recorded_and_then_skipped(places):
    work, store = places
    items, failed = run_all(subset_study(), work, store)
    assert not failed and [i.done for i in items] == [False, False]
    stored = store.latest("subset", "smoke")
    assert stored["first"]["metrics"] == {"rows": 5.0} and stored["second"]["metrics"] == {"rows": 2.0}
    assert stored["first"]["cpu"] and stored["first"]["commit"] and stored["first"]["seconds"] > 0
    assert all(verifies(r) for r in stored.values())
    again = runner.plan([subset_study()], "smoke", None, work, store)
    assert [i.done for i in again] == [True, True]


def test_a_changed_output_file_makes_the_run_and_its_readers_run_again(places):
    work, store = places
    run_all(subset_study(), work, store)
    with open(os.path.join(work, "smoke", "subset", "first", "dev.tsv"), "a", encoding="utf-8") as f:
        f.write("tampered\n")
    assert [i.done for i in runner.plan([subset_study()], "smoke", None, work, store)] == [False, False]
    items, failed = run_all(subset_study(), work, store)
    assert not failed and [i.done for i in runner.plan([subset_study()], "smoke", None, work, store)] == [True, True]
    assert open(os.path.join(work, "smoke", "subset", "first", "dev.tsv")).read().count("tampered") == 0


def test_a_redone_run_with_new_outputs_invalidates_the_runs_that_read_it(places):
    work, store = places
    run_all(subset_study(rows=5), work, store)
    items = runner.plan([subset_study(rows=7)], "smoke", None, work, store)
    assert [i.done for i in items] == [False, False]  # a changed command is not the recorded run
    runner.execute(items[:1], store, say=lambda line: None)
    assert [i.done for i in runner.plan([subset_study(rows=7)], "smoke", None, work, store)] == [True, False]


def test_a_run_without_its_declared_outputs_fails_with_the_run_named_and_no_record(places):
    work, store = places
    study = subset_study()
    broken = Study("subset", "x", "x", "x", lambda scale, seeds: [
        Run("first", "studies.tools", ("glue_subset", "--src={shared}/glue/MRPC", "--out={out}"),
            readers.nothing, ("missing.txt",))], study.table)
    _, failed = run_all(broken, work, store)
    assert len(failed) == 1 and "subset/first" in failed[0] and "missing.txt" in failed[0]
    assert store.latest("subset", "smoke") == {}


def test_a_failing_program_names_its_log_and_its_dependants_are_not_started(places):
    work, store = places
    study = Study("subset", "x", "x", "x", lambda scale, seeds: [
        Run("first", "studies.tools", ("glue_subset", "--src=/nonexistent", "--out={out}"), readers.nothing),
        Run("second", "studies.tools", ("glue_subset", "--src={run:first}", "--out={out}"), readers.nothing)],
        subset_study().table)
    _, failed = run_all(study, work, store)
    assert "exit 1" in failed[0] and "first.log" in failed[0] and "not started" in failed[1]


def test_a_folder_the_runner_did_not_make_is_never_emptied(places):
    work, store = places
    foreign = os.path.join(work, "smoke", "subset")
    os.makedirs(foreign)
    with open(os.path.join(foreign, "precious.txt"), "w") as f:
        f.write("keep me")
    with pytest.raises(StudyError, match="not made by the studies runner; choose another --work_dir"):
        run_all(subset_study(), work, store)  # before any run starts
    assert open(os.path.join(foreign, "precious.txt")).read() == "keep me"


def test_a_declaration_that_reads_an_undeclared_run_is_refused():
    study = Study("bad", "x", "x", "x", lambda scale, seeds: [
        Run("a", "studies.tools", ("--src={run:b}",), readers.nothing)], subset_study().table)
    with pytest.raises(ValueError, match="needs b"):
        study.plan("smoke")


def test_a_store_line_that_does_not_parse_is_named(tmp_path):
    store = Store(str(tmp_path))
    with open(store.path("x"), "w") as f:
        f.write(json.dumps({"key": "a", "scale": "smoke"}) + "\n{broken\n")
    with pytest.raises(StudyError, match=r"x\.jsonl:2"):
        store.load("x")


def test_progress_lines_give_done_total_elapsed_and_eta(places):
    work, store = places
    lines: list[str] = []
    items = runner.plan([subset_study()], "smoke", None, work, store)
    progress = runner.Progress(items, lines.append, every_s=0.05)
    with progress:
        progress.started(items[0])
        import time
        time.sleep(0.2)
    ticks = [line for line in lines if line.startswith("runs ")]
    assert ticks and "runs 0/2 done" in ticks[0] and "ETA" in ticks[0] and "running subset/first" in ticks[0]


def test_the_eta_is_not_fooled_by_set_up_runs_that_beat_their_estimates(places):
    """Two minutes of set-up runs done in two seconds must not make an hour's run left look like seven minutes."""
    work, store = places
    items = runner.plan([subset_study()], "smoke", None, work, store)
    setup = dataclasses.replace(items[0], run=dataclasses.replace(items[0].run, cost_s=120.0))
    long = dataclasses.replace(items[1], run=dataclasses.replace(items[1].run, cost_s=3600.0))
    progress = runner.Progress([setup, long], lambda line: None)
    progress.started(setup)
    progress.ended(setup, 2.0)
    progress.started(long)
    eta = progress.line().split("ETA ", 1)[1].split(" |")[0]
    assert eta.startswith(("55m", "56m", "57m", "58m", "59m")), progress.line()


def test_records_put_from_many_threads_at_once_are_all_kept(tmp_path):
    import threading

    store = Store(str(tmp_path / "store"))
    threads = [threading.Thread(target=store.put, args=({"study": "x", "key": f"k{i}", "scale": "smoke",
                                                          "origin": "run"},)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(store.latest("x", "smoke")) == sorted(f"k{i}" for i in range(16))


def test_a_plan_ends_even_when_reporting_a_run_fails(places):
    """A progress line that cannot be written (a closed pipe) must not leave the plan waiting for ever."""
    work, store = places
    items = runner.plan([subset_study()], "smoke", None, work, store)

    def say(line: str) -> None:
        if "done" in line:
            raise BrokenPipeError("stdout closed")

    import threading
    finished = threading.Event()
    threading.Thread(target=lambda: (runner.execute(items, store, say=say, jobs=2), finished.set()),
                     daemon=True).start()
    assert finished.wait(120), "the plan hung"
    assert set(store.latest("subset", "smoke")) == {"first", "second"}


def test_two_jobs_run_every_run_and_a_reader_only_after_what_it_reads(places):
    work, store = places
    items = runner.plan([subset_study()], "smoke", None, work, store)
    lines: list[str] = []
    assert not runner.execute(items, store, say=lines.append, jobs=2)
    first, second = store.latest("subset", "smoke")["first"], store.latest("subset", "smoke")["second"]
    assert second["needs"]["first"] == runner.outputs_digest(first) and second["metrics"] == {"rows": 2.0}
    started = [line for line in lines if ": running" in line]
    assert [line.split("] ")[1].split(":")[0] for line in started] == ["subset/first", "subset/second"]


def test_choosing_runs_by_pattern_brings_the_runs_they_read(places):
    work, store = places
    items = runner.plan([subset_study()], "smoke", None, work, store)
    assert [i.run.key for i in runner.select(items, ["sec*"])] == ["first", "second"]
    assert [i.run.key for i in runner.select(items, ["first"])] == ["first"]
    with pytest.raises(StudyError, match="no run key matches nope"):
        runner.select(items, ["nope"])


def test_a_record_keeps_its_command_with_placeholders_not_this_machines_folders(places):
    work, store = places
    run_all(subset_study(), work, store)
    record = store.latest("subset", "smoke")["first"]
    assert any(flag.startswith("--src={shared}/glue/MRPC") for flag in record["command"]), record["command"]
    assert not os.path.isabs(record["output_dir"]) or not record["output_dir"].startswith(runner.records.ROOT)


def reader_study(rows: int = 2) -> Study:
    """One run reading the `first` run of the subset study ({run:subset/first}): a run shared across studies."""
    def runs(scale, seeds):
        return [Run("cut", "studies.tools", ("glue_subset", "--src={run:subset/first}", f"--train_rows={rows}",
                                             "--out={out}"), count_rows, ("train.tsv",), {"name": "cut"}, cost_s=2)]
    return Study("reader", "a study reading another's run", "no paper", "A test study.", runs,
                 Table(rows=("name",), columns=(Column("rows", "rows", digits=0),)))


def test_a_run_of_another_study_is_planned_first_and_only_the_runs_read_are_pulled_in(places):
    work, store = places
    catalog = {"subset": subset_study(), "reader": reader_study()}
    items = runner.plan([catalog["reader"]], "smoke", None, work, store, catalog)
    assert [i.name for i in items] == ["subset/first", "reader/cut"]
    assert not runner.execute(items, store, say=lambda line: None)
    assert store.latest("reader", "smoke")["cut"]["metrics"] == {"rows": 2.0}
    assert [i.done for i in runner.plan([catalog["reader"]], "smoke", None, work, store, catalog)] == [True, True]


def test_a_study_chosen_before_the_study_it_reads_is_planned_after_it(places):
    work, store = places
    catalog = {"reader": reader_study(), "subset": subset_study()}  # the reader first, as a catalog may sort it
    items = runner.plan(list(catalog.values()), "smoke", None, work, store, catalog)
    assert [i.name for i in items] == ["subset/first", "subset/second", "reader/cut"]


def test_a_redone_run_of_another_study_invalidates_the_runs_that_read_it(places):
    work, store = places
    catalog = {"subset": subset_study(), "reader": reader_study()}
    runner.execute(runner.plan([catalog["reader"]], "smoke", None, work, store, catalog), store, say=lambda l: None)
    catalog["subset"] = subset_study(rows=7)
    runner.execute(runner.plan([catalog["subset"]], "smoke", None, work, store, catalog)[:1], store,
                   say=lambda line: None)
    assert [i.done for i in runner.plan([catalog["reader"]], "smoke", None, work, store, catalog)] == [True, False]


def test_a_reference_to_an_undeclared_study_is_one_readable_error(places):
    work, store = places
    with pytest.raises(StudyError, match="reads unknown study subset"):
        runner.plan([reader_study()], "smoke", None, work, store, {})


def test_a_done_run_whose_declaration_renames_its_row_takes_the_new_labels_without_running(places):
    work, store = places
    run_all(subset_study(), work, store)
    renamed = subset_study()
    runs = renamed.runs

    def relabelled(scale, seeds):
        return [dataclasses.replace(run, labels={"name": run.key + "-renamed"}) for run in runs(scale, seeds)]

    renamed = dataclasses.replace(renamed, runs=relabelled)
    before = store.latest("subset", "smoke")["first"]["finished"]
    items, failed = run_all(renamed, work, store)
    assert not failed and all(i.done for i in items)
    stored = store.latest("subset", "smoke")
    assert stored["first"]["labels"] == {"name": "first-renamed"} and stored["first"]["finished"] == before
