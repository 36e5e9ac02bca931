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

from genimpute.identity import (IDENTITY_CONCORDANCE, MIN_IDENTITY_SPAN_BP, sample_audit_path, samples_in_panel,
                                write_sample_audit)
from genimpute.io.vcf_reader import read_target
from genimpute.panel import ReferencePanel, align_target

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
    position: each maps to its own panel sample (a search over the whole
    agreement matrix once ran past the panel for any but the first)."""
    samples = ReferencePanel.from_vcf(PANEL).samples
    originals = [samples[i] for i in (5, 2, len(samples) - 1, 17)]
    chosen = [originals[i] for i in order]
    panel = _write_panel(tmp_path, STRETCH)
    target = _target(tmp_path, STRETCH, {f"RENAMED{j}": [name] for j, name in enumerate(chosen)})
    aln = align_target(panel, target)
    for block in (256, 3, 1):  # compared all at once, across block edges, one by one
        matches = samples_in_panel(panel, aln, target.samples, block=block)
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
