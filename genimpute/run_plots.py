"""The figures of a run's QC report, as inline SVG text: the target's
allele frequencies against the panel's, the samples' call rate and
heterozygosity, and the share of imputed records a DR2 filter keeps by MAF
bin. Written as SVG elements directly, not drawn with matplotlib: loading
and drawing with it was a good part of a small job's wall time. A dense point
cloud is drawn as a grid of cells shaded by their count, so a genome-wide
array's sites keep the page small."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from genimpute.run_facts import CHI2_OUTLIER, DR2_KEPT

WIDTH, HEIGHT = 576, 378  # pixels of one figure
MARGIN = (54, 16, 16, 46)  # left, right, top, bottom: room for the tick labels and axis titles
BLUE, RED, ORANGE, GREY = "#3465a4", "#cc0000", "#f57900", "#888888"
POINTS_DRAWN = 2000  # at most this many sites are drawn one by one; more are drawn as GRID_CELLS cells a side
GRID_CELLS = 100
OUTLIERS_DRAWN = 2000  # the highest chi-square outliers drawn; the legend counts them all


class Axes:
    """A plotting area of a figure: data coordinates to pixels, and the SVG
    text of its frame, ticks and axis titles."""

    def __init__(self, left: float, top: float, width: float, height: float, x_range: tuple, y_range: tuple):
        self.left, self.top, self.width, self.height = left, top, width, height
        self.x_range, self.y_range = x_range, y_range

    def x(self, value):
        low, high = self.x_range
        return self.left + (np.asarray(value, dtype=np.float64) - low) / ((high - low) or 1) * self.width

    def y(self, value):
        low, high = self.y_range
        return self.top + self.height - (np.asarray(value, dtype=np.float64) - low) / ((high - low) or 1) * self.height

    def frame(self, x_title: str, y_title: str, x_ticks=None, x_labels=None) -> str:
        """The frame, ticks with their labels (round values, or x_labels at
        x_ticks: named categories, slanted so that long names do not
        overlap), and the axis titles below and left of the area."""
        parts = [(f'<rect x="{self.left:.1f}" y="{self.top:.1f}" width="{self.width:.1f}" '
                  f'height="{self.height:.1f}" fill="none" stroke="#444"/>')]
        bottom = self.top + self.height
        named = x_labels is not None
        x_ticks = _ticks(*self.x_range) if x_ticks is None else x_ticks
        x_labels = x_labels if named else [_tick_label(t) for t in x_ticks]
        for tick, label in zip(x_ticks, x_labels):
            px = float(self.x(tick))
            parts.append(f'<line x1="{px:.1f}" y1="{bottom:.1f}" x2="{px:.1f}" y2="{bottom + 4:.1f}" stroke="#444"/>')
            if named:
                label_y = bottom + 14
                parts.append(f'<g transform="rotate(-20 {px:.1f} {label_y:.1f})">'
                             f'{_text(px, label_y, label, "end", 10)}</g>')
            else:
                parts.append(_text(px, bottom + 16, label, "middle"))
        for tick in _ticks(*self.y_range):
            py = float(self.y(tick))
            parts.append(f'<line x1="{self.left - 4:.1f}" y1="{py:.1f}" x2="{self.left:.1f}" y2="{py:.1f}" '
                         f'stroke="#444"/>' + _text(self.left - 6, py + 4, _tick_label(tick), "end"))
        parts.append(_text(self.left + self.width / 2, bottom + (50 if named else 36), x_title, "middle"))
        middle, title_x = self.top + self.height / 2, self.left - MARGIN[0] + 14
        parts.append(f'<text x="{title_x:.1f}" y="{middle:.1f}" font-size="12" text-anchor="middle" '
                     f'transform="rotate(-90 {title_x:.1f} {middle:.1f})">{html.escape(y_title)}</text>')
        return "".join(parts)


def _ticks(low: float, high: float, most: int = 6) -> np.ndarray:
    """Round values from low to high, at most `most` + 1 of them."""
    span = (high - low) or 1.0
    step = 10 ** np.floor(np.log10(span / most))
    step *= next(m for m in (1, 2, 5, 10) if span / (step * m) <= most)
    return np.arange(np.ceil(low / step) * step, high + step * 1e-9, step)


def _tick_label(value: float) -> str:
    return f"{value:.6g}" if abs(value) > 1e-12 else "0"


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 12) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">{html.escape(text)}</text>'


def _svg(width: float, height: float, body: str, label: str) -> str:
    """The svg element, sized and scalable (its viewBox), with a title for readers of the page."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" role="img">'
            f'<title>{html.escape(label)}</title><rect width="100%" height="100%" fill="white"/>{body}</svg>')


