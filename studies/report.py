"""The generated report: docs/paper.md (one section per study) from the store alone, with one SVG per table.

Nothing here reads a clock or the machine: the same store gives the same bytes. Figures are means ± sample sd over
the stored seeds of a row, with n; a figure carried over from bench/results rather than re-run by this runner is
marked †, and where both exist, a small table says how close the re-run came.
"""
from __future__ import annotations

import os
import statistics
from typing import Iterable, Sequence

from studies import plots
from studies.records import MIGRATED, RUN, Store
from studies.study import Column, Study, Table, Versus
from studies.tables import STUDIES

HEADER = {"paper": ("# The paper, re-run", "docs/paper.md", "paper"),
          "speed": ("# Benchmarks", "docs/benchmarks.md", "benchmarks")}


def plan_text(items, store: Store) -> str:
    """The plan as --dry_run prints it: per study, each run with its estimate and whether it is done."""
    lines, total, left = [], 0.0, 0.0
    for study in {i.study.name: i.study for i in items}.values():
        mine = [i for i in items if i.study is study]
        past = store.latest(study.name, mine[0].scale) if mine else {}
        lines.append(f"{study.name}: {study.title} ({sum(i.done for i in mine)}/{len(mine)} runs done)")
        for item in mine:
            cost = past.get(item.run.key, {}).get("seconds") or item.run.cost_s
            total += cost
            left += 0 if item.done else cost
            lines.append(f"  {'done' if item.done else 'todo'}  {item.run.key:<34} {item.run.program:<28} "
                         f"~{clock(cost)}")
    done = sum(i.done for i in items)
    lines.append(f"plan: {len(items)} runs, {done} done, {len(items) - done} to run, "
                 f"estimated {clock(left)} of {clock(total)} left")
    return "\n".join(lines)


