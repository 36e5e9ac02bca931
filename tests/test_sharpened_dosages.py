"""benchmarks/experiments/sharpened_dosages.py: P(alt) sharpened in logit space, and DR2 from haplotype probabilities."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks" / "experiments"))
from sharpened_dosages import dosage_r2, sharpened  # noqa: E402


def test_sharpening_keeps_the_ends_and_the_middle_and_moves_the_rest_outward():
    p = np.array([0.0, 0.1, 0.5, 0.8, 1.0])
    assert sharpened(p, 1.0) == pytest.approx(p)
    out = sharpened(p, 2.0)
    assert out[[0, 2, 4]] == pytest.approx([0.0, 0.5, 1.0])
    assert out[1] == pytest.approx(0.01 / (0.01 + 0.81)) and out[3] == pytest.approx(0.64 / (0.64 + 0.04))


def test_dosage_r2_is_one_for_certain_calls_and_zero_for_the_frequency_alone():
    certain = np.array([[[1.0, 0.0], [0.0, 0.0]]])  # one variant, two samples, two haplotypes each
    flat = np.full((1, 2, 2), 0.25)
    monomorphic = np.zeros((1, 2, 2))
    assert dosage_r2(certain) == pytest.approx([1.0])
    assert dosage_r2(flat) == pytest.approx([0.0])
    assert dosage_r2(monomorphic) == pytest.approx([0.0])
