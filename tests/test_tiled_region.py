"""benchmarks/tiled_region.py: a region made of copies of a short one, for
the engine's time and memory over a long region of a large panel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from paths import ARRAY, PANEL

from genimpute.panel import ReferencePanel

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "tiled_region.py"


def test_copies_hold_the_sources_haplotypes_further_along_in_bp_and_cm(tmp_path):
    source = ReferencePanel.from_vcf(PANEL)
    source.save(tmp_path / "source.gpanel")
    targets = tmp_path / "targets.vcf.gz"
    subprocess.run(["bcftools", "view", "-T", str(ARRAY), "-Oz", "-o", str(targets), str(PANEL)], check=True)
    subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "source.gpanel"), str(targets), "3",
                    str(tmp_path / "tiled")], check=True, capture_output=True)

    tiled = ReferencePanel.load(tmp_path / "tiled" / "panel.gpanel")
    m, shift = len(source), int(source.positions[-1] - source.positions[0]) + 1  # a copy's span
    assert len(tiled) == 3 * m
    np.testing.assert_array_equal(tiled.packed[2 * m:3 * m], source.packed[:])
    np.testing.assert_array_equal(tiled.positions[m:2 * m], source.positions + shift)
    np.testing.assert_allclose(np.diff(tiled.centimorgans[m:2 * m]), np.diff(source.centimorgans))
    seams = [m - 1, 2 * m - 1]  # each copy starts after the last one ends
    assert np.all(tiled.positions[seams] < tiled.positions[np.add(seams, 1)])
    assert np.all(tiled.centimorgans[seams] < tiled.centimorgans[np.add(seams, 1)])
    assert len(set(tiled.ids)) == 3 * m

    records = subprocess.run(["bcftools", "query", "-f", "%POS\n", str(tmp_path / "tiled" / "targets.vcf.gz")],
                             check=True, capture_output=True, text=True).stdout.split()
    typed = subprocess.run(["bcftools", "query", "-f", "%POS\n", str(targets)],
                           check=True, capture_output=True, text=True).stdout.split()
    assert [int(p) for p in records] == [int(p) + c * shift for c in range(3) for p in typed]
