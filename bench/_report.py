"""Writes one benchmark's section into docs/benchmarks.md, leaving the other sections alone."""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import subprocess
import sys
from typing import Callable

from bench._cpu import read_cpu

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEach section is rewritten by the bench script named in it; numbers are from one run.\n"


def machine_description() -> str:
    """CPU (model, family/model, ISA, cores), memory and Python of this machine, for the record."""
    mem = ""
    try:
        kb = int(next(l for l in open("/proc/meminfo") if l.startswith("MemTotal")).split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration):
        pass
    return f"{read_cpu().label()}{mem}, Python {platform.python_version()}"


def git_revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=DOC.parent.parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_section(name: str, body_markdown: str, command: str | None = None) -> None:
    """Replaces the section `name` (between HTML markers) in docs/benchmarks.md with `body_markdown`."""
    command = command or "python " + " ".join(sys.argv)
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = (f"{start}\n{body_markdown.rstrip()}\n\nCommand: `{command}`  \n"
               f"Machine: {machine_description()}  \nCommit: {git_revision()}\n{end}")
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else HEADER
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(DOC)


def recovered_source(result: dict | None) -> str | None:
    """Where a result re-entered from an earlier rendering (its own file lost) came from, e.g. "docs/benchmarks.md
    as rendered at 53ba597"; None for a measured result."""
    source = (result or {}).get("recovered_from")
    return source.split(" (")[0] if source else None


def recovered_sentence(*results: dict | None) -> str:
    """A sentence naming where results re-entered from an earlier rendering came from; empty when none of
    `results` is such."""
    sources = sorted({source for source in map(recovered_source, results) if source})
    if not sources:
        return ""
    return (f"These runs' figures are recovered from {', '.join(sources)}: their result files were lost. Figures "
            "that are counts (exact matches, entities found) are the counts those digits determine; the others keep "
            "the rendered digits.")


def comma_list(value: str, cast: Callable = str) -> list:
    """A comma-separated option as a list (empty items dropped), each item through `cast`."""
    return [cast(item) for item in value.split(",") if item]


def known_names(parser: argparse.ArgumentParser, names: list, known, what: str) -> list:
    """`names`, each checked against `known` (an argparse error naming the first unknown `what`)."""
    for name in names:
        if name not in known:
            parser.error(f"unknown {what} {name!r}; known: {', '.join(known)}")
    return names


def run_phase(args: argparse.Namespace, phases: dict[str, Callable[[argparse.Namespace], None]],
              report: Callable[[argparse.Namespace], str], section: str,
              speed: tuple[Callable[[argparse.Namespace], str], str] | None = None) -> None:
    """A benchmark's main: runs --phase (phases[args.phase]; "report" runs nothing) in --work_dir, prints the
    report and, unless --no_write, writes it as docs/benchmarks.md's `section`.

    With `speed` = (speed_report, speed_section), the quiet speed phase has a section of its own: --phase=speed and
    --phase=speed_report render only it, so that timing on a quiet machine never re-renders the accuracy runs."""
    os.makedirs(args.work_dir, exist_ok=True)
    print(f"{read_cpu().label()}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    phases.get(args.phase, lambda _: None)(args)
    if speed and args.phase in ("speed", "speed_report"):
        report, section = speed
    body = report(args)
    print("\n" + body, flush=True)
    if not args.no_write:
        write_section(section, body, args.command)
