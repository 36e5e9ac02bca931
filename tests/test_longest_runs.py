"""benchmarks/longest_runs.py: each haplotype's matching run through each site."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from longest_runs import runs_through  # noqa: E402


def test_runs_through_a_site_are_the_matching_runs_that_contain_it():
    target = np.array([0, 1, 1, 0, 1, 0], dtype=np.int8)
    panel = np.array([[0, 1, 1, 0, 1, 0],    # matches everywhere: a run of 6
                      [0, 1, 0, 0, 1, 0],    # differs at site 2: runs of 2 and 3
                      [1, 0, 0, 1, 0, 1]], dtype=np.int8).T  # differs everywhere
    expected = np.array([[6, 6, 6, 6, 6, 6], [2, 2, 0, 3, 3, 3], [0, 0, 0, 0, 0, 0]]).T
    np.testing.assert_array_equal(runs_through(panel, target), expected)
