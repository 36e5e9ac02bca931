"""Which target samples are panel samples (genimpute.identity): renamed
duplicates are found by their genotypes over a long span, and only there; a
relative who shares one region, or the same genotypes over a short region,
is not taken for the same sample."""

import csv
import gzip

import numpy as np
import pytest
import vcf_edit
from paths import PANEL, TARGET_PHASED

from genimpute.identity import (IDENTITY_CONCORDANCE, MIN_IDENTITY_SPAN_BP, _pack_blocks, _panel_codes, _share_blocks,
                                _sorted_by_code, sample_audit_path, samples_in_panel, write_sample_audit)
from genimpute.io.vcf_reader import read_target
from genimpute.io.vcf_reader import MISSING
from genimpute.panel import Alignment, ReferencePanel, align_target

# the slice's 0.1 Mb spread over 30 Mb: the span a whole-chromosome target has
STRETCH = 300


def _panel_lines(stretch: int = 1) -> tuple[list[str], list[str], list[list[str]]]:
    """(## header lines, #CHROM columns, records) of the test panel, its
    positions spread `stretch` times further apart."""
    with gzip.open(PANEL, "rt") as handle:
        lines = handle.read().splitlines()
    header = [x for x in lines if x.startswith("##") and not x.startswith("##contig")]
    columns = lines[len([x for x in lines if x.startswith("##")])].split("\t")
    records = [x.split("\t") for x in lines if not x.startswith("#")]
    first = int(records[0][1])
    for r in records:
        r[1] = str(1 + (int(r[1]) - first) * stretch)
    return header, columns, records


def _write_panel(tmp_path, stretch: int) -> ReferencePanel:
    header, columns, records = _panel_lines(stretch)
    return ReferencePanel.from_vcf(vcf_edit.write(tmp_path / "panel.vcf", header + ["\t".join(columns)], records))


def _target(tmp_path, stretch: int, samples: dict) -> tuple:
    """A target of panel samples at every panel record: each new name takes
    the calls of the panel samples listed for it, one after another in equal
    runs of records (one name: that sample; two: a mosaic of the two)."""
    header, columns, records = _panel_lines(stretch)
    out = []
    for r in records:
        calls = []
        for sources in samples.values():
            run = min(len(sources) * len(out) // len(records), len(sources) - 1)
            calls.append(r[columns.index(sources[run])])
        out.append(r[:9] + calls)
    path = vcf_edit.write(tmp_path / "target.vcf", header + ["\t".join(columns[:9] + list(samples))], out)
    return read_target(path)


def _matches(tmp_path, stretch, samples, **kwargs):
    panel = _write_panel(tmp_path, stretch)
    target = _target(tmp_path, stretch, samples)
    return panel, samples_in_panel(panel, align_target(panel, target), target.samples, **kwargs)


def test_the_stretched_slice_spans_enough_and_the_slice_does_not():
    positions = [int(r[1]) for r in _panel_lines()[2]]
    assert positions[-1] - positions[0] < MIN_IDENTITY_SPAN_BP <= (positions[-1] - positions[0]) * STRETCH


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)])
def test_renamed_duplicates_are_found_at_every_position_of_the_target(tmp_path, order):
    """Several renamed duplicates, each at the first, a middle and the last
    position: each maps to its own panel sample."""
    samples = ReferencePanel.from_vcf(PANEL).samples
    originals = [samples[i] for i in (5, 2, len(samples) - 1, 17)]
    chosen = [originals[i] for i in order]
    panel = _write_panel(tmp_path, STRETCH)
    target = _target(tmp_path, STRETCH, {f"RENAMED{j}": [name] for j, name in enumerate(chosen)})
    matches = samples_in_panel(panel, align_target(panel, target), target.samples)
    assert matches.in_panel.tolist() == [panel.samples.index(name) for name in chosen]
    assert [matches.decision(s) for s in range(4)] == ["identical genotypes"] * 4