def _legend(x: float, y: float, entries: list) -> str:
    """(colour, label) entries, one a line from (x, y), on a white box that keeps them legible over the data."""
    width = 24 + 7 * max(len(label) for _, label in entries)
    box = (f'<rect x="{x - 5:.1f}" y="{y - 14:.1f}" width="{width}" height="{18 * len(entries) + 6}" fill="white" '
           f'fill-opacity="0.85" stroke="#ccc"/>')
    return box + "".join(f'<rect x="{x:.1f}" y="{y + 18 * i - 9:.1f}" width="10" height="10" fill="{colour}"/>'
                   + _text(x + 15, y + 18 * i, label) for i, (colour, label) in enumerate(entries))


def _area(width: float = WIDTH, height: float = HEIGHT, left: float = 0, below: float = 0, **ranges) -> Axes:
    """The plotting area of a figure `width` x `height` from x = left,
    inside MARGIN and `below` more pixels at the bottom."""
    m_left, m_right, m_top, m_bottom = MARGIN
    return Axes(left + m_left, m_top, width - m_left - m_right, height - m_top - m_bottom - below, **ranges)


def _points(axes: Axes, x: np.ndarray, y: np.ndarray, colour: str, radius: float, opacity: float) -> str:
    return "".join(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{radius}" fill="{colour}" fill-opacity="{opacity}"/>'
                   for px, py in zip(axes.x(x), axes.y(y)))


def _density(axes: Axes, x: np.ndarray, y: np.ndarray, colour: str) -> str:
    """The points as GRID_CELLS x GRID_CELLS cells of the axes' ranges, each
    shaded by the log of its count: bounded in size however many there are."""
    counts, _, _ = np.histogram2d(x, y, bins=GRID_CELLS, range=[axes.x_range, axes.y_range])
    shade = np.log1p(counts) / np.log1p(counts.max() or 1)
    cell_w, cell_h = axes.width / GRID_CELLS, axes.height / GRID_CELLS
    cells = []
    for i, j in zip(*np.nonzero(counts)):
        cells.append(f'<rect x="{axes.left + i * cell_w:.1f}" y="{axes.top + axes.height - (j + 1) * cell_h:.1f}" '
                     f'width="{cell_w:.2f}" height="{cell_h:.2f}" fill="{colour}" '
                     f'fill-opacity="{0.25 + 0.75 * shade[i, j]:.2f}"/>')
    return "".join(cells)


def frequency_scatter(freqs: pd.DataFrame) -> str:
    """Target ALT frequency against the panel's, outliers in red."""
    axes = _area(x_range=(0.0, 1.0), y_range=(0.0, 1.0))
    finite = np.isfinite(freqs["target_af"].to_numpy()) & np.isfinite(freqs["panel_af"].to_numpy())
    outlier = (freqs["chi2"] > CHI2_OUTLIER).to_numpy() & finite
    usual = freqs[finite & ~outlier]
    x, y = usual["panel_af"].to_numpy(), usual["target_af"].to_numpy()
    cloud = _points(axes, x, y, BLUE, 1.5, 0.4) if len(usual) <= POINTS_DRAWN else _density(axes, x, y, BLUE)
    worst = freqs[outlier].nlargest(OUTLIERS_DRAWN, "chi2")
    diagonal = (f'<line x1="{axes.x(0):.1f}" y1="{axes.y(0):.1f}" x2="{axes.x(1):.1f}" y2="{axes.y(1):.1f}" '
                f'stroke="{GREY}" stroke-width="0.8"/>')
    legend = _legend(axes.left + 10, axes.top + 16, [(BLUE, "typed sites"),
                                                     (RED, f"chi-square > {CHI2_OUTLIER:g} ({int(outlier.sum())})")])
    body = (diagonal + f'<g data-points="sites">{cloud}</g>'
            + f'<g data-points="outliers">{_points(axes, worst["panel_af"], worst["target_af"], RED, 3, 1)}</g>'
            + axes.frame("panel ALT frequency", "target ALT frequency") + legend)
    return _svg(WIDTH, HEIGHT, body, "target ALT frequency against the panel's at each typed site")


