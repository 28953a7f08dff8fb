"""Carries the old per-run JSON files of bench/results into the store as migrated records (origin "migrated"), with
the commit and CPU they name, never retyped: `python -m studies.migrate [--only=glue,...]`.

Each module of studies/migrations/ converts one study's files: `migrate(results: str) -> list[dict]`, every dict
made by `migrated_record`. Re-running replaces that study's migrated records and keeps the runner's own.
A migrated record has no outputs to verify, so the runner never counts it as done; the report marks it †.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
from typing import Mapping

from studies.records import MIGRATED, ROOT, Store

RESULTS = os.path.join(ROOT, "bench", "results")


def load_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cpu_of(path: str, result: Mapping) -> str:
    """The CPU a result file names: its own "cpu" field, else a cpu.json beside it, else 'not recorded'."""
    cpu = result.get("cpu")
    if not cpu:
        sibling = os.path.join(os.path.dirname(path), "cpu.json")
        cpu = load_json(sibling) if os.path.exists(sibling) else None
    if isinstance(cpu, Mapping) and not any(k in cpu for k in ("model_name", "model", "isa", "family")):
        cpu = None  # the old runs' cpu.json holds CPU seconds ({"cpu_s", "wall_s", "jobs"}), not a CPU model
    if isinstance(cpu, Mapping):
        parts = [str(cpu.get(k)) for k in ("model_name", "model", "isa", "cores") if cpu.get(k)]
        extra = f"family {cpu['family']} model {cpu['model']}" if "family" in cpu and "model" in cpu else ""
        return ", ".join(parts[:1] + ([extra] if extra else []) + parts[2:]) if parts else json.dumps(cpu)
    return str(cpu) if cpu else "not recorded"


def migrated_record(study: str, key: str, path: str, result: Mapping, metrics: Mapping[str, float],
                    labels: Mapping[str, object], *, commit: str | None = None, seconds: float | None = None,
                    program: str | None = None, command: list[str] | None = None) -> dict:
    """One migrated record of `study` at the machine scale for the old file `path` (its content `result`)."""
    record = {"study": study, "key": key, "scale": "machine", "origin": MIGRATED,
              "source": os.path.relpath(path, ROOT), "program": program or result.get("program"),
              "command": command or result.get("command"), "labels": dict(labels),
              "commit": commit or result.get("commit") or "not recorded", "cpu": cpu_of(path, result),
              "seconds": seconds if seconds is not None else result.get("wall_s") or result.get("seconds"),
              "metrics": {k: float(v) for k, v in metrics.items()}, "output_dir": None, "outputs": {},
              "finished": result.get("finished")}
    if result.get("recovered_from"):
        record["recovered_from"] = result["recovered_from"]
    held_in = source_commit(path)
    if held_in:
        record["source_commit"] = held_in  # `git show COMMIT:SOURCE` gives the old file once it is deleted
    return record


def source_commit(path: str) -> str | None:
    """The last commit that holds the file at `path` as it is now (None when it is not committed unchanged)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    relative = os.path.relpath(path, ROOT)
    if git("status", "--porcelain", "--", relative):
        return None
    return git("log", "-1", "--format=%h", "--", relative) or None


def converters() -> dict[str, object]:
    from studies import migrations

    return {m.name: importlib.import_module(f"studies.migrations.{m.name}")
            for m in pkgutil.iter_modules(migrations.__path__) if not m.name.startswith("_")}


def migrate(store: Store, only: list[str] | None = None, results: str = RESULTS) -> dict[str, int]:
    """Replaces the migrated records of each converted study in `store` by what its converter finds now, keeping
    those whose old file is gone (deleted once migrated: `source_commit` holds it); {study: records written}."""
    written = {}
    for name, module in converters().items():
        if only and name not in only:
            continue
        new = module.migrate(results)
        found = {r["key"] for r in new}
        old = store.load(name)
        kept = [r for r in old if r.get("origin") == MIGRATED and r["key"] not in found
                and not os.path.exists(os.path.join(ROOT, r.get("source") or ""))]
        if kept:
            print(f"{name}: {len(kept)} migrated records kept whose old files are gone (deleted after migration)")
        store.write(name, new + kept + [r for r in old if r.get("origin") != MIGRATED])
        written[name] = len(new)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.migrate", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma list of studies (default: every converter)")
    parser.add_argument("--store", default=os.path.join(ROOT, "studies", "results"))
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args(argv)
    counts = migrate(Store(args.store), [s for s in args.only.split(",") if s], args.results)
    for name, count in counts.items():
        print(f"{name}: {count} migrated records")


if __name__ == "__main__":
    main()