def test_a_short_span_reports_identical_genotypes_but_does_not_decide(tmp_path):
    panel, matches = _matches(tmp_path, 1, {"NA99999": ["HG00103"], "HG00110": ["HG00110"]})
    assert matches.closest.tolist() == [panel.samples.index("HG00103"), panel.samples.index("HG00110")]
    assert matches.identical.all() and matches.informative.min() >= 100
    assert matches.in_panel.tolist() == [-1, panel.samples.index("HG00110")]  # the second by its name
    assert matches.possible_duplicates.tolist() == [True, False]
    assert matches.decision(0) == "identical genotypes, span too short: kept" and matches.decision(1) == "same name"


def test_a_relative_sharing_one_region_is_not_the_same_sample(tmp_path):
    """A mosaic of two panel samples (each one's calls over half the span)
    agrees with either only where it is that one."""
    panel, matches = _matches(tmp_path, STRETCH, {"MOSAIC": ["HG00103", "HG00110"]})
    assert matches.informative[0] >= 100 and matches.concordance[0] < IDENTITY_CONCORDANCE
    assert matches.in_panel.tolist() == [-1] and not matches.possible_duplicates.any()
    assert matches.decision(0) == "not in panel"


def test_strangers_are_not_close_to_any_panel_sample():
    panel = ReferencePanel.from_vcf(PANEL)
    strangers = read_target(TARGET_PHASED)
    matches = samples_in_panel(panel, align_target(panel, strangers), strangers.samples)
    assert (matches.in_panel == -1).all() and not matches.identical.any()


def test_the_sample_audit_names_each_decision(tmp_path):
    samples = {"NA99999": ["HG00103"], "HG00110": ["HG00110"], "MOSAIC": ["HG00096", "HG00116"]}
    panel, matches = _matches(tmp_path, 1, samples)
    path = sample_audit_path(tmp_path / "audit.tsv")
    assert path.name == "audit.samples.tsv" and sample_audit_path("report").name == "report.samples.tsv"
    write_sample_audit(path, matches, panel.samples, ["NA99999", "HG00110", "MOSAIC"])
    rows = list(csv.DictReader(path.open(), delimiter="\t"))
    assert [r["decision"] for r in rows] == ["identical genotypes, span too short: kept", "same name", "not in panel"]
    assert [r["panel_sample"] for r in rows] == [".", "HG00110", "."]
    assert rows[0]["closest_by_genotypes"] == "HG00103" and float(rows[0]["concordance"]) >= 0.98
    assert np.isclose(float(rows[0]["typed_span_mb"]), matches.span_bp / 1e6, atol=0.01)


def _closest_by_every_comparison(panel_dosage: np.ndarray, target_dosage: np.ndarray) -> tuple:
    """The search the blocks stand in for: each target sample (a column of
    target_dosage, -1 not called) against every panel sample, share of
    agreement at the called sites where either carries an alt allele, the
    first of the best among those with >= 100 such sites."""
    closest, informative, agree = [], [], []
    for t in target_dosage.T:
        called = t >= 0
        sites = ((t[called, None] > 0) | (panel_dosage[called] > 0)).sum(axis=0)
        agreeing = ((t[called, None] == panel_dosage[called]) & (t[called, None] > 0)).sum(axis=0)
        share = np.where(sites >= 100, agreeing / np.maximum(sites, 1), -1.0)
        best = int(np.argmax(share))
        found = share[best] >= 0
        closest.append(best if found else -1)
        informative.append(sites[best] if found else 0)
        agree.append(agreeing[best] if found else 0)
    return np.array(closest), np.array(informative), np.array(agree)


def _mosaic_panel(rng, sites: int, samples: int, founders: int = 6) -> np.ndarray:
    """(sites, 2 * samples) haplotypes copied from a few founders in runs of
    about 40 sites: many panel samples share a block's genotypes, as in LD."""
    founder = (rng.random((sites, founders)) < rng.uniform(0.05, 0.5, sites)[:, None]).astype(np.uint8)
    haplotypes = np.empty((sites, 2 * samples), dtype=np.uint8)
    for h in range(2 * samples):
        runs = np.cumsum(rng.random(sites) < 1 / 40)
        haplotypes[:, h] = founder[np.arange(sites), rng.integers(0, founders, runs[-1] + 1)[runs]]
    return haplotypes


