"""Squared correlation (r2) of imputed dosages with the truth.

Two forms, because their inputs differ: `pooled_r2` from the cells
themselves (training's validation, impute --validate), `r2_from_sums` from
per-variant running sums that evaluation accumulates while streaming a VCF.
They also differ where a side is constant (see each docstring), so one is
not a drop-in for the other.
"""

from __future__ import annotations

import numpy as np


def pooled_r2(predicted: np.ndarray, truth: np.ndarray) -> float:
    """Squared Pearson correlation pooled over every cell.

    predicted, truth: arrays of any shape with the same number of cells,
    e.g. (V, S) dosages and true allele counts, or (U, Q) P(alt) and alleles;
    compared in float64. nan when either is constant.
    """
    predicted, truth = predicted.ravel().astype(np.float64), truth.ravel().astype(np.float64)
    if predicted.std() == 0 or truth.std() == 0:
        return float("nan")
    return float(np.corrcoef(predicted, truth)[0, 1] ** 2)


def r2_from_sums(sums: np.ndarray) -> np.ndarray:
    """Squared correlation from (..., >=6) running sums (n, x, y, xx, yy, xy),
    shape (...). nan where the truth does not vary (r2 undefined); 0 where
    the dosage does not vary but the truth does."""
    n, sx, sy, sxx, syy, sxy = (sums[..., i] for i in range(6))
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = sxy - sx * sy / n
        vx, vy = sxx - sx * sx / n, syy - sy * sy / n
        r2 = cov * cov / (vx * vy)
    r2 = np.where(vx > 1e-9, r2, 0.0)
    return np.where((n > 1) & (vy > 1e-9), r2, np.nan)
