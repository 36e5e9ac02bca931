"""PNG figures of an Evaluation: r2 by MAF bin, and quality-score calibration."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # after the backend is chosen
import pandas as pd

from genimpute.evaluation import BIN_LABELS, EVERYONE

FIGSIZE = (7.0, 4.5)  # inches
DPI = 100  # so every figure is 700 x 450 pixels


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def r2_by_maf(accuracy: pd.DataFrame, path: str | Path) -> Path:
    """Aggregate r2 per MAF bin over every sample, one line per tool; bins
    no tool has variants in are left out."""
    table = accuracy[(accuracy["population"] == EVERYONE) & accuracy["maf_bin"].isin(BIN_LABELS)]
    filled = [b for b in BIN_LABELS if (table.loc[table["maf_bin"] == b, "variants"] > 0).any()]
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for tool, rows in table.groupby("tool", sort=False):
        rows = rows.set_index("maf_bin").reindex(filled)
        ax.plot(range(len(filled)), rows["aggregate_r2"], marker="o", label=tool)
    ax.set_xticks(range(len(filled)), filled, rotation=20)
    ax.set_xlabel("minor allele frequency bin")
    ax.set_ylabel("aggregate r²")
    ax.set_ylim(top=1.0)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, Path(path))


def calibration(table: pd.DataFrame, path: str | Path) -> Path:
    """Mean true vs mean estimated per-variant r2 per estimate bin, one line
    per tool, against the diagonal of perfect calibration."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    for tool, rows in table[table["variants"] > 0].groupby("tool", sort=False):
        ax.plot(rows["mean_estimated_r2"], rows["mean_true_r2"], marker="o", label=f"{tool} ({rows['field'].iloc[0]})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("estimated r² (tool's own per-variant score)")
    ax.set_ylabel("true r² (against truth)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, Path(path))
