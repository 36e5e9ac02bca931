"""Targets as they come from genotyping labs, through `genimpute impute`:
swapped alleles, missing calls, haploid calls, samples that are also in the
reference panel. Each either gives the right output (checked against the
plain run) or stops with a clear message."""

import gzip
import logging
from types import SimpleNamespace

import cyvcf2
import numpy as np
import pytest
import vcf_edit
from cli_helpers import run
from paths import PANEL, TARGET_PHASED, TARGET_UNPHASED
from tools import run_tool

from genimpute.errors import InputError
from genimpute.imputation import impute
from genimpute.panel import ReferencePanel
from genimpute.runtime import pick_device


def _records(path) -> list[list[str]]:
    out = run_tool(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def _impute(target, model, out, *extra):
    run(["-q", "impute", str(target), "--model", str(model), "--out", str(out), *extra])
    return _records(out)


@pytest.fixture(scope="module")
def plain(trained, tmp_path_factory):
    return _impute(TARGET_PHASED, trained, tmp_path_factory.mktemp("plain") / "plain.vcf.gz")


def test_swapped_alleles_impute_as_the_original(plain, trained, tmp_path):
    header, records = vcf_edit.read_lines()
    swapped = [vcf_edit.swap(r) if i % 2 else r for i, r in enumerate(records)]
    target = vcf_edit.write(tmp_path / "swapped.vcf", header, swapped)
    audit = tmp_path / "audit.tsv"
    assert _impute(target, trained, tmp_path / "out.vcf.gz", "--audit", str(audit)) == plain
    assert audit.read_text().count("\tswap\t") == len(records) // 2


def test_missing_calls_are_imputed_and_flagged(plain, trained, tmp_path):
    header, records = vcf_edit.read_lines()
    hidden = vcf_edit.hide_calls(records, 0.05, seed=3)
    target = vcf_edit.write(tmp_path / "missing.vcf", header, records)
    out = _impute(target, trained, tmp_path / "out.vcf.gz")
    truth = {r[1]: r for r in plain}
    typed = {r[1] for r in records}
    filled = 0
    for record in out:
        if record[1] not in typed:
            continue
        n_hidden = sum((record[1], s) in hidden for s in range(9, len(record)))
        assert ("IMPMISS=%d" % n_hidden in record[7]) == (n_hidden > 0)
        for s in range(9, len(record)):
            gt, ds, _ = record[s].split(":")
            if (record[1], s) in hidden:
                assert 0 <= float(ds) <= 2 and "." not in gt
                filled += 1
            else:
                assert record[s] == truth[record[1]][s]  # observed calls pass through unchanged
    # (how often they are right depends on the model: the tests' tiny one is
    # barely trained; docs/journal/BENCHMARKS.md measures it with a real one)
    assert filled == len(hidden)


def test_haploid_sample_stays_haploid(plain, trained, tmp_path):
    header, records = vcf_edit.read_lines()
    for record in records:
        record[9] = record[9][0]  # first sample: its first haplotype only, as chrX of a male
    out = _impute(vcf_edit.write(tmp_path / "haploid.vcf", header, records), trained, tmp_path / "out.vcf.gz")
    assert len(out) == len(plain)
    for got, expected in zip(out, plain):
        gt, ds, gp = got[9].split(":")
        assert gt in ("0", "1") and 0 <= float(ds) <= 1 and len(gp.split(",")) == 2
        assert got[10:] == expected[10:]  # the other samples are untouched
    vcf = cyvcf2.VCF(str(tmp_path / "out.vcf.gz"))
    assert next(iter(vcf)).genotypes[0][:-1] in ([0], [1])  # htslib reads it as haploid


def _panel_samples_as_target(tmp_path, names: dict, sites: set | None = None):
    """A target made of panel samples (renamed per `names`) at the target
    slice's sites, or at every panel record whose position is in `sites`."""
    if sites is None:
        sites = {r[1] for r in vcf_edit.read_lines()[1]}
    with gzip.open(PANEL, "rt") as handle:
        lines = handle.read().splitlines()
    header = [x for x in lines if x.startswith("##")]
    columns = lines[len(header)].split("\t")
    keep = [columns.index(n) for n in names]
    records = [r[:9] + [r[i] for i in keep] for r in (x.split("\t") for x in lines[len(header) + 1:]) if r[1] in sites]
    return vcf_edit.write(tmp_path / "from_panel.vcf", header + ["\t".join(columns[:9] + list(names.values()))], records)


def test_targets_found_in_the_panel_are_kept_out_of_their_context(trained, tmp_path, caplog):
    target = _panel_samples_as_target(tmp_path, {"HG00096": "HG00096", "HG00103": "NA99999"})
    with caplog.at_level(logging.WARNING):
        summary = impute(target, trained, tmp_path / "out.vcf.gz", pick_device("cpu"), progress=False)
    # by name; the renamed one has too few typed sites here to be told from a stranger by genotypes
    assert summary["samples_in_panel"] == 1 and summary["possible_panel_duplicates"] == 0
    assert "HG00096 (= panel HG00096)" in caplog.text


def test_the_report_holds_each_samples_decision(trained, tmp_path, caplog):
    """Renamed, at every panel record of the 0.5 Mb slice: identical
    genotypes, reported, but kept as templates (too short to tell a relative)."""
    every_site = {str(p) for p in ReferencePanel.from_vcf(PANEL).positions}
    target = _panel_samples_as_target(tmp_path, {"HG00096": "HG00096", "HG00103": "NA99999"}, every_site)
    report = tmp_path / "audit.tsv"
    with caplog.at_level(logging.WARNING):
        summary = impute(target, trained, tmp_path / "out.vcf.gz", pick_device("cpu"), progress=False, audit=report)
    assert summary["samples_in_panel"] == 1 and summary["possible_panel_duplicates"] == 1
    assert "NA99999 (~ panel HG00103)" in caplog.text and "kept as templates" in caplog.text
    rows = [line.split("\t") for line in (tmp_path / "audit.samples.tsv").read_text().splitlines()]
    assert [r[:3] for r in rows[1:]] == [["HG00096", "same name", "HG00096"],
                                         ["NA99999", "identical genotypes, span too short: kept", "."]]
    (tmp_path / "audit.tsv").unlink()  # the samples file alone still asks for --force
    with pytest.raises(InputError, match="audit.samples.tsv exists"):
        impute(target, trained, tmp_path / "again.vcf.gz", pick_device("cpu"), progress=False, audit=report)


def _unphased(phased_target, tmp_path):
    """phased_target (a VCF) with every call's `|` made `/`."""
    lines = phased_target.read_text().splitlines()
    header = [x for x in lines if x.startswith("#")]
    records = [x.split("\t") for x in lines if not x.startswith("#")]
    return vcf_edit.write(tmp_path / "unphased.vcf", header, [r[:9] + [g.replace("|", "/") for g in r[9:]]
                                                              for r in records])


def test_panel_samples_are_left_out_of_the_phasers_reference(trained, tmp_path, monkeypatch):
    import genimpute.phasing

    target = _unphased(_panel_samples_as_target(tmp_path, {"HG00096": "HG00096", "HG00103": "NA99999"}), tmp_path)
    calls = []

    def phase_as_given(tool, haps, ref_haps, contig, positions, refs, alts, samples, ref_samples, **kwargs):
        calls.append((contig, ref_haps.shape[1], list(ref_samples)))
        return haps

    monkeypatch.setattr(genimpute.phasing, "find_phaser", lambda requested: "beagle")
    monkeypatch.setattr(genimpute.phasing, "phase_haplotypes", phase_as_given)
    impute(target, trained, tmp_path / "out.vcf.gz", pick_device("cpu"), progress=False)
    n_panel = len(ReferencePanel.from_vcf(PANEL).samples)
    [(contig, n_haps, ref_samples)] = calls  # one contig
    assert "HG00096" not in ref_samples and "HG00103" in ref_samples  # the renamed one is not recognised here
    assert len(ref_samples) == n_panel - 1 and n_haps == 2 * len(ref_samples)


def test_panel_samples_are_left_out_of_genimpute_s_own_phaser_s_reference(trained, tmp_path, monkeypatch):
    import genimpute.copying.phaser

    target = _unphased(_panel_samples_as_target(tmp_path, {"HG00096": "HG00096"}), tmp_path)
    calls = []

    def phase_as_given(haps, packed, n_haplotypes, kept, centimorgans, **kwargs):
        calls.append((n_haplotypes, kept))
        return haps

    monkeypatch.setattr(genimpute.copying.phaser, "phase_targets", phase_as_given)
    impute(target, trained, tmp_path / "out.vcf.gz", pick_device("cpu"), progress=False, phaser="genimpute")
    panel = ReferencePanel.from_vcf(PANEL)
    [(n_haps, kept)] = calls  # one contig
    own = panel.samples.index("HG00096")
    assert n_haps == 2 * len(panel.samples) and not kept[2 * own] and not kept[2 * own + 1]
    assert kept.sum() == n_haps - 2


@pytest.mark.parametrize("placed, given", [(True, False), (True, True), (False, False)])
def test_the_external_phaser_reads_the_panel_s_map_unless_impute_has_one(placed, given, tmp_path, monkeypatch):
    """A compact panel placed on a map (`genimpute panel --map`) hands
    its cM to Beagle where `impute` has no --map; --map wins; a panel
    with no map hands none (the phasers take 1 cM per Mb)."""
    import genimpute.phasing
    from genimpute.config import CopyingSettings
    from genimpute.io.genetic_map import GeneticMap
    from genimpute.panel import convert_to_compact

    panel_map, impute_map = tmp_path / "panel.map", tmp_path / "impute.map"
    panel_map.write_text("20\t.\t0.0\t9000000\n20\t.\t1.5\t9500000\n")  # 3 cM per Mb
    impute_map.write_text("20\t.\t0.0\t9000000\n20\t.\t0.5\t9500000\n")
    compact = tmp_path / "panel.gpanel"
    convert_to_compact(PANEL, compact, genetic_map=panel_map if placed else None)
    maps = []

    def phase_as_given(tool, haps, *args, genetic_map=None, **kwargs):
        maps.append(genetic_map)
        return haps

    monkeypatch.setattr(genimpute.phasing, "find_phaser", lambda requested: "beagle")
    monkeypatch.setattr(genimpute.phasing, "phase_haplotypes", phase_as_given)
    impute(TARGET_UNPHASED, tmp_path, tmp_path / "out.vcf.gz", pick_device("cpu"), progress=False, ref=compact,
           copying=CopyingSettings(), genetic_map=impute_map if given else None)
    [genetic_map] = maps
    if given:
        assert isinstance(genetic_map, GeneticMap) and genetic_map.path == impute_map
    elif placed:
        bp, cm = genetic_map
        assert len(bp) > 50 and (np.diff(bp) > 0).all()
        np.testing.assert_allclose(cm, (bp - 9_000_000) * 3e-6, atol=1e-9)
    else:
        assert genetic_map is None


def test_unrelated_targets_are_not_taken_for_panel_samples(trained, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        summary = impute(TARGET_PHASED, trained, tmp_path / "out.vcf.gz", pick_device("cpu"), progress=False)
    assert summary["samples_in_panel"] == 0 and "in the reference panel" not in caplog.text


def test_missing_calls_on_a_tiny_target(trained, tmp_path):
    """Ten typed records, every one with a missing call: each is still
    imputed from the others."""
    header, records = vcf_edit.read_lines()
    records = records[:10]
    for record in records:
        record[9] = ".|."
    out = _impute(vcf_edit.write(tmp_path / "tiny.vcf", header, records), trained, tmp_path / "out.vcf.gz")
    typed = [r for r in out if "IMPMISS=1" in r[7]]
    assert len(typed) == 10 and all(r[9].split(":")[0] in ("0|0", "0|1", "1|0", "1|1") for r in typed)


@pytest.mark.parametrize("engine, batches", [("copying", (1000, 1, 3)), ("model", (1000, 3))])
def test_batches_of_samples_write_the_bytes_of_one_batch(engine, batches, tmp_path):
    """One batch; one sample each; batches of 3 and a shorter last one."""
    header, records = vcf_edit.read_lines()
    vcf_edit.hide_calls(records, 0.05, seed=5)
    for record in records:
        record[9] = record[9][0]  # a haploid sample first: ploidy must follow each batch's own samples
    extra = list(records[3])
    extra[1] = str(int(extra[1]) + 1)  # a position the panel lacks: passed through
    records.insert(4, extra)
    target = vcf_edit.write(tmp_path / "odd.vcf", header, records)
    bodies = []
    for batch in batches:
        out = tmp_path / f"batch{batch}.vcf.gz"
        run(["-q", "impute", str(target), "--ref", str(PANEL), "--engine", engine, "--out", str(out),
             "--batch-samples", str(batch)])
        with gzip.open(out, "rt") as handle:
            bodies.append([line for line in handle if not line.startswith("#")])
    assert all(body == bodies[0] for body in bodies[1:])
    body = [line.split("\t") for line in bodies[0]]
    assert len(body[0]) - 9 > 3 and len(body[0]) - 9 not in (3, 6, 9, 12)  # several batches, the last one short
    assert any(r[7] == "." for r in body)  # the passed-through record
    assert any("IMPMISS" in r[7] for r in body) and any("DR2" in r[7] for r in body)
    assert all(r[9].split(":")[0] in ("0", "1") for r in body if r[7] != ".")  # the haploid sample


def test_batches_of_samples_over_many_segments_write_the_bytes_of_one_batch(tmp_path):
    """Segments of 15 typed sites: many windows, each spooled and joined in turn."""
    from genimpute.config import CopyingSettings
    from genimpute.modeldir import PRETRAINED_DIR

    bodies = []
    for batch in (1000, 4):
        out = tmp_path / f"batch{batch}.vcf.gz"
        summary = impute(TARGET_PHASED, PRETRAINED_DIR, out, "cpu", progress=False, ref=PANEL, batch_samples=batch,
                         copying=CopyingSettings(segment_sites=15, margin_sites=5))
        with gzip.open(out, "rt") as handle:
            bodies.append([line for line in handle if not line.startswith("#")])
    assert summary["windows"] >= 5
    assert bodies[0] == bodies[1]


def test_a_batch_holds_fewer_samples_where_its_output_over_a_window_would_pass_the_cap(monkeypatch):
    from genimpute import records

    windows = {"20": [SimpleNamespace(predicted=np.arange(50)), SimpleNamespace(predicted=np.arange(100))], "21": []}
    monkeypatch.setattr(records, "BATCH_OUTPUT_BYTES", 2 * 100 * 2 * 4 * 30)  # two batches of 30 samples' P(alt)
    assert records.samples_per_batch(1000, windows) == 30
    assert records.samples_per_batch(20, windows) == 20
    assert records.samples_per_batch(1000, {"20": []}) == 1000
    monkeypatch.setattr(records, "BATCH_OUTPUT_BYTES", 1)
    assert records.samples_per_batch(1000, windows) == 1


def test_batches_shrunk_to_the_output_cap_write_the_bytes_of_one_batch(tmp_path, monkeypatch, caplog):
    from genimpute import records
    from genimpute.config import CopyingSettings
    from genimpute.modeldir import PRETRAINED_DIR

    bodies = []
    for cap in (records.BATCH_OUTPUT_BYTES, 1):  # 1 byte: a sample a batch
        monkeypatch.setattr(records, "BATCH_OUTPUT_BYTES", cap)
        out = tmp_path / f"cap{cap}.vcf.gz"
        with caplog.at_level(logging.INFO, logger="genimpute.records"):
            impute(TARGET_PHASED, PRETRAINED_DIR, out, "cpu", progress=False, ref=PANEL,
                   copying=CopyingSettings(segment_sites=15, margin_sites=5))
        with gzip.open(out, "rt") as handle:
            bodies.append([line for line in handle if not line.startswith("#")])
    n_samples = len(cyvcf2.VCF(str(TARGET_PHASED)).samples)
    assert any(r.getMessage().startswith("batches of 1 samples, not 1000") for r in caplog.records)
    assert any(r.getMessage().startswith(f"{n_samples} target samples in {n_samples} batches") for r in caplog.records)
    assert bodies[0] == bodies[1]


def test_progress_counts_each_batch_of_samples_in_each_window(tmp_path, caplog):
    """A cohort of thousands in one window is many batches: each is a step
    of the progress, logged every tenth of them where no bar is drawn."""
    from genimpute.config import CopyingSettings
    from genimpute.modeldir import PRETRAINED_DIR

    n_samples = len(cyvcf2.VCF(str(TARGET_PHASED)).samples)
    batch = 4
    n_batches = -(-n_samples // batch)
    with caplog.at_level(logging.INFO, logger="genimpute.records"):
        summary = impute(TARGET_PHASED, PRETRAINED_DIR, tmp_path / "out.vcf.gz", "cpu", progress=False, ref=PANEL,
                         batch_samples=batch, copying=CopyingSettings(segment_sites=15, margin_sites=5))
    total = summary["windows"] * n_batches
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("imputed ")]
    assert n_batches > 1 and len(lines) >= 10
    assert lines[-1].startswith(f"imputed {total} of {total} steps ({summary['windows']} windows x {n_batches} "
                                "batches of samples) in ")
