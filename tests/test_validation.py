"""impute --validate: which typed sites are hidden, that they never leak into
their own evidence, and that the written imputation is unchanged."""

from __future__ import annotations

import re

import cyvcf2
import numpy as np
import pytest
from cli_helpers import run
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ARRAY, PANEL, TARGET_PHASED

from genimpute.config import WindowConfig
from genimpute.io.array_list import read_array_list
from genimpute.io.info_file import LOO_UNIT, loo_r2
from genimpute.panel import ReferencePanel, array_typed_mask
from genimpute.validation import choose_masked, score, validation_windows


class _Layout:
    """The attributes of a ReferencePanel that masking and windowing read."""

    def __init__(self, contig_index, positions):
        self.contig_index, self.positions = contig_index, positions


@st.composite
def layouts(draw):
    n = draw(st.integers(5, 120))
    contig_index = np.sort(np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))))
    positions = np.zeros(n, dtype=np.int64)
    for c in np.unique(contig_index):
        rows = np.nonzero(contig_index == c)[0]
        positions[rows] = np.sort(np.array(draw(st.lists(st.integers(1, 10_000), min_size=len(rows), max_size=len(rows)))))
    typed = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    fraction = draw(st.sampled_from([0.01, 0.05, 0.2, 0.5]))
    return _Layout(contig_index, positions), typed, fraction


@settings(max_examples=200, deadline=None)
@given(layouts(), st.integers(0, 3), st.integers(1, 30))
def test_masked_sites_are_predicted_once_and_never_used_as_evidence(layout, seed, n_typed):
    panel, typed, fraction = layout
    masked = choose_masked(panel, typed, fraction, seed)
    assert not (masked & ~typed).any()  # only typed sites are hidden
    for c in np.unique(panel.contig_index):
        on = panel.contig_index == c
        n = int((typed & on).sum())
        expected = 0 if n < 2 else min(n - 1, max(1, round(fraction * n)))
        assert int((masked & on).sum()) == expected
    np.testing.assert_array_equal(masked, choose_masked(panel, typed, fraction, seed))  # seeded

    windows = validation_windows(panel, typed, masked, WindowConfig(typed=n_typed), fraction)
    predicted = np.concatenate([w.predicted for w in windows]) if windows else np.array([], dtype=int)
    assert sorted(predicted.tolist()) == np.nonzero(masked)[0].tolist()
    for w in windows:
        evidence = w.columns[w.typed]
        assert typed[evidence].all() and not masked[evidence].any()
        assert len(set(panel.contig_index[w.columns].tolist())) == 1


def test_fraction_out_of_range():
    panel = _Layout(np.zeros(4, dtype=int), np.arange(1, 5))
    with pytest.raises(ValueError, match="fraction"):
        choose_masked(panel, np.ones(4, dtype=bool), 0.0, 1)


def test_validation_evidence_flanks_every_hidden_site():
    # On the real slice, the evidence of each hidden site includes the
    # nearest unhidden typed site on each side of it (where there is one).
    panel = ReferencePanel.from_vcf(PANEL)
    typed = array_typed_mask(panel, read_array_list(ARRAY))
    masked = choose_masked(panel, typed, 0.2, 1)
    visible = np.nonzero(typed & ~masked)[0]
    for w in validation_windows(panel, typed, masked, WindowConfig(typed=30), 0.2):
        evidence = set(w.columns[w.typed].tolist())
        for hidden in w.predicted:
            left, right = visible[visible < hidden], visible[visible > hidden]
            assert len(left) == 0 or left[-1] in evidence
            assert len(right) == 0 or right[0] in evidence


def test_score_pools_the_called_diploid_genotypes():
    # two hidden records, two samples; sample 2 has a missing call at the second
    probs = np.array([[0.9, 0.1, 0.2, 0.2], [0.6, 0.7, 0.1, 0.0]], np.float32)
    truth = np.array([[1, 0, 0, 0], [1, 1, 0, -1]], np.int8)
    result, hidden = score([(np.array([7, 3]), probs, truth)], 0.1, 3, 2)
    # dosages 1.0, 0.4, 1.3 against 1, 0, 2: cov 0.9, var 0.42 and 2 -> r2 0.81 / 0.84
    assert result.empirical_r2 == pytest.approx(27 / 28, rel=1e-6)
    assert result.concordance == 1.0 and result.masked_sites == 2
    # each record's own sums, records in panel order: record 3 has sample 1 alone (1.3 against 2)
    assert hidden.rows.tolist() == [3, 7] and hidden.sums.dtype == np.int64
    scale = np.array([1, LOO_UNIT, 1, LOO_UNIT, 1, LOO_UNIT])  # the dosage terms in units
    np.testing.assert_allclose(hidden.sums / scale, [[1, 1.3, 2, 1.69, 4, 2.6], [2, 1.4, 1, 1.16, 1, 1.0]], rtol=1e-6)
    assert hidden.at(np.array([3, 5, 7])).tolist() == [hidden.sums[0].tolist(), [0] * 6, hidden.sums[1].tolist()]
    assert loo_r2(hidden.sums.sum(axis=0)[None])[0] == pytest.approx(27 / 28, rel=1e-6)


def _records(path):
    return [str(rec) for rec in cyvcf2.VCF(str(path))]


def test_validate_reports_without_changing_the_imputation(tmp_path, trained):
    plain, checked = tmp_path / "plain.vcf.gz", tmp_path / "checked.vcf.gz"
    run(["-q", "impute", str(TARGET_PHASED), "--model", str(trained), "--out", str(plain)])
    result = run(["-q", "impute", str(TARGET_PHASED), "--model", str(trained), "--out", str(checked),
                  "--validate", "--validate-fraction", "0.1", "--seed", "3"])
    assert _records(plain) == _records(checked)

    header = cyvcf2.VCF(str(checked)).raw_header
    line = re.search(r"^##genimputeValidation=<(.*)>$", header, re.MULTILINE)
    assert line, header
    fields = dict(kv.split("=") for kv in line.group(1).split(","))
    n_typed = int(array_typed_mask(ReferencePanel.from_vcf(PANEL), read_array_list(ARRAY)).sum())
    assert int(fields["MaskedSites"]) == round(0.1 * n_typed)
    assert fields["Fraction"] == "0.1" and fields["Seed"] == "3"
    assert 0 <= float(fields["EmpiricalR2"]) <= 1 and 0 <= float(fields["Concordance"]) <= 1
    assert f"validation: {fields['MaskedSites']} typed sites hidden" in result.output
    assert "genimputeValidation" not in cyvcf2.VCF(str(plain)).raw_header


def test_validate_fraction_is_checked(tmp_path, trained):
    result = run(["impute", str(TARGET_PHASED), "--model", str(trained), "--out", str(tmp_path / "x.vcf.gz"),
                  "--validate", "--validate-fraction", "0.9"], ok=False)
    assert result.exit_code == 2 and "--validate-fraction" in result.output
    assert not (tmp_path / "x.vcf.gz").exists()
