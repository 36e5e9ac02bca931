"""benchmarks/cohort_bins.py: a cohort's bins, and what counts as genimpute
at least Beagle's there."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from genimpute.evaluation import BIN_LABELS
from genimpute.metrics import pooled_r2

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from cohort_bins import FIRST_BIN, at_least, bin_r2, cells  # noqa: E402
from paired_errors import cell_sums  # noqa: E402


def test_level_at_four_decimals_counts_and_lower_does_not():
    genimpute = np.array([0.99954, 0.99944, 0.99970])
    beagle = np.array([0.99951, 0.99951, 0.99960])
    assert at_least(genimpute, beagle).tolist() == [True, False, True]


def test_each_bin_pools_its_own_variants_from_the_goals_first():
    rng = np.random.default_rng(0)
    truth = rng.binomial(2, 0.3, size=(60, 20)).astype(np.float64)
    dosage = np.clip(truth + rng.normal(0, 0.4, truth.shape), 0, 2)
    bins = np.arange(60) % len(BIN_LABELS)
    r2 = bin_r2(cell_sums(dosage, truth, 1), bins)
    assert len(r2) == len(BIN_LABELS) - FIRST_BIN
    for i, value in enumerate(r2, start=FIRST_BIN):
        assert np.isclose(value, pooled_r2(dosage[bins == i], truth[bins == i]))


def test_a_row_marks_the_bins_where_genimpute_is_below():
    row = cells({"genimpute": np.array([0.99954, 0.99944]), "beagle": np.array([0.99951, 0.99951])})
    assert row == "0.9995 / 0.9995   0.9994 / 0.9995*"