def test_the_block_search_finds_what_comparing_every_sample_finds_for_every_duplicate():
    """Against every panel sample compared site by site: the same closest
    sample, sites and agreement for each target sample that agrees as a
    duplicate's would, however its differences and missing calls fall (a
    sample missing half its calls, so that no block is whole and none rules
    a panel sample out, included), the first of two identical panel
    samples; for the others, a real panel sample's true figures, never
    closer than the closest."""
    rng = np.random.default_rng(3)
    sites, samples = 500, 300
    alleles = _mosaic_panel(rng, sites, samples)
    alleles[:, 2 * 41:2 * 42] = alleles[:, 2 * 40:2 * 41]  # panel samples 40 and 41 are twins
    dosage = alleles[:, 0::2].astype(np.int64) + alleles[:, 1::2]
    target = dosage[:, [5, 41, 120, 120, 200, 250, 260, 299]].copy()
    for column, changes in ((2, 2), (3, 3), (4, 6), (7, 60)):  # of ~180-240 informative sites: ~1%, 1.6%, 2.7%, 25%
        changed = rng.choice(np.nonzero(target[:, column] > 0)[0], changes, replace=False)
        target[changed, column] = np.where(target[changed, column] == 1, 2, 1)
    target[rng.random(sites) < 0.02, 1] = -1  # scattered missing calls
    target[rng.random(sites) < 0.5, 5] = -1  # half the calls missing: no whole block
    target[:, 6] = rng.integers(0, 3, sites)  # a stranger
    expected = _closest_by_every_comparison(dosage, target)
    matches = samples_in_panel(_array_panel(alleles), _alignment(target), [f"t{i}" for i in range(target.shape[1])])
    duplicates = matches.identical
    assert duplicates.tolist() == [True, True, True, True, False, True, False, False]
    assert matches.closest[1] == 40
    for found, wanted in zip((matches.closest, matches.informative), expected[:2]):
        assert np.array_equal(found[duplicates], wanted[duplicates])
    assert np.array_equal(matches.concordance[duplicates], (expected[2] / expected[1])[duplicates])
    others = np.nonzero(~duplicates)[0]
    for s in others:  # a real panel sample's figures
        own = _closest_by_every_comparison(dosage[:, [matches.closest[s]]], target[:, [s]])
        assert (matches.informative[s], matches.concordance[s]) == (own[1][0], own[2][0] / own[1][0])
    assert (matches.concordance[others] <= (expected[2] / expected[1])[others]).all()


