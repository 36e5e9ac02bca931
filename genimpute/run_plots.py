"""The figures of a run's QC report, as inline SVG text: the target's
allele frequencies against the panel's, the samples' call rate and
heterozygosity, and the share of imputed records a DR2 filter keeps by MAF
bin. matplotlib, already a dependency, draws them; dense point clouds are
rasterised inside the SVG, so a genome-wide array's sites keep the page
small."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from genimpute.run_facts import CHI2_OUTLIER, DR2_KEPT

FIGSIZE = (6.4, 4.2)  # inches


def _pyplot():
    """matplotlib's pyplot, imported when a figure is drawn: loading it is a
    good part of a small job's wall time, which a run without its page
    (--no-html) need not pay."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt  # after the backend is chosen

    return plt


def _svg(fig) -> str:
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", dpi=90)
    _pyplot().close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # the element alone, without the XML prolog


def frequency_scatter(freqs: pd.DataFrame) -> str:
    """Target ALT frequency against the panel's, outliers in red."""
    fig, ax = _pyplot().subplots(figsize=FIGSIZE)
    outlier = freqs["chi2"] > CHI2_OUTLIER
    ax.scatter(freqs.loc[~outlier, "panel_af"], freqs.loc[~outlier, "target_af"], s=3, alpha=0.4, color="#3465a4",
               rasterized=True, label="typed sites")
    ax.scatter(freqs.loc[outlier, "panel_af"], freqs.loc[outlier, "target_af"], s=12, color="#cc0000",
               label=f"chi-square > {CHI2_OUTLIER:g} ({int(outlier.sum())})")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8)
    ax.set_xlabel("panel ALT frequency")
    ax.set_ylabel("target ALT frequency")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    return _svg(fig)


def sample_histograms(samples: pd.DataFrame) -> str:
    """Call rate and heterozygosity of the target samples."""
    fig, axes = _pyplot().subplots(1, 2, figsize=(FIGSIZE[0] * 1.4, FIGSIZE[1] * 0.8))
    for ax, column, label in zip(axes, ("call_rate", "heterozygosity"), ("call rate", "heterozygosity")):
        values = samples[column].dropna().to_numpy()
        ax.hist(values, bins=min(50, max(5, len(values) // 4)), color="#3465a4")
        ax.set_xlabel(label)
        ax.set_ylabel("samples")
    return _svg(fig)


def dr2_kept(quality: pd.DataFrame) -> str:
    """The share of imputed records with DR2 at or above each filter, by MAF bin."""
    table = quality[(quality["maf_bin"] != "all") & (quality["records"] > 0)]
    fig, ax = _pyplot().subplots(figsize=FIGSIZE)
    x = np.arange(len(table))
    for i, threshold in enumerate(DR2_KEPT):
        ax.bar(x + (i - 0.5) * 0.38, table[f"share_dr2_{threshold:g}"], width=0.38, label=f"DR2 >= {threshold:g}")
    ax.set_xticks(x, table["maf_bin"], rotation=20)
    ax.set_xlabel("minor allele frequency bin")
    ax.set_ylabel("share of imputed records kept")
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right")
    return _svg(fig)
