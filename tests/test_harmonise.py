"""Allele harmonisation: decisions per site, recoding, and the stops that
point at a genome-build or strand problem."""

import csv

import numpy as np
import pytest
import vcf_edit
from paths import PANEL, TARGET_PHASED

from genimpute.errors import PanelMismatchError
from genimpute.harmonise import (
    FLIP,
    FLIP_SWAP,
    MATCH,
    PALINDROMIC_AMBIGUOUS,
    PALINDROMIC_KEEP,
    PALINDROMIC_SWAP,
    SWAP,
    SiteDecision,
    classify,
    palindromic_decision,
    recode_rows,
)
from genimpute.io.vcf_reader import read_target
from genimpute.panel import ReferencePanel, align_target


@pytest.fixture(scope="module")
def panel() -> ReferencePanel:
    return ReferencePanel.from_vcf(PANEL)


@pytest.mark.parametrize("target, panel_alleles, expected", [
    (("A", "G"), ("A", "G"), MATCH),
    (("G", "A"), ("A", "G"), SWAP),
    (("T", "C"), ("A", "G"), FLIP),
    (("C", "T"), ("A", "G"), FLIP_SWAP),
    (("a", "g"), ("A", "G"), MATCH),  # case does not matter
    (("A", "."), ("A", "G"), MATCH),  # monomorphic in the target
    (("G", "."), ("A", "G"), SWAP),
    (("T", "."), ("A", "G"), FLIP),
    (("A", "T"), ("A", "T"), PALINDROMIC_AMBIGUOUS),  # left to allele frequencies
    (("T", "A"), ("A", "T"), PALINDROMIC_AMBIGUOUS),
    (("AT", "A"), ("AT", "A"), MATCH),  # indels match or swap, never flip
    (("A", "AT"), ("AT", "A"), SWAP),
    (("TA", "T"), ("AT", "A"), None),
    (("A", "C"), ("A", "G"), None),  # a different SNP at the position
    (("A", "G"), ("A", "AG"), None),
])
def test_classify(target, panel_alleles, expected):
    assert classify(*target, *panel_alleles) == expected


def test_palindromic_decision_needs_clear_odds():
    assert palindromic_decision(0.1, 200, 0.1) == PALINDROMIC_KEEP
    assert palindromic_decision(0.9, 200, 0.1) == PALINDROMIC_SWAP
    assert palindromic_decision(0.45, 200, 0.45) == PALINDROMIC_AMBIGUOUS  # too close to 50%
    assert palindromic_decision(0.55, 20, 0.38) == PALINDROMIC_AMBIGUOUS  # too few alleles to tell
    assert palindromic_decision(float("nan"), 0, 0.1) == PALINDROMIC_AMBIGUOUS


def test_recode_keeps_missing_and_absent_codes():
    alleles = np.array([[0, 1, -1, -2, 2]] * 3, dtype=np.int8)
    decisions = [SiteDecision(0, 0, MATCH, 1), SiteDecision(1, 0, SWAP, 1), SiteDecision(2, 0, "split", 2)]
    assert recode_rows(alleles, np.arange(3), decisions).tolist() == [[0, 1, -1, -2, 0], [1, 0, -1, -2, 0],
                                                                      [0, 0, -1, -2, 1]]


def test_rows_are_recoded_by_their_own_decision_whatever_the_block():
    rng = np.random.default_rng(3)
    alleles = rng.integers(-2, 3, size=(50, 8)).astype(np.int8)
    rows = rng.permutation(50)[:30]
    decisions = [SiteDecision(int(r), 0, (MATCH, SWAP, "split")[i % 3], 1 + (i % 3 == 2)) for i, r in enumerate(rows)]
    expected = [[(a == 0 if d.decision == SWAP else a == d.alt_index) if a >= 0 else a for a in alleles[r]]
                for r, d in zip(rows, decisions)]
    for block in (1, 7, 4096):
        assert recode_rows(alleles, rows, decisions, block).tolist() == np.array(expected, dtype=np.int8).tolist()


def _align(panel, path, **kwargs):
    return align_target(panel, read_target(path), source=str(path), **kwargs)


def test_swapped_and_flipped_records_give_the_original_alleles(panel, tmp_path):
    header, records = vcf_edit.read_lines()
    edits = [vcf_edit.swap, vcf_edit.flip, lambda r: vcf_edit.swap(vcf_edit.flip(r))]
    expected = {}
    for i, record in enumerate(records):
        if not vcf_edit.is_palindromic(record) and i % 4 < 3:
            records[i] = edits[i % 4](record)
            expected[i] = (SWAP, FLIP, FLIP_SWAP)[i % 4]
    original = _align(panel, TARGET_PHASED)
    edited = _align(panel, vcf_edit.write(tmp_path / "edited.vcf", header, records))
    decisions = {d.target_row: d.decision for d in edited.decisions}
    assert {i: decisions[i] for i in expected} == expected
    assert len(expected) > 30
    # with strand flips about, A/T and C/G SNPs go by frequency, and may be dropped
    kept = np.isin(original.target_rows, edited.target_rows)
    assert set(original.target_rows[~kept]) <= {i for i, r in enumerate(records) if vcf_edit.is_palindromic(r)}
    np.testing.assert_array_equal(edited.panel_rows, original.panel_rows[kept])
    np.testing.assert_array_equal(edited.haplotypes, original.haplotypes[kept])


