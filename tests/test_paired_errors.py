"""benchmarks/paired_errors.py: the sums and intervals that tell a bin's
difference between tools from chance."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from genimpute.metrics import pooled_r2, r2_from_sums

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from paired_errors import bootstrap_difference, cell_sums  # noqa: E402


def _cohort(seed: int = 0, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """(V, N) true allele counts and dosages: the truth plus noise."""
    rng = np.random.default_rng(seed)
    truth = rng.binomial(2, 0.2, size=(40, 30)).astype(np.float64)
    return truth, np.clip(truth + rng.normal(0, noise, truth.shape), 0, 2)


def test_sums_per_variant_and_per_sample_pool_to_the_same_r2():
    truth, dosage = _cohort()
    per_variant, per_sample = cell_sums(dosage, truth, 1), cell_sums(dosage, truth, 0)
    assert per_variant.shape == (40, 6) and per_sample.shape == (30, 6)
    assert np.allclose(per_variant.sum(0), per_sample.sum(0))
    assert np.isclose(r2_from_sums(per_variant.sum(0)), pooled_r2(dosage, truth))


def test_interval_is_zero_against_itself_and_excludes_zero_for_a_clearly_better_tool():
    truth, noisy = _cohort(noise=0.5)
    _, close = _cohort(noise=0.05)  # same seed: the same truth, less noise
    for axis in (0, 1):
        assert bootstrap_difference(cell_sums(noisy, truth, axis), cell_sums(noisy, truth, axis)) == (0.0, 0.0)
        low, high = bootstrap_difference(cell_sums(close, truth, axis), cell_sums(noisy, truth, axis))
        assert low < high < 0  # the less noisy tool's error is lower in every draw's 5-95% range


def test_interval_of_no_units_is_nan():
    assert all(np.isnan(bootstrap_difference(np.zeros((0, 6)), np.zeros((0, 6)))))


def test_bin_errors_pool_each_bins_variants():
    from paired_errors import bin_errors
    truth, dosage = _cohort(seed=2)
    bins = np.arange(40) % 3
    overall, by_bin = bin_errors(dosage, truth, bins)
    assert overall == pytest.approx(1 - pooled_r2(dosage, truth))
    assert by_bin[1] == pytest.approx(1 - pooled_r2(dosage[bins == 1], truth[bins == 1]))
    assert np.isnan(by_bin[5])  # a bin without variants has no error
