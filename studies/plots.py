"""Plain SVG charts for the generated report (no plotting library is installed here; the bytes depend only on the
figures, so a regenerated report is identical)."""
from __future__ import annotations

import os
import statistics
from typing import Mapping, Sequence
from xml.sax.saxutils import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def write_if_changed(path: str, text: str) -> None:
    """Writes `text` to `path` through a temp name and a rename, unless the file already holds it."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def study_chart(table, columns: Sequence, rows: Mapping[tuple, list[dict]], path: str) -> str | None:
    """A grouped bar chart: one group per column, one bar per row (mean, with a ±sd whisker), the paper's figure
    as a black tick where it printed one. Returns `path`, or None when there is nothing to draw."""
    groups = []
    for column in columns:
        bars = []
        for row in table.ordered(rows):
            found = rows[row]
            values = [r["metrics"][column.metric] for r in found if column.metric in r.get("metrics", {})]
            scale = 100.0 if column.percent else 1.0
            paper = table.paper.get(row, {}).get(column.metric)
            if values:
                sd = statistics.stdev(values) * scale if len(values) > 1 else 0.0
                bars.append((table.name(row), statistics.fmean(values) * scale, sd,
                             None if paper is None else paper * scale))
        if bars:
            groups.append((column.heading, bars))
    if not groups:
        return None
    write_if_changed(path, bar_chart(groups))
    return path


def bar_chart(groups: Sequence[tuple[str, Sequence[tuple[str, float, float, float | None]]]],
              width: int = 720, height: int = 320) -> str:
    """SVG text of grouped bars: groups of (heading, [(name, value, sd, paper or None)])."""
    names = list(dict.fromkeys(name for _, bars in groups for name, *_ in bars))
    top = max(max(v + sd, p or 0.0) for _, bars in groups for _, v, sd, p in bars) * 1.1 or 1.0
    low = min(0.0, min(v for _, bars in groups for _, v, _, _ in bars))
    pad, legend = 50, 170
    plot_w, plot_h = width - pad - legend, height - 2 * pad
    y = lambda v: pad + plot_h * (top - v) / (top - low)  # noqa: E731
    group_w = plot_w / len(groups)
    bar_w = group_w * 0.8 / max(len(names), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{y(0):.1f}" x2="{pad + plot_w}" y2="{y(0):.1f}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>']
    for k in range(5):
        value = low + (top - low) * k / 4
        parts.append(f'<text x="{pad - 4}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.3g}</text>')
    for g, (heading, bars) in enumerate(groups):
        x0 = pad + g * group_w + group_w * 0.1
        parts.append(f'<text x="{pad + (g + 0.5) * group_w:.1f}" y="{height - pad + 16}" '
                     f'text-anchor="middle">{escape(heading)}</text>')
        for name, value, sd, paper in bars:
            i = names.index(name)
            x = x0 + i * bar_w
            parts.append(f'<rect x="{x:.1f}" y="{min(y(value), y(0)):.1f}" width="{bar_w * 0.9:.1f}" '
                         f'height="{abs(y(0) - y(value)):.1f}" fill="{COLORS[i % len(COLORS)]}"/>')
            if sd:
                mid = x + bar_w * 0.45
                parts.append(f'<line x1="{mid:.1f}" y1="{y(value - sd):.1f}" x2="{mid:.1f}" y2="{y(value + sd):.1f}" '
                             f'stroke="black"/>')
            if paper is not None:
                parts.append(f'<line x1="{x:.1f}" y1="{y(paper):.1f}" x2="{x + bar_w * 0.9:.1f}" y2="{y(paper):.1f}" '
                             f'stroke="black" stroke-width="3"/>')
    for i, name in enumerate(names):
        parts.append(f'<rect x="{width - legend + 8}" y="{pad + 16 * i - 9}" width="10" height="10" '
                     f'fill="{COLORS[i % len(COLORS)]}"/>')
        parts.append(f'<text x="{width - legend + 22}" y="{pad + 16 * i}">{escape(name)}</text>')
    parts.append(f'<text x="{width - legend + 8}" y="{pad + 16 * len(names) + 8}">▬ the paper</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