def test_whole_file_on_the_other_strand(panel, tmp_path):
    """Every record complemented: SNPs are flips, and A/T, C/G SNPs are
    decided by frequency (never wrongly) or dropped, since the strand cannot
    be read off the letters any more."""
    header, records = vcf_edit.read_lines()
    flipped = _align(panel, vcf_edit.write(tmp_path / "flipped.vcf", header, [vcf_edit.flip(r) for r in records]))
    original = _align(panel, TARGET_PHASED)
    palindromic = [i for i, r in enumerate(records) if vcf_edit.is_palindromic(r)]
    assert palindromic, "the slice should hold A/T or C/G SNPs"
    for d in flipped.decisions:
        if d.target_row in palindromic:
            assert d.decision in (PALINDROMIC_KEEP, PALINDROMIC_AMBIGUOUS)  # the truth is: codes kept
        else:
            assert d.decision == FLIP
    kept = np.isin(original.target_rows, flipped.target_rows)
    np.testing.assert_array_equal(flipped.haplotypes, original.haplotypes[kept])


def test_palindromes_are_read_as_written_on_the_panel_strand(panel):
    aln = _align(panel, TARGET_PHASED)
    palindromic = [d for d in aln.decisions if d.decision.startswith("palindromic")]
    assert palindromic and all(d.decision == PALINDROMIC_KEEP and "as written" in d.detail for d in palindromic)


def test_another_genome_build_is_named(panel, tmp_path):
    header, records = vcf_edit.read_lines()
    shifted = [r[:1] + [str(int(r[1]) + 7)] + r[2:] for r in records]
    with pytest.raises(PanelMismatchError, match="genome build"):
        _align(panel, vcf_edit.write(tmp_path / "b38.vcf", header, shifted))


def test_too_many_allele_mismatches_stop(panel, tmp_path):
    header, records = vcf_edit.read_lines()
    bad = [r[:4] + ["AAAA"] + r[5:] if i % 5 == 0 else r for i, r in enumerate(records)]  # 20% mismatched
    audit = tmp_path / "audit.tsv"
    with pytest.raises(PanelMismatchError, match="strand"):
        _align(panel, vcf_edit.write(tmp_path / "bad.vcf", header, bad), audit=audit)
    # the audit is written before the stop, to show which sites disagree
    rows = list(csv.DictReader(audit.open(), delimiter="\t"))
    assert len(rows) == len(records)
    assert sum(r["decision"] == "allele-mismatch" for r in rows) == len(records[::5])


def test_a_few_mismatches_are_passed_through(panel, tmp_path):
    header, records = vcf_edit.read_lines()
    records[5] = records[5][:4] + ["AAAA"] + records[5][5:]
    aln = _align(panel, vcf_edit.write(tmp_path / "few.vcf", header, records))
    assert aln.unmatched_rows.tolist() == [5]


def test_audit_lists_every_decision(panel, tmp_path):
    audit = tmp_path / "audit.tsv"
    aln = _align(panel, TARGET_PHASED, audit=audit)
    rows = list(csv.DictReader(audit.open(), delimiter="\t"))
    assert [r["decision"] for r in rows] == [d.decision for d in aln.decisions]
    assert rows[0].keys() == {"chrom", "pos", "target_ref", "target_alt", "panel_id", "panel_ref", "panel_alt", "decision", "detail"}
    assert all(r["target_ref"] == r["panel_ref"] for r in rows if r["decision"] == MATCH)


def test_a_duplicated_palindrome_is_used_once(panel, tmp_path):
    header, records = vcf_edit.read_lines()
    i = next(i for i, r in enumerate(records) if vcf_edit.is_palindromic(r))
    records.insert(i + 1, list(records[i]))
    aln = _align(panel, vcf_edit.write(tmp_path / "dup.vcf", header, records))
    assert [d.decision for d in aln.decisions[i: i + 2]] == [PALINDROMIC_KEEP, "duplicate"]
    assert len(np.unique(aln.panel_rows)) == len(aln.panel_rows)


def test_a_palindromic_alt_of_a_multiallelic_record_is_matched(panel, tmp_path):
    header, records = vcf_edit.read_lines()
    i = next(i for i, r in enumerate(records) if vcf_edit.is_palindromic(r))
    ref, alt = records[i][3], records[i][4]
    records[i][4] = alt + "," + next(a for a in "ACGT" if a not in (ref, alt))  # A>T becomes A>T,C
    original = _align(panel, TARGET_PHASED)
    aln = _align(panel, vcf_edit.write(tmp_path / "multi.vcf", header, records))
    decision = next(d for d in aln.decisions if d.target_row == i)
    assert (decision.decision, decision.alt_index) == ("split", 1)
    np.testing.assert_array_equal(aln.panel_rows, original.panel_rows)
    np.testing.assert_array_equal(aln.haplotypes, original.haplotypes)