def clock(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min" if minutes >= 2 else f"{seconds:.0f} s"


def row_records(table: Table, stored: Iterable[dict]) -> dict[tuple, list[dict]]:
    """The stored records of each table row (label values in `table.rows` order), rows sorted by first sight."""
    rows: dict[tuple, list[dict]] = {}
    for record in stored:
        labels = record.get("labels", {})
        if all(name in labels for name in table.rows):
            rows.setdefault(tuple(labels[name] for name in table.rows), []).append(record)
    return rows


def figure(values: Sequence[float], column: Column) -> str:
    """'84.7 ± 0.9 (n=5)' (percent columns ×100), '84.7 (n=1)', or '' when there are none."""
    if not values:
        return ""
    scale = 100.0 if column.percent else 1.0
    mean = statistics.fmean(values) * scale
    text = f"{mean:.{column.digits}f}"
    if len(values) > 1:
        text += f" ± {statistics.stdev(values) * scale:.{column.digits}f}"
    return text + f" (n={len(values)})"


def mean(records: Sequence[dict], metric: str) -> float | None:
    values = [r["metrics"][metric] for r in records if metric in r.get("metrics", {})]
    return statistics.fmean(values) if values else None


def mark(found: Sequence[dict]) -> str:
    """† for a figure with migrated records in it, ‡ when one of them was itself recovered from an old doc."""
    migrated = [r for r in found if r.get("origin") == MIGRATED]
    return "‡" if any(r.get("recovered_from") for r in migrated) else "†" if migrated else ""


def study_section(study: Study, store: Store, scale: str, plot_dir: str, plot_link: str) -> str:
    """One study's section: heading, source, method, the table beside the paper's figures, claims, provenance."""
    latest = sorted(store.latest(study.name, scale).values(), key=lambda r: r["key"])
    rows = row_records(study.table, latest)
    columns = [c for c in study.table.columns if any(mean(rs, c.metric) is not None for rs in rows.values())]
    out = [f"## {study.title}", "", f"*{study.paper}.* Re-run: `make paper PAPER_ARGS='--only={study.name}"
           f"{'' if scale == 'machine' else ' --scale=' + scale}'`", "", study.about, ""]
    if not rows:
        return "\n".join(out + [not_measured(study, scale), ""])
    heads = ["row"] if study.table.row_names else list(study.table.rows)
    paper_column = study.kind == "paper" or bool(study.table.paper)
    out.append("| " + " | ".join([*heads, *(c.heading for c in columns), *(["paper"] if paper_column else [])]) + " |")
    out.append("|" + "---|" * (len(heads) + len(columns) + paper_column))
    for row in study.table.ordered(rows):
        found = rows[row]
        if not any(c.metric in r.get("metrics", {}) for r in found for c in columns):
            continue  # e.g. a pre-training whose evaluations have not run yet
        cells = [study.table.name(row)] if study.table.row_names else [str(v) for v in row]
        for column in columns:
            values = [r["metrics"][column.metric] for r in found if column.metric in r.get("metrics", {})]
            marked = mark([r for r in found if column.metric in r.get("metrics", {})]) if values else ""
            cells.append(figure(values, column) + marked)
        paper = study.table.paper.get(row, {})
        if paper_column:
            cells.append(", ".join(f"{c.heading} {paper[c.metric] * (100 if c.percent else 1):.{c.digits}f}"
                                   for c in study.table.columns if c.metric in paper))
        out.append("| " + " | ".join(cells) + " |")
    out += ["", *versus_lines(study.table, rows),
            *claims(study.table, rows, whose(study)),
            *rerun_comparison(study, store, scale), *provenance(latest)]
    plot = plots.study_chart(study.table, columns, rows, os.path.join(plot_dir, f"{study.name}.svg"))
    if plot:
        out += [f"![{study.title}]({plot_link}/{study.name}.svg)", ""]
    return "\n".join(out)


def not_measured(study: Study, scale: str) -> str:
    """What a study without a record at `scale` says: nothing measured yet, and the command that measures it."""
    command = f"make paper PAPER_ARGS='--only={study.name}{'' if scale == 'machine' else ' --scale=' + scale}'"
    return (f"**Not yet measured** at this scale: `studies/results/{study.name}.jsonl` holds no record of it. "
            f"`{command}` measures it.")


def ratio(versus: Versus, rows: dict[tuple, list[dict]]) -> tuple[float, tuple, float, float] | None:
    """(ours over the best peer, that peer's row, our mean, its mean) on the versus' column, the ratio turned so
    that above 1 means ours leads; None when our row or every peer row lacks the figure."""
    ours = mean(rows.get(versus.ours, []), versus.column)
    peers = [(row, mean(rows.get(row, []), versus.column)) for row in versus.peers]
    peers = [(row, value) for row, value in peers if value]
    if not ours or not peers:
        return None
    pick = min if versus.lower_is_better else max
    row, best = pick(peers, key=lambda item: item[1])
    return (best / ours if versus.lower_is_better else ours / best), row, ours, best


def versus_lines(table: Table, rows: dict[tuple, list[dict]]) -> list[str]:
    """A speed table's headline ratios, one line each: ours against the best peer measured, or 'not measured'."""
    lines = []
    for versus in table.versus:
        found = ratio(versus, rows)
        column = next(c for c in table.columns if c.metric == versus.column)
        if found is None:
            lines.append(f"- Ours vs the best peer, {versus.text}: not measured at this scale.")
            continue
        value, peer, ours, best = found
        lines.append(f"- Ours vs the best peer, {versus.text}: **{value:.2f}×** ({column.heading} "
                     f"{ours:.{column.digits}f} vs {best:.{column.digits}f}, {table.name(peer)}).")
    return lines + ([""] if lines else [])


def verdict(claim, rows: dict[tuple, list[dict]], columns: Sequence[Column] = ()) -> str:
    """'held (accuracy 78.6 vs 69.4)', 'reversed (...)' or 'not measured at this scale'; the figures as the
    claim's column prints them (percent columns ×100)."""
    better, worse = mean(rows.get(claim.better, []), claim.column), mean(rows.get(claim.worse, []), claim.column)
    if better is None or worse is None:
        return "not measured at this scale"
    held = better < worse if claim.lower_is_better else better > worse
    outcome = "tied" if better == worse else "held" if held else "reversed"
    column = next((c for c in columns if c.metric == claim.column), None)
    if column is None:
        return f"{outcome} ({better:.4g} vs {worse:.4g})"
    scale = 100 if column.percent else 1
    return (f"{outcome} ({column.heading} {better * scale:.{column.digits}f} vs "
            f"{worse * scale:.{column.digits}f})")


def claims(table: Table, rows: dict[tuple, list[dict]], whose: str = "The paper") -> list[str]:
    """The paper's claims (or a speed study's), each held, reversed, tied or not measured at this scale."""
    lines = [f"- {whose}: {claim.text}. Here: **{verdict(claim, rows, table.columns)}**." for claim in table.claims]
    return lines + ([""] if lines else [])


def whose(study: Study) -> str:
    """Who makes a study's claims: its `claims_by`, else the paper (a paper study) or the project (a speed one)."""
    return study.claims_by or ("The paper" if study.kind == "paper" else "The claim")


def headline(store: Store, scale: str, studies: Sequence[Study] = STUDIES) -> str:
    """The README's results block: every claim of every paper study and whether it held here, with links; † where
    a figure behind the verdict is migrated, not yet re-run."""
    lines = ["| table | the claim (the paper's, unless named) | here |", "|---|---|---|"]
    for study in studies:
        if study.kind != "paper":
            continue
        rows = row_records(study.table, store.latest(study.name, scale).values())
        anchor = "".join(c for c in study.title.lower().replace(" ", "-") if c.isalnum() or c in "-_")
        for claim in study.table.claims:
            behind = [r for row in (claim.better, claim.worse) for r in rows.get(row, [])
                      if claim.column in r.get("metrics", {})]
            text = f"{study.claims_by}: {claim.text}" if study.claims_by else claim.text
            lines.append(f"| [{study.name}](docs/paper.md#{anchor}) | {text} | "
                         f"{verdict(claim, rows, study.table.columns)}{mark(behind)} |")
    return "\n".join(lines) + "\n"


README_BEGIN, README_END = "<!-- results:begin -->", "<!-- results:end -->"


def update_readme(path: str, block: str) -> bool:
    """Replaces the README's generated results block (between the markers) with `block`; False when the README
    has no markers."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if README_BEGIN not in text or README_END not in text:
        return False
    head, rest = text.split(README_BEGIN, 1)
    tail = rest.split(README_END, 1)[1]
    plots.write_if_changed(path, f"{head}{README_BEGIN}\n{block}{README_END}{tail}")
    return True


def rerun_comparison(study: Study, store: Store, scale: str) -> list[str]:
    """Runs that have both a migrated figure and the runner's own record: how close the re-run came."""
    by_key: dict[str, dict[str, dict]] = {}
    for record in store.load(study.name):
        if record.get("scale") == scale:
            by_key.setdefault(record["key"], {})[record.get("origin")] = record
    pairs = [(k, v[RUN], v[MIGRATED]) for k, v in sorted(by_key.items()) if RUN in v and MIGRATED in v]
    rows = []
    for key, new, old in pairs:
        for column in study.table.columns:
            if column.metric in new["metrics"] and column.metric in old["metrics"]:
                a, b = new["metrics"][column.metric], old["metrics"][column.metric]
                scale_by = 100 if column.percent else 1
                rows.append(f"| {key} | {column.heading} | {a * scale_by:.2f} | {b * scale_by:.2f} | "
                            f"{(a - b) * scale_by:+.2f} |")
    if not rows:  # e.g. a re-run pre-training: its figures are its evaluations'
        return []
    return ["Re-run by this runner against the migrated figure of the same run:", "",
            "| run | metric | re-run | migrated | difference |", "|---|---|---|---|---|", *rows, ""]


def provenance(latest: Sequence[dict]) -> list[str]:
    """Which commits and CPUs the figures come from, and how many were migrated rather than run here."""
    shown = [r for r in latest if r.get("labels")]
    cpus = sorted({r.get("cpu") or "CPU not recorded" for r in shown})
    commits = sorted({r.get("commit") or "?" for r in shown})
    migrated = sum(r.get("origin") == MIGRATED for r in shown)
    text = (f"Records: {len(shown)} run(s) at commit(s) {', '.join(commits)}; CPU: {'; '.join(cpus)}."
            + (f" † {migrated} migrated from the old bench/results files (not yet re-run by this runner)."
               if migrated else ""))
    recovered = sum(bool(r.get("recovered_from")) for r in shown if r.get("origin") == MIGRATED)
    if recovered:
        text += f" ‡ {recovered} of them were recovered from an earlier rendering of the old doc, not a run's own file."
    return [text, ""]


def write_reports(store: Store, scale: str, folder: str, studies: Sequence[Study] = STUDIES) -> list[str]:
    """Writes the report of every kind ("paper", "speed") under `folder` (plots in folder/NAME/) and returns the
    paths; only what changed is rewritten."""
    written = []
    for kind, (heading, _, name) in HEADER.items():
        mine = [s for s in studies if s.kind == kind]
        if not mine:
            continue
        plot_dir = os.path.join(folder, name)
        os.makedirs(plot_dir, exist_ok=True)
        intro = [heading, "", f"Generated by `make paper PAPER_ARGS=--report_only` from `studies/results/` "
                 f"(scale: {scale}); do not edit by hand. How the studies run: [studies.md](studies.md).", "",
                 "Figures are mean ± sd over seeds (n runs). † marks a figure migrated from the old per-run files "
                 "of bench/results, not yet re-run by the runner, and ‡ one whose old file was itself recovered "
                 "from an earlier rendering of the old benchmarks doc. The *paper* column holds the paper's own "
                 "figure for that row's task and column where it printed one: its BERT-Base or BERT-Large on the "
                 "full task (a proxy task's row shows the real task's figure; each study's text says which), a "
                 "scale, not a target.", ""]
        text = "\n".join(intro + [study_section(s, store, scale, plot_dir, name) for s in mine]).rstrip() + "\n"
        path = os.path.join(folder, f"{name}.md")
        plots.write_if_changed(path, text)
        written.append(path)
    return written
