"""benchmarks/seed_bins.py: the error ratio's geometric mean over seeds and
its interval across them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from seed_bins import T95, ratio_interval  # noqa: E402


def test_the_interval_is_the_t_interval_of_the_log_ratios():
    ratios = np.array([0.8, 0.9, 1.1, 0.95, 0.85])
    mean, low, high = ratio_interval(np.log(ratios))
    assert mean == pytest.approx(np.prod(ratios) ** (1 / 5))
    half = 2.132 * np.std(np.log(ratios), ddof=1) / np.sqrt(5)  # t(0.95, 4 df)
    assert (low, high) == pytest.approx((mean * np.exp(-half), mean * np.exp(half)))
    assert low < 1 < high  # these seeds do not tell the tools apart


def test_one_seed_has_no_interval_and_many_take_the_largest_tabled_quantile():
    mean, low, high = ratio_interval(np.log([0.9]))
    assert mean == pytest.approx(0.9) and np.isnan(low) and np.isnan(high)
    many = np.log(np.full(40, 0.9) + np.linspace(-0.01, 0.01, 40))
    _, low, high = ratio_interval(many)
    half = T95[max(T95)] * np.std(many, ddof=1) / np.sqrt(40)
    assert np.log(high) - np.log(low) == pytest.approx(2 * half)