def _bars(axes: Axes, lefts, widths, heights, colour: str) -> str:
    """Bars from zero, one rect each, the bar's value in its data-value."""
    bottom = float(axes.y(0))
    return "".join(f'<rect x="{float(axes.x(left)):.2f}" y="{float(axes.y(h)):.2f}" '
                   f'width="{float(axes.x(left + w) - axes.x(left)):.2f}" height="{bottom - float(axes.y(h)):.2f}" '
                   f'fill="{colour}" data-value="{h:g}"/>' for left, w, h in zip(lefts, widths, heights))


def _histogram(values: np.ndarray, left: float, width: float, height: float, title: str) -> str:
    """A histogram of `values` in an area `width` wide from x = left: its
    bins as many as the values allow, from 5 to 50."""
    values = values[np.isfinite(values)]
    counts, edges = np.histogram(values, bins=min(50, max(5, len(values) // 4)))
    if len(values) and edges[0] == edges[-1]:  # one value: a bin of no width would not show
        edges = np.array([edges[0] - 0.5, edges[0] + 0.5])
    axes = _area(width, height, left, x_range=(float(edges[0]), float(edges[-1])),
                 y_range=(0.0, float(max(1, counts.max(initial=0)))))
    return (f'<g data-histogram="{html.escape(title)}">' + _bars(axes, edges[:-1], np.diff(edges), counts, BLUE)
            + "</g>" + axes.frame(title, "samples"))


def sample_histograms(samples: pd.DataFrame) -> str:
    """Call rate and heterozygosity of the target samples."""
    width, height = WIDTH * 1.4, HEIGHT * 0.8
    half = width / 2
    body = "".join(_histogram(samples[column].to_numpy(dtype=np.float64), i * half, half, height, label)
                   for i, (column, label) in enumerate((("call_rate", "call rate"),
                                                        ("heterozygosity", "heterozygosity"))))
    return _svg(width, height, body, "call rate and heterozygosity of the target samples")


def dr2_kept(quality: pd.DataFrame) -> str:
    """The share of imputed records with DR2 at or above each filter, by MAF bin."""
    table = quality[(quality["maf_bin"] != "all") & (quality["records"] > 0)]
    n = max(1, len(table))
    axes = _area(below=14, x_range=(-0.6, n - 0.4), y_range=(0.0, 1.0))
    colours = (BLUE, ORANGE)
    bars = "".join(f'<g data-bars="dr2_{threshold:g}">'
                   + _bars(axes, np.arange(len(table)) + (i - 1) * 0.38, [0.38] * len(table),
                           table[f"share_dr2_{threshold:g}"].fillna(0).to_numpy(), colours[i]) + "</g>"
                   for i, threshold in enumerate(DR2_KEPT))
    legend = _legend(axes.left + axes.width - 100, axes.top + axes.height - 36,
                     [(colours[i], f"DR2 >= {t:g}") for i, t in enumerate(DR2_KEPT)])
    frame = axes.frame("minor allele frequency bin", "share of imputed records kept", np.arange(len(table)),
                       list(table["maf_bin"]))
    return _svg(WIDTH, HEIGHT, bars + frame + legend, "imputed records a DR2 filter keeps, by MAF bin")
