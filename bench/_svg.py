"""A plain SVG line chart for the docs (no plotting library is installed here)."""
from __future__ import annotations

from xml.sax.saxutils import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")


def line_chart(curves: dict[str, list[tuple[float, float]]], path: str, x_label: str, y_label: str,
               y_from_zero: bool = True, width: int = 640, height: int = 360) -> None:
    """Writes `curves` (name -> [(x, y), ...]) as one SVG line chart with axes, 5 ticks each and a legend."""
    pad, legend_width = 56, 210 if len(curves) > 3 else 110
    points = [p for curve in curves.values() for p in curve]
    max_x = max(x for x, _ in points) or 1.0
    low = 0.0 if y_from_zero else min(y for _, y in points)
    high = max(y for _, y in points)
    low, high = (low, high * 1.1) if y_from_zero else (low - 0.05 * (high - low), high + 0.05 * (high - low))
    high = high if high > low else low + 1.0
    right = width - pad - legend_width
    x = lambda v: pad + (right - pad) * v / max_x  # noqa: E731
    y = lambda v: height - pad - (height - 2 * pad) * (v - low) / (high - low)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{right}" y2="{height - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
             f'<text x="{(pad + right) / 2}" y="{height - 12}" text-anchor="middle">{escape(x_label)}</text>',
             f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">'
             f'{escape(y_label)}</text>']
    for k in range(5):
        value = low + (high - low) * k / 4
        parts.append(f'<text x="{pad - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.2f}</text>')
        step = max_x * k / 4
        parts.append(f'<text x="{x(step):.1f}" y="{height - pad + 16}" text-anchor="middle">{step:g}</text>')
    for i, (name, curve) in enumerate(curves.items()):
        color = COLORS[i % len(COLORS)]
        line = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in curve)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{line}"/>')
        parts.append(f'<text x="{right + 10}" y="{pad + 16 * i}" fill="{color}">{escape(name)}</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