def _array_panel(alleles: np.ndarray) -> ReferencePanel:
    m, h = alleles.shape
    return ReferencePanel(
        samples=[f"p{i}" for i in range(h // 2)], contig_names=["20"], contig_index=np.zeros(m, np.int32),
        positions=np.arange(1, m + 1, dtype=np.int64) * 1000, ids=["."] * m, refs=["A"] * m, alts=["C"] * m,
        packed=np.packbits(alleles, axis=1), alt_freq=alleles.mean(1).astype(np.float32))


def _alignment(target_dosage: np.ndarray) -> Alignment:
    """Target samples of these alt allele counts (-1: not called) at every panel record."""
    m = len(target_dosage)
    haplotypes = np.empty((m, 2 * target_dosage.shape[1]), dtype=np.int8)
    haplotypes[:, 0::2] = np.where(target_dosage < 0, MISSING, target_dosage > 0)
    haplotypes[:, 1::2] = np.where(target_dosage < 0, MISSING, target_dosage > 1)
    return Alignment(panel_rows=np.arange(m), target_rows=np.arange(m), haplotypes=haplotypes, contigs=[0],
                     unmatched_rows=np.array([], dtype=np.int64), decisions=[], phased=True)


def test_each_target_sample_gets_its_own_answer_in_any_group_of_a_large_cohort():
    """Target samples are searched in groups in parallel: in a cohort of 8
    samples repeated 20 times (160, several groups), each copy gets what the
    8 got alone."""
    rng = np.random.default_rng(5)
    alleles = _mosaic_panel(rng, 500, 300)
    dosage = alleles[:, 0::2].astype(np.int64) + alleles[:, 1::2]
    target = dosage[:, [5, 41, 120, 200, 250, 260, 299, 7]].copy()
    target[rng.random(500) < 0.02, 1] = -1  # scattered missing calls
    target[:, 6] = rng.integers(0, 3, 500)  # a stranger
    panel = _array_panel(alleles)

    def search(dosages):
        return samples_in_panel(panel, _alignment(dosages), [f"t{i}" for i in range(dosages.shape[1])])

    alone, cohort = search(target), search(np.tile(target, 20))
    assert alone.identical.sum() >= 5  # duplicates and non-duplicates both
    for field in ("closest", "informative", "concordance"):
        np.testing.assert_array_equal(getattr(cohort, field), np.tile(getattr(alone, field), 20))


@pytest.mark.parametrize("fewest_blocks, nearest, counted", [(3, 1, 3), (4, 1, 4), (3, 2, 4)])
def test_a_common_code_is_counted_only_when_too_few_blocks_or_samples_are(fewest_blocks, nearest, counted):
    """Panel sample 7's four blocks as the target: three codes only it
    carries, one every sample carries. The common block is counted only
    when the rare three are fewer than fewest_blocks, or meet fewer than
    `nearest` samples; then every sample shares it."""
    n_panel = 200
    codes = np.zeros((n_panel, 4), dtype=np.uint32)
    codes[:, :3] = np.arange(1, n_panel + 1, dtype=np.uint32)[:, None] * np.array([1, 3, 5], dtype=np.uint32)
    order = np.argsort(codes, axis=0, kind="stable").T.astype(np.int32)
    sorted_codes = np.take_along_axis(codes.T, order, axis=1)
    all_called = np.full(4, 0x55555555, dtype=np.uint32)
    shared, touched = np.zeros(n_panel, dtype=np.int32), np.empty(n_panel, dtype=np.int64)
    n_touched, found = _share_blocks(codes[7], all_called, all_called, sorted_codes, order, fewest_blocks, 10, nearest,
                                     shared, touched)
    assert found == counted
    assert shared[7] == counted
    assert n_touched == (1 if counted == 3 else n_panel)
    assert sorted(touched[:n_touched]) == ([7] if counted == 3 else list(range(n_panel)))


@pytest.mark.parametrize("n_samples, n_sites", [(5, 16), (8, 33), (101, 1100)])  # ragged bytes, blocks and chunks
def test_panel_codes_from_packed_bytes_are_each_samples_alt_counts_two_bits_a_site(n_samples, n_sites):
    class Packed:  # the two fields of a panel _panel_codes reads
        n_haplotypes = 2 * n_samples
        packed = np.packbits(np.random.default_rng(n_sites).integers(0, 2, (n_sites, 2 * n_samples), dtype=np.uint8),
                             axis=1)
    rows = np.random.default_rng(1).permutation(n_sites)  # typed sites in any order of the panel's rows
    alleles = np.unpackbits(Packed.packed[rows], axis=1, count=2 * n_samples)
    expected = _pack_blocks(alleles[:, 0::2] + alleles[:, 1::2])
    np.testing.assert_array_equal(_panel_codes(Packed, rows), expected)


def test_each_blocks_samples_are_sorted_stably_by_code():
    """Ties (most samples share a few codes), codes equal in their low or
    high 16 bits only, and both extremes."""
    rng = np.random.default_rng(4)
    codes = rng.choice(np.array([0, 1, 5, 0x10000, 0x10001, 0x50000, 0xFFFF, 0xFFFFFFFF], dtype=np.uint32), (6, 500))
    codes[:, ::7] = rng.integers(0, 2**32, (6, len(range(0, 500, 7))), dtype=np.uint32)
    order, sorted_codes = _sorted_by_code(codes)
    expected = np.argsort(codes, axis=1, kind="stable")
    assert order.dtype == np.int32 and np.array_equal(order, expected)
    assert np.array_equal(sorted_codes, np.take_along_axis(codes, expected, axis=1))
