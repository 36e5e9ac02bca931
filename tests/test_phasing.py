"""genimpute.phasing: unphased targets phased against the panel with Beagle or
shapeit4, on the real slices in tests/data (read here with cyvcf2, not with
genimpute's readers, at the target records the panel has)."""

import gzip
import logging
import sys
from dataclasses import replace

import numpy as np
import pytest
from phasing_slice import Slice, genotypes as _genotypes, read_slice
from tools import require

from genimpute import phasing
from genimpute.errors import InputError
from genimpute.io.genetic_map import read_map
from genimpute.io.vcf_reader import ABSENT, MISSING
from genimpute.phasing import (
    PHASERS,
    find_phaser,
    phase_haplotypes,
    switch_errors,
)

MAX_SWITCH_ERROR_RATE = 0.10  # measured on this slice: see test_phasing_keeps_genotypes_and_recovers_phase


@pytest.fixture(scope="module")
def data():
    return read_slice()


def _phase(tool, d: Slice, haps=None, ref_haps=None, **kwargs):
    require(tool)
    kwargs = {"samples": d.samples, "threads": 1, **kwargs}
    return phase_haplotypes(tool, d.unphased if haps is None else haps, d.ref_haps if ref_haps is None else ref_haps,
                            d.contig, d.positions, d.refs, d.alts, ref_samples=d.ref_samples, **kwargs)


def _het(haps):
    first, second = haps[:, 0::2], haps[:, 1::2]
    return (first >= 0) & (second >= 0) & (first != second)


# --- the slice, phased ------------------------------------------------------------

@pytest.mark.parametrize("tool", PHASERS)
def test_phasing_keeps_genotypes_and_recovers_phase(tool, data):
    # the unphased file has the truth's genotypes in another order: REF first
    assert (_genotypes(data.unphased) == _genotypes(data.truth)).all()
    assert (data.unphased[:, 0::2][_het(data.unphased)] == 0).all()
    phased = _phase(tool, data)
    assert phased.dtype == np.int8 and phased.shape == data.unphased.shape
    np.testing.assert_array_equal(_genotypes(phased), _genotypes(data.unphased))
    hom = ~_het(data.unphased)
    np.testing.assert_array_equal(phased[:, 0::2][hom], data.unphased[:, 0::2][hom])
    # the phaser's order is taken: some heterozygous calls now carry ALT first
    assert (phased[:, 0::2][_het(data.unphased)] == 1).any()
    # against the true phase, measured: Beagle 4 and shapeit4 5 switch errors in 191 (2.1%, 2.6%)
    switches, opportunities = switch_errors(phased, data.truth)
    assert opportunities > 150
    assert switches < MAX_SWITCH_ERROR_RATE * opportunities, f"{switches} switch errors in {opportunities}"
    # REF-first order, as the unphased file has it, is far worse (34 in 191)
    unphased_switches, _ = switch_errors(data.unphased, data.truth)
    assert unphased_switches > 3 * max(switches, 1)


