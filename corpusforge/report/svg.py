"""Small inline-SVG charts: the report must open offline, so no plotting library or script."""

from __future__ import annotations

from html import escape

PALETTE = ["#3b6ea5", "#d9822b", "#5c9e5c", "#b5485d", "#7d5ba6", "#8c6d46", "#c06c9a", "#6b7b8c"]


def hbars(items: list[tuple[str, float]], *, width: int = 640, unit: str = "", fmt: str = "{:,.0f}",
          colors: list[str] | None = None) -> str:
    """Horizontal bars, one per (label, value)."""
    if not items:
        return "<p class='muted'>nothing to show</p>"
    h, label_w = 22, 230
    top = max((v for _, v in items), default=1) or 1
    rows = []
    for i, (label, value) in enumerate(items):
        w = (width - label_w - 90) * value / top
        c = (colors or PALETTE)[i % len(colors or PALETTE)] if colors else PALETTE[0]
        y = i * h
        rows.append(f"<text x='{label_w - 6}' y='{y + 15}' text-anchor='end'>{escape(str(label))}</text>"
                    f"<rect x='{label_w}' y='{y + 3}' width='{max(w, 1):.1f}' height='{h - 6}' fill='{c}'/>"
                    f"<text x='{label_w + w + 5:.1f}' y='{y + 15}'>{escape(fmt.format(value))}{unit}</text>")
    return f"<svg width='{width}' height='{len(items) * h + 4}' class='chart'>{''.join(rows)}</svg>"


def histogram(edges: list[float], counts: list[int], *, width: int = 640, height: int = 160, xlabel: str = "") -> str:
    if not counts or sum(counts) == 0:
        return "<p class='muted'>no values</p>"
    top = max(counts)
    bw = (width - 60) / len(counts)
    bars = "".join(f"<rect x='{50 + i * bw:.1f}' y='{height - 30 - (height - 50) * c / top:.1f}' width='{max(bw - 1, 1):.1f}' "
                   f"height='{(height - 50) * c / top:.1f}' fill='{PALETTE[0]}'><title>{edges[i]:.3g}..{edges[i + 1]:.3g}: "
                   f"{c}</title></rect>" for i, c in enumerate(counts))
    axis = (f"<text x='50' y='{height - 12}'>{edges[0]:.3g}</text>"
            f"<text x='{width - 10}' y='{height - 12}' text-anchor='end'>{edges[-1]:.3g}</text>"
            f"<text x='{width / 2}' y='{height - 2}' text-anchor='middle' class='muted'>{escape(xlabel)}</text>"
            f"<text x='45' y='20' text-anchor='end'>{top}</text>")
    return f"<svg width='{width}' height='{height}' class='chart'>{bars}{axis}</svg>"


def line(values: list[float], *, width: int = 640, height: int = 180, xlabel: str = "", ylabel: str = "") -> str:
    if not values:
        return "<p class='muted'>no values</p>"
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    n = max(len(values) - 1, 1)
    pts = " ".join(f"{50 + (width - 60) * i / n:.1f},{height - 30 - (height - 50) * (v - lo) / span:.1f}"
                   for i, v in enumerate(values))
    return (f"<svg width='{width}' height='{height}' class='chart'><polyline fill='none' stroke='{PALETTE[1]}' "
            f"stroke-width='2' points='{pts}'/><text x='45' y='20' text-anchor='end'>{hi:.3g}</text>"
            f"<text x='45' y='{height - 30}' text-anchor='end'>{lo:.3g}</text>"
            f"<text x='{width / 2}' y='{height - 5}' text-anchor='middle' class='muted'>{escape(xlabel)}</text>"
            f"<text x='12' y='{height / 2}' class='muted' transform='rotate(-90 12 {height / 2})' "
            f"text-anchor='middle'>{escape(ylabel)}</text></svg>")


def scatter(points: list[tuple[float, float]], *, curve: list[tuple[float, float]] | None = None,
            marks: list[tuple[float, float, str]] | None = None, width: int = 320, height: int = 200,
            xlabel: str = "", ylabel: str = "") -> str:
    """Points (measured), an optional line (predicted) and labelled marks (chosen, baselines)."""
    xs = [x for x, _ in points] + [x for x, _ in curve or []] + [m[0] for m in marks or []]
    ys = [y for _, y in points] + [y for _, y in curve or []] + [m[1] for m in marks or []]
    if not xs:
        return "<p class='muted'>no values</p>"
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = lambda x: 50 + (width - 60) * (x - x0) / ((x1 - x0) or 1)           # noqa: E731
    sy = lambda y: height - 30 - (height - 50) * (y - y0) / ((y1 - y0) or 1)  # noqa: E731
    parts = [f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='3' fill='{PALETTE[0]}' opacity='0.7'/>" for x, y in points]
    if curve:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in curve)
        parts.append(f"<polyline fill='none' stroke='{PALETTE[1]}' stroke-width='2' points='{pts}'/>")
    for i, (x, y, label) in enumerate(marks or []):
        c = PALETTE[(i + 2) % len(PALETTE)]
        parts.append(f"<rect x='{sx(x) - 4:.1f}' y='{sy(y) - 4:.1f}' width='8' height='8' fill='{c}'>"
                     f"<title>{escape(label)}</title></rect>"
                     f"<text x='{sx(x) + 6:.1f}' y='{sy(y) - 6:.1f}' fill='{c}'>{escape(label)}</text>")
    axis = (f"<text x='45' y='20' text-anchor='end'>{y1:.3g}</text>"
            f"<text x='45' y='{height - 30}' text-anchor='end'>{y0:.3g}</text>"
            f"<text x='50' y='{height - 12}'>{x0:.2g}</text>"
            f"<text x='{width - 10}' y='{height - 12}' text-anchor='end'>{x1:.2g}</text>"
            f"<text x='{width / 2}' y='{height - 2}' text-anchor='middle' class='muted'>{escape(xlabel)}</text>"
            f"<text x='12' y='{height / 2}' class='muted' transform='rotate(-90 12 {height / 2})' "
            f"text-anchor='middle'>{escape(ylabel)}</text>")
    return f"<svg width='{width}' height='{height}' class='chart'>{''.join(parts)}{axis}</svg>"
