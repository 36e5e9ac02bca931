"""Unphased targets phased against the panel with an external phaser."""

import shutil

import numpy as np
import pytest
from paths import PANEL, TARGET_PHASED, TARGET_UNPHASED

from genimpute.config import PHASERS
from genimpute.errors import InputError
from genimpute.io.vcf_reader import ABSENT, MISSING, read_target
from genimpute.panel import ReferencePanel, align_target
from genimpute.phasing import find_phaser, phase_haplotypes, switch_errors


@pytest.fixture(scope="module")
def panel():
    return ReferencePanel.from_vcf(PANEL)


@pytest.fixture(scope="module")
def aligned(panel):
    """(unphased, phased truth) alignments of the same targets."""
    return align_target(panel, read_target(TARGET_UNPHASED)), align_target(panel, read_target(TARGET_PHASED))


def _phase(tool, panel, haps, rows):
    contig = panel.contig_names[panel.contig_index[rows[0]]]
    return phase_haplotypes(tool, haps, panel.haplotypes(rows), contig, panel.positions[rows],
                            [panel.refs[r] for r in rows], [panel.alts[r] for r in rows],
                            [f"s{i}" for i in range(haps.shape[1] // 2)], panel.samples)


def test_switch_errors_by_hand():
    truth = np.array([[0, 1], [1, 0], [0, 0], [0, 1], [1, 0]])
    assert switch_errors(truth, truth) == (0, 3)
    assert switch_errors(truth[:, ::-1], truth) == (0, 3)  # both haplotypes exchanged throughout: no switch
    assert switch_errors(np.array([[0, 1], [1, 0], [0, 0], [1, 0], [0, 1]]), truth) == (1, 3)


@pytest.mark.parametrize("tool", PHASERS)
def test_phasing_keeps_genotypes_and_recovers_phase(tool, panel, aligned):
    unphased, truth = aligned
    phased = _phase(tool, panel, unphased.haplotypes, unphased.panel_rows)
    # the same genotypes, homozygous calls untouched
    np.testing.assert_array_equal(phased[:, 0::2] + phased[:, 1::2], truth.haplotypes[:, 0::2] + truth.haplotypes[:, 1::2])
    switches, opportunities = switch_errors(phased, truth.haplotypes)
    assert opportunities > 100
    assert switches <= 0.1 * opportunities, f"{switches} switch errors in {opportunities}"


def test_missing_and_haploid_calls_come_back_as_given(panel, aligned):
    unphased, _ = aligned
    haps = unphased.haplotypes.copy()
    haps[::7, 2:4] = MISSING  # sample 1: some missing calls
    haps[:, 5] = ABSENT  # sample 2: haploid
    phased = _phase("beagle", panel, haps, unphased.panel_rows)
    np.testing.assert_array_equal(phased == MISSING, haps == MISSING)
    np.testing.assert_array_equal(phased[:, 4:6], haps[:, 4:6])
    np.testing.assert_array_equal(phased[:, 0::2] + phased[:, 1::2], haps[:, 0::2] + haps[:, 1::2])


def test_find_phaser():
    assert find_phaser("auto") == next(t for t in PHASERS if shutil.which(t))
    with pytest.raises(InputError, match="beagle, shapeit4"):
        find_phaser("eagle")


def test_no_phaser_on_path_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match="apt-get install beagle"):
        find_phaser("auto")