@pytest.mark.parametrize("tool", PHASERS)
@pytest.mark.parametrize("blocks", ["one", "many"])
def test_missing_half_missing_and_haploid_calls_come_back_as_given(tool, data, blocks, monkeypatch):
    if blocks == "many":  # the phaser's files written a few records at a time, as a large cohort's are
        monkeypatch.setattr(phasing, "_CHUNK_BYTES", 200)
    haps = data.unphased.copy()
    n = len(haps)
    haps[::7, 2:4] = MISSING  # sample 1: missing calls
    haps[1::9, 6] = MISSING  # sample 3: half-missing calls (./1, ./0)
    haps[:, 5] = ABSENT  # sample 2: haploid throughout
    haps[: n // 2, 9] = ABSENT  # sample 4: haploid on the first half only, as a male's chrX outside the PAR
    haps[: n // 2, 8] = np.maximum(haps[: n // 2, 8], 0)
    phased = _phase(tool, data, haps)
    # the phasers fill in missing calls and may make haploid ones diploid: none of that comes back
    np.testing.assert_array_equal(phased == MISSING, haps == MISSING)
    np.testing.assert_array_equal(phased == ABSENT, haps == ABSENT)
    untouched = ~np.repeat(_het(haps), 2, axis=1)
    np.testing.assert_array_equal(phased[untouched], haps[untouched])
    np.testing.assert_array_equal(_genotypes(phased), _genotypes(haps))
    # the diploid half of sample 4 is still phased (Beagle refuses a sample of
    # changing ploidy as such, so its haploid calls go in as homozygous ones)
    switches, opportunities = switch_errors(phased[n // 2:, 8:10], data.truth[n // 2:, 8:10])
    assert opportunities >= 5 and switches <= 2


@pytest.mark.parametrize("tool", PHASERS)
def test_records_sharing_a_position_are_told_apart(tool, data, caplog):
    """Split multi-allelic records, or a SNP and an indel (as at 20:9581332 in
    the full data), share a position: the phaser's output records must be
    matched to the input's by more than their position."""
    het_counts = _het(data.unphased).sum(axis=1)
    order = np.argsort(-het_counts, kind="stable")
    a = order[0]  # two common SNPs with different genotypes
    b = next(r for r in order if (_genotypes(data.unphased[[r]]) != _genotypes(data.unphased[[a]])).any())
    rows = np.insert(np.arange(len(data.positions)), a + 1, b)  # record b's calls again, at a's position
    alt_b = next(x for x in "ACGT" if x not in (data.refs[a], data.alts[a]))
    shared = replace(
        data,
        positions=np.insert(data.positions, a + 1, data.positions[a]),
        refs=[data.refs[a] if i == a + 1 else data.refs[r] for i, r in enumerate(rows)],
        alts=[alt_b if i == a + 1 else data.alts[r] for i, r in enumerate(rows)],
        unphased=data.unphased[rows],
        truth=data.truth[rows],
        ref_haps=data.ref_haps[rows],
    )
    with caplog.at_level(logging.WARNING, logger="genimpute.phasing"):
        phased = _phase(tool, shared)
    # a record matched to another's output would bring genotypes the phaser never changes
    assert not caplog.records, caplog.text
    np.testing.assert_array_equal(_genotypes(phased), _genotypes(shared.unphased))
    switches, opportunities = switch_errors(phased, shared.truth)
    assert switches < MAX_SWITCH_ERROR_RATE * opportunities


def test_target_names_may_collide_with_panel_names(data):
    plain = _phase("shapeit4", data)
    colliding = _phase("shapeit4", data, samples=data.ref_samples[: len(data.samples)])
    unwritable = _phase("shapeit4", data, samples=[f"sample {i}" for i in range(len(data.samples))])
    np.testing.assert_array_equal(colliding, plain)
    np.testing.assert_array_equal(unwritable, plain)


def test_nothing_to_phase_runs_no_tool(data, monkeypatch, tmp_path):
    """With at most one heterozygous call per sample every order is as good:
    no phaser is needed (here none is on PATH)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    haps = data.unphased.copy()
    het = _het(haps)
    later = np.cumsum(het, axis=0) > 1
    haps[:, 1::2][later] = haps[:, 0::2][later]  # every heterozygous call after a sample's first made homozygous
    out = phase_haplotypes("beagle", haps, data.ref_haps, data.contig, data.positions, data.refs, data.alts,
                           data.samples, data.ref_samples)
    np.testing.assert_array_equal(out, haps)


# --- genetic maps -------------------------------------------------------------------

def _map_points(d: Slice):
    bp = np.linspace(d.positions[0] - 1000, d.positions[-1] + 1000, 20).astype(int)
    return bp, (bp - bp[0]) * 1.3e-6  # 1.3 cM per Mb


def _write_plink_map(path, contig, bp, cm):
    lines = [f"{contig}\t.\t{m:.6f}\t{b}" for b, m in zip(bp, cm)]
    path.write_text("\n".join(["19\t.\t0.0\t100", *lines, "21\t.\t0.0\t100"]) + "\n")


def _write_shapeit_map(path, contig, bp, cm):
    with gzip.open(path, "wt") as handle:
        handle.write("pos\tchr\tcM\n" + "".join(f"{b}\t{contig}\t{m:.6f}\n" for b, m in zip(bp, cm)))


@pytest.mark.parametrize("tool", PHASERS)
@pytest.mark.parametrize("fmt", ["plink", "shapeit4"])
def test_genetic_map_in_either_format_for_either_tool(tool, fmt, data, tmp_path):
    bp, cm = _map_points(data)
    path = tmp_path / ("map.txt" if fmt == "plink" else "map.gmap.gz")
    (_write_plink_map if fmt == "plink" else _write_shapeit_map)(path, "chr" + data.contig, bp, cm)
    phased = _phase(tool, data, genetic_map=str(path))
    np.testing.assert_array_equal(_genotypes(phased), _genotypes(data.unphased))
    switches, opportunities = switch_errors(phased, data.truth)
    assert switches < MAX_SWITCH_ERROR_RATE * opportunities


def test_genetic_map_reading(data, tmp_path):
    bp, cm = _map_points(data)
    _write_plink_map(tmp_path / "plink.map", data.contig, bp, cm)
    _write_shapeit_map(tmp_path / "shapeit.gmap.gz", data.contig, bp, cm)
    for path in (tmp_path / "plink.map", tmp_path / "shapeit.gmap.gz"):
        got_bp, got_cm = read_map(path, "chr" + data.contig)
        np.testing.assert_array_equal(got_bp, bp)
        np.testing.assert_allclose(got_cm, cm, atol=1e-6)
    with pytest.raises(InputError, match="contig 22; found 19, 20, 21"):
        read_map(tmp_path / "plink.map", "22")
    (tmp_path / "bad.map").write_text("20 . 0.1 1000 extra\n")
    with pytest.raises(InputError, match="bad.map line 1: expected a genetic map line"):
        read_map(tmp_path / "bad.map", "20")
    (tmp_path / "hapmap.txt").write_text("position COMBINED_rate(cM/Mb) Genetic_Map(cM)\n61795 2.9 0\n")
    with pytest.raises(InputError, match="HapMap/IMPUTE2 map .* has no contig column"):
        read_map(tmp_path / "hapmap.txt", "20")


# --- finding the tool, and a tool that fails ----------------------------------------------

def test_find_phaser(monkeypatch, tmp_path):
    assert PHASERS == ("beagle", "shapeit4")
    for tool in PHASERS:
        fake = tmp_path / tool
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_phaser("auto") == "beagle"
    assert find_phaser("shapeit4") == "shapeit4"
    (tmp_path / "beagle").unlink()
    assert find_phaser("auto") == "shapeit4"
    with pytest.raises(InputError, match="expected auto, genimpute or one of beagle, shapeit4; found 'eagle'"):
        find_phaser("eagle")
    assert find_phaser("genimpute") == "genimpute"


def test_without_an_external_phaser_auto_takes_genimpute_s_own(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_phaser("auto") == "genimpute"
    with pytest.raises(InputError, match=r"expected shapeit4 on PATH; found none \(Debian: apt-get install shapeit4\)"):
        find_phaser("shapeit4")


_FAKE_BEAGLE = """#!{python}
import gzip, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
mode = {mode!r}
if mode == "memory":
    print("Exception in thread \\"main\\" java.lang.OutOfMemoryError: Java heap space")
    sys.exit(1)
if mode == "crash":
    print("Exception in thread \\"main\\" java.lang.IllegalArgumentException: something is wrong")
    print("\\tat vcf.Foo.bar(Foo.java:12)")
    print("\\tat main.Main.main(Main.java:107)")
    sys.exit(1)
with gzip.open(args["gt"], "rt") as src, gzip.open(args["out"] + ".vcf.gz", "wt") as out:
    for line in src:
        fields = line.split("\\t")
        if not line.startswith("#") and fields[2] == "r3":
            continue  # mode "drop": one record lost
        out.write(line.replace("/", "|"))
"""


@pytest.mark.parametrize("mode, message", [
    ("crash", (r"beagle failed to phase the target \(exit status 1\); the last lines of its log:\n"
               r".*IllegalArgumentException: something is wrong$")),
    ("drop", r"beagle dropped 1 of \d+ records while phasing \(first at 20:\d+\)"),
    ("memory", r"OutOfMemoryError: Java heap space\nJava ran out of memory: give Beagle a larger heap .*"
               r"JAVA_TOOL_OPTIONS=-Xmx20g"),
])
def test_a_failing_phaser_is_a_clear_error(mode, message, data, monkeypatch, tmp_path):
    fake = tmp_path / "beagle"
    fake.write_text(_FAKE_BEAGLE.format(python=sys.executable, mode=mode))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match=message) as error:
        _phase("beagle", data)
    assert "Main.java" not in str(error.value)


def test_a_packed_reference_phases_as_its_alleles(data):
    """The panel's packed records with some columns left out (target samples
    that are panel samples) are the reference their kept columns are."""
    rng = np.random.default_rng(4)
    extra = rng.integers(0, 2, (len(data.positions), 6), dtype=np.uint8)
    alleles = np.concatenate([extra[:, :4], data.ref_haps, extra[:, 4:]], axis=1)
    kept = np.ones(alleles.shape[1], dtype=bool)
    kept[[0, 1, 2, 3, -2, -1]] = False
    packed = phasing.PackedHaplotypes(np.packbits(alleles, axis=1), alleles.shape[1], kept)
    assert packed.shape == data.ref_haps.shape
    np.testing.assert_array_equal(packed.rows(3, 17), data.ref_haps[3:17])
    np.testing.assert_array_equal(_phase("beagle", data, ref_haps=packed), _phase("beagle", data))


def test_arrays_must_describe_the_same_records(data):
    with pytest.raises(ValueError, match="ref_haps: expected shape"):
        phase_haplotypes("beagle", data.unphased, data.ref_haps[1:], data.contig, data.positions, data.refs,
                         data.alts, data.samples, data.ref_samples)


@pytest.mark.parametrize("which, value, message", [
    ("haps", 2, "haps: expected 0, 1 or MISSING"), ("haps", -3, "haps: expected 0, 1 or MISSING"),
    ("first", ABSENT, "ABSENT only as a second haplotype"), ("ref_haps", 2, "ref_haps: expected alleles 0 and 1"),
])
def test_alleles_out_of_range_are_refused(which, value, message, data):
    haps, ref_haps = data.unphased.copy(), data.ref_haps.copy()
    if which == "ref_haps":
        ref_haps[3, 5] = value
    else:
        haps[3, 4 if which == "first" else 5] = value
    with pytest.raises(ValueError, match=message):
        phase_haplotypes("beagle", haps, ref_haps, data.contig, data.positions, data.refs, data.alts, data.samples,
                         data.ref_samples)


# --- scoring -----------------------------------------------------------------------

def test_switch_errors_by_hand():
    truth = np.array([[0, 1], [1, 0], [0, 0], [0, 1], [1, 0]])
    assert switch_errors(truth, truth) == (0, 3)
    assert switch_errors(truth[:, ::-1], truth) == (0, 3)  # both haplotypes exchanged throughout: no switch
    assert switch_errors(np.array([[0, 1], [1, 0], [0, 0], [1, 0], [0, 1]]), truth) == (1, 3)
    # a call missing in either is no opportunity
    assert switch_errors(np.array([[0, 1], [-1, -1], [0, 0], [1, 0], [0, 1]]), truth) == (1, 2)
