"""benchmarks/quality_filters.py: what a filter on the quality score keeps."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from quality_filters import filter_line  # noqa: E402


def test_filter_counts_kept_bad_and_good_variants_kept():
    # kept at 0.8: the first three; of them the third's true r2 is below 0.8; of the three at or above 0.8
    # (the first, second and fourth) two are kept
    estimate = np.array([0.9, 0.85, 0.8, 0.5, 0.1])
    true = np.array([0.95, 0.9, 0.4, 0.99, 0.2])
    line = filter_line("tool", estimate, true, 0.8)
    assert "keeps      3 of 5" in line
    assert f"mean true r2 {(0.95 + 0.9 + 0.4) / 3:.4f}, 1 below 0.8" in line
    assert line.endswith(f"of the 3 at or above 0.8, {2 / 3:.3f}")
