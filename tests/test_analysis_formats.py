"""BCF, BGEN, PGEN and info file outputs (genimpute.io.bcf_writer,
bgen_writer, pgen_writer, info_file) read back by tools no one here wrote:
bcftools (BCF), PLINK 2 (Debian's plink2), cbgen (BGEN) and pgenlib
(PGEN), against the probabilities written, within each format's
precision; then `genimpute impute --out x.bcf / x.bgen / x.pgen` against
the same run's VCF: records, dosages, phase, ploidy, missing calls, the
info file, byte-identical batches and threads, --region, the r2 of the
bundled example, and the outputs refused."""

from __future__ import annotations

import gzip
import sqlite3
import subprocess
import sys
from pathlib import Path

from types import SimpleNamespace

import cbgen
import numpy as np
import pgenlib
import pytest
import vcf_edit
from cli_helpers import run
from paths import PANEL, TARGET_PHASED
from tools import run_tool

from genimpute.errors import InputError
from genimpute.io.bcf_writer import BcfWriter
from genimpute.io.bgen_writer import BgenWriter, probability_blocks
from genimpute.io.info_file import HEADER, InfoWriter, info_lines
from genimpute.io.output_names import info_path
from genimpute.io.pgen_writer import PgenWriter
from genimpute.io.vcf_writer import ColumnText, DosageSums, VcfWriter, genotype_columns
from genimpute.metrics import pooled_r2

N_RECORDS, N_SAMPLES = 200, 50
SAMPLES = [f"s{i}" for i in range(N_SAMPLES)]
PGEN_UNIT = 2.0 ** -14  # PGEN stores dosages in these units
PLINK2_PRINTED = 1e-5  # plink2 prints dosages to five significant digits


def _calls(seed: int = 7):
    """Seeded probabilities shaped like imputed ones (most calls certain
    REF), the first three samples haploid throughout and a few more calls
    haploid here and there."""
    rng = np.random.default_rng(seed)
    p1 = np.where(rng.random((N_RECORDS, N_SAMPLES)) < 0.5, 0.0, rng.random((N_RECORDS, N_SAMPLES)))
    p2 = np.where(rng.random((N_RECORDS, N_SAMPLES)) < 0.5, 0.0, rng.random((N_RECORDS, N_SAMPLES)))
    p1[::17] = 1.0  # certain ALT on whole records, where rounding must not spill over
    haploid = np.zeros((N_RECORDS, N_SAMPLES), dtype=bool)
    haploid[:, :3] = True
    haploid[rng.integers(0, N_RECORDS, 10), rng.integers(3, N_SAMPLES, 10)] = True
    return p1.astype(np.float32), p2.astype(np.float32), haploid


POSITIONS = 10_000 + 37 * np.arange(N_RECORDS)
IDS = [f"rs{100 + i}" for i in range(N_RECORDS)]
REFS = ["A", "C", "G", "T"] * (N_RECORDS // 4)
ALTS = ["G", "T", "ACG", "C"] * (N_RECORDS // 4)


def _write_bgen(path: Path, p1, p2, haploid, cuts=(), **options) -> Path:
    """Write the records in pieces split at `cuts`."""
    with BgenWriter(path, SAMPLES, **options) as writer:
        for first, last in zip([0, *cuts], [*cuts, N_RECORDS]):
            writer.write_variants("20", POSITIONS[first:last], IDS[first:last], REFS[first:last], ALTS[first:last],
                                  p1[first:last], p2[first:last], haploid[first:last])
    return path


def _write_pgen(path: Path, p1, p2, haploid, cuts=(), variant_count=N_RECORDS) -> Path:
    with PgenWriter(path, SAMPLES, variant_count) as writer:
        for first, last in zip([0, *cuts], [*cuts, N_RECORDS]):
            writer.write_variants("20", POSITIONS[first:last], IDS[first:last], REFS[first:last], ALTS[first:last],
                                  p1[first:last], p2[first:last], haploid[first:last],
                                  info=["AF=0.1;DR2=0.9;IMP"] * (last - first))
    return path


def _plink2_scale(p1, p2, haploid) -> np.ndarray:
    """The dosages PLINK 2 holds: p1 + p2, and 2 * p1 at a haploid call
    (as it stores a VCF's haploid DS)."""
    p1, p2 = p1.astype(np.float64), p2.astype(np.float64)
    return np.where(haploid, 2.0 * p1, p1 + p2)


def _plink2_dosages(tmp_path: Path, *input_args: str) -> tuple[np.ndarray, list[str]]:
    """(V, S) DS of the VCF plink2 exports from its input, and the IDs."""
    out = tmp_path / "plink2-export"
    result = run_tool(["plink2", *input_args, "--export", "vcf", "vcf-dosage=DS", "--threads", "1",
                       "--memory", "1024", "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    rows, ids = [], []
    for line in Path(f"{out}.vcf").read_text().splitlines():
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        ids.append(fields[2])
        rows.append([_exported_dosage(c) for c in fields[9:]])
    return np.array(rows), ids


def _exported_dosage(cell: str) -> float:
    """A plink2-exported call's DS, left out where it equals the hardcall
    (NaN where the call is missing)."""
    gt, _, ds = cell.partition(":")
    if ds:
        return float(ds)
    alleles = gt.replace("|", "/").split("/")
    return np.nan if "." in alleles else sum(map(int, alleles))


# ---------------------------------------------------------------------------
# BGEN
# ---------------------------------------------------------------------------

def _cbgen_records(path: Path, tmp_path: Path):
    """(offsets, probabilities (V, S, columns), ploidy (V, S), phased) from cbgen."""
    bgen = cbgen.bgen_file(path)
    bgen.create_metafile(tmp_path / "metafile")
    offsets = cbgen.bgen_metafile(tmp_path / "metafile").read_partition(0).variants.offset
    genotypes = [bgen.read_genotype(offset) for offset in offsets]
    assert bgen.nvariants == N_RECORDS and bgen.nsamples == N_SAMPLES
    assert [s.decode() for s in bgen.read_samples()] == SAMPLES
    return (offsets, np.stack([g.probability for g in genotypes]), np.stack([g.ploidy for g in genotypes]),
            {g.phased for g in genotypes})


def _genotype_units(p1, p2, top):
    """Genotype probabilities in units of 1 / top, rounded as the BGEN spec
    says: floored, then the shortfall to top given to the largest
    remainders, the first on a tie (an implementation apart from the
    writer's)."""
    a, b = p1.astype(np.float64), p2.astype(np.float64)
    scaled = np.stack([(1 - a) * (1 - b), a * (1 - b) + b * (1 - a), a * b], axis=-1) * top
    floors = np.floor(scaled)
    shortfall = top - floors.sum(axis=-1, keepdims=True)
    rank = np.argsort(np.argsort(-(scaled - floors), axis=-1, kind="stable"), axis=-1)
    return floors + (rank < shortfall)


@pytest.mark.parametrize("bits", [1, 3, 8, 16, 32])
@pytest.mark.parametrize("phased", [True, False])
def test_cbgen_reads_back_each_probability_rounded_as_the_spec_says(tmp_path, bits, phased):
    p1, p2, haploid = _calls()
    path = _write_bgen(tmp_path / "out.bgen", p1, p2, haploid, bits=bits, phased=phased)
    _, probabilities, ploidy, phasing = _cbgen_records(path, tmp_path)
    top = 2 ** bits - 1
    assert phasing == {phased}
    assert np.array_equal(ploidy, np.where(haploid, 1, 2))
    units = np.rint(probabilities * top)
    alt_units = np.floor(p1.astype(np.float64) * top + 0.5)  # allele 2 is ALT
    assert np.array_equal(units[..., 1][haploid], alt_units[haploid])
    assert np.array_equal(units[..., 0][haploid], top - alt_units[haploid])
    if phased:  # each haplotype's (REF, ALT)
        assert np.array_equal(units[..., 1][~haploid], alt_units[~haploid])
        assert np.array_equal(units[..., 3][~haploid], np.floor(p2.astype(np.float64) * top + 0.5)[~haploid])
    else:  # each call's (REF/REF, REF/ALT, ALT/ALT)
        assert np.array_equal(units[~haploid], _genotype_units(p1, p2, top)[~haploid])
    assert np.all(np.nansum(units, axis=-1) == np.where(haploid | (not phased), top, 2 * top))


@pytest.mark.parametrize("bits, phased, tolerance", [(8, True, 1 / 255), (16, False, 3 / 65535)])
def test_plink2_reads_bgen_ref_first_as_the_alt_dosage(tmp_path, bits, phased, tolerance):
    p1, p2, haploid = _calls()
    path = _write_bgen(tmp_path / "out.bgen", p1, p2, haploid, bits=bits, phased=phased)
    dosages, ids = _plink2_dosages(tmp_path, "--bgen", str(path), "ref-first", "--sample",
                                   str(path.with_suffix(".sample")))
    assert ids == IDS
    assert np.abs(dosages - _plink2_scale(p1, p2, haploid)).max() <= tolerance + PGEN_UNIT + PLINK2_PRINTED


def test_the_index_answers_a_region_query_with_the_blocks_of_its_records(tmp_path):
    p1, p2, haploid = _calls()
    path = _write_bgen(tmp_path / "out.bgen", p1, p2, haploid)
    offsets, _, _, _ = _cbgen_records(path, tmp_path)
    with sqlite3.connect(Path(f"{path}.bgi")) as index:
        region = index.execute("SELECT rsid, allele1, allele2, file_start_position FROM Variant WHERE chromosome = "
                               "'20' AND position BETWEEN ? AND ? ORDER BY position", (11_000, 12_000)).fetchall()
        blocks = index.execute("SELECT file_start_position, size_in_bytes FROM Variant ORDER BY position").fetchall()
        (size, prefix), = index.execute("SELECT file_size, first_1000_bytes FROM Metadata").fetchall()
    inside = np.flatnonzero((POSITIONS >= 11_000) & (POSITIONS <= 12_000))
    assert len(inside) > 10
    assert [(r[0], r[1], r[2]) for r in region] == [(IDS[i], REFS[i], ALTS[i]) for i in inside]
    # cbgen's offsets are those of the genotype data, after each record's identifying data: ID and rsid,
    # chromosome (each after a 2-byte length), position, allele count, alleles (each after a 4-byte length)
    identifying = np.array([2 * (2 + len(i)) + 2 + 2 + 4 + 2 + 4 + len(r) + 4 + len(a)
                            for i, r, a in zip(IDS, REFS, ALTS)])
    assert [r[3] for r in region] == [int(offsets[i] - identifying[i]) for i in inside]
    starts, sizes = np.array(blocks).T
    assert np.array_equal(starts + identifying, offsets)
    assert np.array_equal(starts[1:], starts[:-1] + sizes[:-1]) and starts[-1] + sizes[-1] == size
    data = path.read_bytes()
    assert size == len(data) and prefix == data[:1000]


def test_a_bgen_is_the_same_bytes_however_its_records_are_split_and_compressed(tmp_path):
    p1, p2, haploid = _calls()
    whole = _write_bgen(tmp_path / "whole.bgen", p1, p2, haploid, threads=1)
    split = _write_bgen(tmp_path / "split.bgen", p1, p2, haploid, cuts=(1, 2, 90, 163), threads=3)
    assert whole.read_bytes() == split.read_bytes()
    assert whole.with_suffix(".sample").read_text() == split.with_suffix(".sample").read_text()
    assert split.with_suffix(".sample").read_text().splitlines()[:3] == ["ID_1 ID_2 missing", "0 0 0", "s0 s0 0"]


def test_zstd_compressed_bgen_reads_back(tmp_path):
    pytest.importorskip("zstandard")
    p1, p2, haploid = _calls()
    zlib = _write_bgen(tmp_path / "zlib.bgen", p1, p2, haploid)
    zstd = _write_bgen(tmp_path / "zstd.bgen", p1, p2, haploid, compression="zstd")
    assert np.array_equal(_cbgen_records(zlib, tmp_path)[1], _cbgen_records(zstd, tmp_path)[1], equal_nan=True)


def test_zstd_without_its_module_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import fails as if not installed
    with pytest.raises(InputError, match="expected the Python module zstandard"):
        BgenWriter(tmp_path / "out.bgen", SAMPLES, compression="zstd")


def test_probability_data_packed_bit_by_bit_as_worked_by_hand():
    # two alleles, one diploid sample, unphased, 2 bits (units of 1/3): p1 = p2 = .5 gives genotypes
    # (.75, 1.5, .75) units; floors (0, 1, 0) fall 2 short, given to the largest remainders .75, .75
    # (first REF/REF, then ALT/ALT): (1, 1, 1); stored REF/REF 1, REF/ALT 1 -> bits 01 01 -> 0b0101
    one = np.array([[0.5]], dtype=np.float32)
    block, = probability_blocks(one, one, None, 2, False)
    assert bytes(block) == bytes([1, 0, 0, 0, 2, 0, 2, 2, 2, 0, 2, 5])
    # p1 = 0, p2 = .5: (1.5, 1.5, 0) units, floors 1 short, a tie of remainders: REF/REF takes it, (2, 1, 0);
    # stored 2 then 1 -> 0b0110
    block, = probability_blocks(np.array([[0.0]]), one, None, 2, False)
    assert bytes(block) == bytes([1, 0, 0, 0, 2, 0, 2, 2, 2, 0, 2, 6])
    # 3 bits (units of 1/7), phased: a diploid call (0, 1) stores P(REF) 7 and 0; a haploid call .5 stores
    # 7 - round(3.5) = 3; least significant bit first: 111 000 11|0 -> 0b11000111, 0b0
    p1, p2 = np.array([[0.0, 0.5]]), np.array([[1.0, 0.0]])
    block, = probability_blocks(p1, p2, np.array([[False, True]]), 3, True)
    assert bytes(block) == bytes([2, 0, 0, 0, 2, 0, 1, 2, 2, 1, 1, 3, 0xC7, 0])


def _with_missing_calls(p1, p2):
    """The calls with a diploid and a haploid call missing, and a diploid
    call half missing (missing whole); which calls are missing."""
    missing = np.zeros(p1.shape, dtype=bool)
    missing[[5, 6, 7], [4, 0, 9]] = True  # sample 0 is haploid throughout
    p1, p2 = p1.copy(), p2.copy()
    p1[5, 4] = p1[6, 0] = p2[7, 9] = np.nan
    return p1, p2, missing


def test_missing_calls_are_missing_to_cbgen_pgenlib_and_plink2(tmp_path):
    p1, p2, missing = _with_missing_calls(*_calls()[:2])
    haploid = _calls()[2]
    bgen = _write_bgen(tmp_path / "out.bgen", p1, p2, haploid)
    probabilities = _cbgen_records(bgen, tmp_path)[1]
    assert np.array_equal(np.isnan(probabilities[..., 0]), missing)
    pgen = _write_pgen(tmp_path / "out.pgen", p1, p2, haploid)
    read = np.empty((N_RECORDS, N_SAMPLES), dtype=np.float64)
    pgenlib.PgenReader(bytes(pgen)).read_dosages_range(0, N_RECORDS, read)
    assert np.array_equal(read == -9, missing)
    for input_args in (["--bgen", str(bgen), "ref-first", "--sample", str(bgen.with_suffix(".sample"))],
                       ["--pfile", str(pgen.with_suffix(""))]):
        dosages, _ = _plink2_dosages(tmp_path, *input_args)
        assert np.array_equal(np.isnan(dosages), missing)


def test_a_phased_bgen_stores_an_unphased_record_as_genotype_probabilities(tmp_path):
    p1, p2, haploid = _calls()
    phased = np.arange(N_RECORDS) % 3 != 0
    path = tmp_path / "out.bgen"
    with BgenWriter(path, SAMPLES) as writer:
        writer.write_variants("20", POSITIONS, IDS, REFS, ALTS, p1, p2, haploid, phased)
    bgen = cbgen.bgen_file(path)
    bgen.create_metafile(tmp_path / "metafile")
    offsets = cbgen.bgen_metafile(tmp_path / "metafile").read_partition(0).variants.offset
    genotypes = [bgen.read_genotype(offset) for offset in offsets]
    assert [g.phased for g in genotypes] == phased.tolist()
    top = 255
    unphased = genotypes[0].probability[~haploid[0]] * top  # (REF/REF, REF/ALT, ALT/ALT) of diploid calls
    assert np.array_equal(np.rint(unphased), _genotype_units(p1[0], p2[0], top)[~haploid[0]])


def test_bgen_refuses_what_it_cannot_store(tmp_path):
    p1, p2, _ = _calls()
    for options in ({"bits": 0}, {"bits": 33}, {"compression": "gzip"}):
        with pytest.raises(InputError, match="expected"):
            BgenWriter(tmp_path / "out.bgen", SAMPLES, **options)
    multiallelic = pytest.raises(InputError, match="expected biallelic records")
    with multiallelic, BgenWriter(tmp_path / "out.bgen", SAMPLES) as writer:
        writer.write_variants("20", POSITIONS[:2], IDS[:2], REFS[:2], ["G", "T,C"], p1[:2], p2[:2])
    with pytest.raises(InputError, match="expected no spaces"):
        BgenWriter(tmp_path / "out.bgen", ["a b"])
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------
# PGEN
# ---------------------------------------------------------------------------

def test_pgen_dosages_read_back_by_pgenlib_and_plink2(tmp_path):
    p1, p2, haploid = _calls()
    path = _write_pgen(tmp_path / "out.pgen", p1, p2, haploid, cuts=(50, 51))
    expected = _plink2_scale(p1, p2, haploid)
    reader = pgenlib.PgenReader(bytes(path))
    read = np.empty((N_RECORDS, N_SAMPLES), dtype=np.float64)
    reader.read_dosages_range(0, N_RECORDS, read)
    assert np.abs(read - expected).max() <= PGEN_UNIT / 2
    dosages, ids = _plink2_dosages(tmp_path, "--pfile", str(path.with_suffix("")))
    assert ids == IDS
    assert np.abs(dosages - expected).max() <= PGEN_UNIT + PLINK2_PRINTED
    pvar = path.with_suffix(".pvar").read_text().splitlines()
    assert "##INFO=<ID=DR2" in "\n".join(pvar) and pvar[-1].endswith("\t.\tPASS\tAF=0.1;DR2=0.9;IMP")
    assert path.with_suffix(".psam").read_text().splitlines()[:2] == ["#IID\tSEX", "s0\tNA"]


def test_a_pgen_is_the_same_bytes_however_split(tmp_path):
    p1, p2, haploid = _calls()
    whole = _write_pgen(tmp_path / "whole.pgen", p1, p2, haploid)
    split = _write_pgen(tmp_path / "split.pgen", p1, p2, haploid, cuts=(3, 120))
    for suffix in (".pgen", ".pvar", ".psam"):
        assert whole.with_suffix(suffix).read_bytes() == split.with_suffix(suffix).read_bytes()


def test_a_pgen_given_fewer_records_than_announced_is_refused_and_not_published(tmp_path):
    p1, p2, haploid = _calls()
    with pytest.raises(InputError, match=f"expected {N_RECORDS + 1} records; found {N_RECORDS}"):
        _write_pgen(tmp_path / "out.pgen", p1, p2, haploid, variant_count=N_RECORDS + 1)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------
# BCF
# ---------------------------------------------------------------------------

def _bcftools(*args) -> str:
    return run_tool(["bcftools", *map(str, args)], check=True, capture_output=True, text=True).stdout


def _write_text_records(writer, p1, p2, haploid):
    """The seeded calls as imputed records, then two records passed through
    with GT alone (one multi-allelic, one with a missing call)."""
    fixed = [["20", str(p), i, r, a] for p, i, r, a in zip(POSITIONS, IDS, REFS, ALTS)]
    with writer as opened:
        opened.write_header(SAMPLES, ["20", "X"], {"genimputeCommand": "test"})
        opened.write_records(fixed[:120], ["AF=0.1;DR2=0.9;IMP"] * 120, "GT:DS:GP",
                             genotype_columns(p1[:120], p2[:120], haploid[:120]))
        passed = ["\t".join(["0|2" if s == 0 else "./." if s == 1 else "1/0" for s in range(N_SAMPLES)])] * 2
        opened.write_records([["20", "14440", ".", "A", "C,G"], ["20", "14441", "rs9", "A", "C"]], [".", "."], "GT",
                             ColumnText.from_rows(passed))
        opened.write_records(fixed[122:], ["AF=0.1"] * (N_RECORDS - 122), "GT:DS:GP",
                             genotype_columns(p1[122:], p2[122:], haploid[122:]))
    return writer.path


def test_bcftools_reads_the_bcf_as_the_vcf_of_the_same_records(tmp_path):
    p1, p2, haploid = _calls()
    bcf = _write_text_records(BcfWriter(tmp_path / "out.bcf", threads=3), p1, p2, haploid)
    vcf = _write_text_records(VcfWriter(tmp_path / "out.vcf.gz"), p1, p2, haploid)
    body = _bcftools("view", "-H", bcf)
    assert body == _bcftools("view", "-H", vcf) and body.count("\n") == N_RECORDS
    assert "\tA\tC,G\t.\tPASS\t.\tGT\t0|2\t./.\t1/0" in body and "\t1:1:0,1\t" in body  # haploid GP: two values
    header = [line for line in _bcftools("view", "-h", bcf).splitlines() if not line.startswith("##bcftools")]
    assert header == [line for line in _bcftools("view", "-h", vcf).splitlines() if not line.startswith("##bcftools")]
    assert _bcftools("index", "-n", bcf).strip() == str(N_RECORDS)
    region = ("view", "-H", "-r", "20:11000-12000")
    assert _bcftools(*region, bcf) == _bcftools(*region, vcf) and _bcftools(*region, bcf).count("\n") > 10
    copy = tmp_path / "copy.bcf"
    copy.write_bytes(bcf.read_bytes())
    _bcftools("index", copy)  # the index bcftools writes: the same bins and offsets, compressed apart
    assert gzip.decompress(Path(f"{copy}.csi").read_bytes()) == gzip.decompress(Path(f"{bcf}.csi").read_bytes())


def test_a_bcf_is_the_same_bytes_whatever_its_threads(tmp_path):
    p1, p2, haploid = _calls()
    one = _write_text_records(BcfWriter(tmp_path / "one.bcf", threads=1), p1, p2, haploid)
    three = _write_text_records(BcfWriter(tmp_path / "three.bcf", threads=3), p1, p2, haploid)
    assert one.read_bytes() == three.read_bytes()


def test_a_bcf_record_on_a_contig_its_header_lacks_is_refused_and_nothing_published(tmp_path):
    with pytest.raises(InputError, match="expected contigs of its header; found 21"), \
            BcfWriter(tmp_path / "out.bcf") as writer:
        writer.write_header(SAMPLES, ["20"], {})
        writer.write_records([["21", "5", ".", "A", "C"]], ["."], "GT", ColumnText.from_rows(["0|1\t" * 49 + "0|0"]))
    with pytest.raises(InputError, match="expected a name ending in .bcf; found out.bcf.gz"):
        BcfWriter(tmp_path / "out.bcf.gz")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------
# publishing
# ---------------------------------------------------------------------------

def _fail_inside(writer) -> None:
    p1, p2, haploid = _calls()
    with pytest.raises(RuntimeError, match="stopped"), writer as opened:
        if isinstance(opened, InfoWriter):
            opened.write(IDS, REFS, ALTS, np.zeros(N_RECORDS), np.ones(N_RECORDS), np.ones(N_RECORDS),
                         ["Imputed"] * N_RECORDS, np.zeros((N_RECORDS, 6)))
        else:
            opened.write_variants("20", POSITIONS, IDS, REFS, ALTS, p1, p2, haploid)
        raise RuntimeError("stopped")


def test_an_error_inside_a_writer_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError, match="stopped"), BcfWriter(tmp_path / "out.bcf") as writer:
        writer.write_header(SAMPLES, ["20"], {})
        writer.write_records([["20", "5", ".", "A", "C"]], ["."], "GT", ColumnText.from_rows(["0|1\t" * 49 + "0|0"]))
        raise RuntimeError("stopped")
    _fail_inside(BgenWriter(tmp_path / "out.bgen", SAMPLES))
    _fail_inside(PgenWriter(tmp_path / "out.pgen", SAMPLES, N_RECORDS))
    _fail_inside(InfoWriter(tmp_path / "out.info.gz"))
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_is_kept_without_force(tmp_path):
    (tmp_path / "out.sample").write_text("kept")
    with pytest.raises(InputError, match="exists; pass --force"):
        BgenWriter(tmp_path / "out.bgen", SAMPLES)
    p1, p2, haploid = _calls()
    _write_bgen(tmp_path / "out.bgen", p1, p2, haploid, force=True)
    assert (tmp_path / "out.sample").read_text().startswith("ID_1 ID_2 missing")


# ---------------------------------------------------------------------------
# info file
# ---------------------------------------------------------------------------

def test_info_lines_as_minimac4_prints_them():
    # rs2 hidden by --validate: 3 genotypes, dosages 0.5, 1.5, 2 against 0, 1, 2 (r2 0.9643), the dosage terms in units
    unit = 2 ** 40
    hidden = np.zeros((3, 6), dtype=np.int64)
    hidden[1] = [3, 4 * unit, 3, round(6.5 * unit), 5, round(5.5 * unit)]
    lines = info_lines(["rs1", "rs2", "rs3"], ["A", "C", "G"], ["T", "T", "A"], [0.25, 0.8, 0.5],
                       [0.9, 0.95123456, 1.0], [0.5, 0.1234567, 0.9], ["Imputed", "Genotyped", "Typed_Only"],
                       np.arange(18).reshape(3, 6), hidden)
    assert lines == ["rs1\tA\tT\t0.25000\t0.25000\t0.90000\t0.50000\tImputed\t-\t0,1,2,3,4,5\t-",
                     "rs2\tC\tT\t0.80000\t0.20000\t0.95123\t0.12346\tGenotyped\t0.96429\t6,7,8,9,10,11\t"
                     + ",".join(map(str, hidden[1])),
                     "rs3\tG\tA\t0.50000\t0.50000\t-\t-\tTyped_Only\t-\t12,13,14,15,16,17\t-"]
    assert HEADER == "SNP\tREF(0)\tALT(1)\tALT_Frq\tMAF\tAvgCall\tRsq\tGenotyped\tLooRsq\tSums\tLooSums"
    with pytest.raises(InputError, match="expected kinds among"):
        info_lines(["rs1"], ["A"], ["T"], [0.1], [0.9], [0.5], ["imputed"], np.zeros((1, 6)))


def test_the_info_file_has_a_header_and_one_line_per_record(tmp_path):
    path = tmp_path / "out.info.gz"
    with InfoWriter(path) as writer:
        for first, last in ((0, 120), (120, N_RECORDS)):
            writer.write(IDS[first:last], REFS[first:last], ALTS[first:last], np.full(last - first, 0.1),
                         np.full(last - first, 0.99), np.full(last - first, 0.8), ["Imputed"] * (last - first),
                         np.ones((last - first, 6)))
    with gzip.open(path, "rt") as handle:
        lines = handle.read().splitlines()
    assert lines[0] == HEADER and len(lines) == N_RECORDS + 1
    assert lines[1] == "rs100\tA\tG\t0.10000\t0.10000\t0.99000\t0.80000\tImputed\t-\t1,1,1,1,1,1\t-"


# ---------------------------------------------------------------------------
# genimpute impute --out x.bgen / x.pgen
# ---------------------------------------------------------------------------

def _odd_inputs(directory: Path) -> tuple[Path, Path, int]:
    """(panel, target, a position) from the tests/data slice: a panel record at the position made
    multi-allelic (split into two), a target whose first sample is haploid,
    with 5% of its calls missing, and three records the panel lacks: a
    phased one, an unphased one and a multi-allelic one."""
    header, panel = vcf_edit.read_lines(PANEL)
    split = panel[40]
    split[2], split[4] = ".", f"{split[4]},{next(b for b in 'ACGT' if b not in (split[3], split[4]))}"
    split[9:] = [call.replace("1", "2") if i % 7 == 0 else call for i, call in enumerate(split[9:])]
    panel_path = vcf_edit.write(directory / "panel.vcf", header, panel)
    header, records = vcf_edit.read_lines()
    vcf_edit.hide_calls(records, 0.05, seed=5)
    for record in records:
        record[9] = record[9][0]
    extra = [list(records[i]) for i in (3, 5, 7)]
    for record, alt, calls in zip(extra, ("G", "C", "C,G"), ("0|1", "1/0", "0|2")):
        record[1], record[4], record[10], record[11] = str(int(record[1]) + 1), alt, calls, ".|."
        record[3] = next(b for b in "ACGT" if b not in alt)
    records = sorted(records + extra, key=lambda r: int(r[1]))
    return panel_path, vcf_edit.write(directory / "target.vcf", header, records), int(split[1])


def _vcf_table(path: Path) -> tuple[list[tuple], np.ndarray, list[str]]:
    """((CHROM, POS, REF, ALT) of each record, (V, S) DS (of GT where there
    is none; NaN where missing; a haploid call's doubled, as PLINK 2 holds
    it), INFO) of a VCF written by genimpute."""
    keys, rows, info = [], [], []
    with gzip.open(path, "rt") as handle:
        for line in handle:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            keys.append((fields[0], int(fields[1]), fields[3], fields[4]))
            info.append(fields[7])
            cells = [c.split(":") for c in fields[9:]]
            rows.append([(float(c[1]) if len(c) > 1 else _exported_dosage(c[0])) * (1 if "|" in c[0] or "/" in c[0]
                                                                                   else 2) for c in cells])
    return keys, np.array(rows), info


def _impute(out: Path, panel: Path, target, *extra: str) -> Path:
    run(["-q", "impute", str(target), "--ref", str(panel), "--out", str(out), *extra])
    return out


@pytest.fixture(scope="module")
def odd_run(tmp_path_factory):
    """The odd inputs imputed to VCF, BCF, BGEN and PGEN."""
    directory = tmp_path_factory.mktemp("odd")
    panel, target, split = _odd_inputs(directory)
    outputs = {kind: _impute(directory / f"{kind}.{ending}", panel, target)
               for kind, ending in (("vcf", "vcf.gz"), ("bcf", "bcf"), ("bgen", "bgen"), ("pgen", "pgen"))}
    return SimpleNamespace(directory=directory, panel=panel, target=target, split=split, **outputs)


def _plink2_input(path: Path) -> list[str]:
    if path.suffix == ".bgen":
        return ["--bgen", str(path), "ref-first", "--sample", str(path.with_suffix(".sample"))]
    return ["--pfile", str(path.with_suffix(""))]


BGEN_8_BITS = 1 / 255  # a call's dosage: two haplotypes, each within half a unit
EXPORTED = 1e-4  # plink2 prints dosages to five significant digits


def _plink2_reads_the_vcf_s_records(vcf: Path, out: Path, tmp_path: Path, tolerance: float) -> list[tuple]:
    """Check that plink2 reads `out` as every biallelic record of `vcf`
    with its DS (within the VCF's three decimals, doubled where haploid,
    and the format's `tolerance`); return the VCF's records."""
    keys, expected, _ = _vcf_table(vcf)
    dosages, _ = _plink2_dosages(tmp_path, *_plink2_input(out))
    kept = [i for i, key in enumerate(keys) if "," not in key[3]]
    exported = [line.split("\t") for line in (tmp_path / "plink2-export.vcf").read_text().splitlines()
                if not line.startswith("#")]
    assert [(f[0], int(f[1]), f[3], f[4]) for f in exported] == [keys[i] for i in kept]
    assert np.array_equal(np.isnan(dosages), np.isnan(expected[kept]))
    assert np.nanmax(np.abs(dosages - expected[kept])) <= 2 * 0.0005 + tolerance + EXPORTED
    return keys


@pytest.mark.parametrize("kind, tolerance", [("bgen", BGEN_8_BITS), ("pgen", PGEN_UNIT)])
def test_plink2_reads_each_record_of_the_vcf_with_its_ds(odd_run, tmp_path, kind, tolerance):
    """Every record of the VCF but the multi-allelic one the panel lacks;
    the panel's multi-allelic record as its two split records; haploid
    calls, missing calls and the unphased record passed through."""
    keys = _plink2_reads_the_vcf_s_records(odd_run.vcf, getattr(odd_run, kind), tmp_path, tolerance)
    assert len([k for k in keys if "," in k[3]]) == 1
    assert len([k for k in keys if k[1] == odd_run.split]) == 2
    assert np.isnan(_vcf_table(odd_run.vcf)[1]).any()


def test_bgen_bits_and_unphased_probabilities_read_back_within_their_precision(odd_run, tmp_path):
    out = _impute(tmp_path / "unphased.bgen", odd_run.panel, odd_run.target, "--bgen-bits", "16", "--bgen-unphased")
    _plink2_reads_the_vcf_s_records(odd_run.vcf, out, tmp_path, 3 / 65535)
    bgen = cbgen.bgen_file(out)
    bgen.create_metafile(tmp_path / "metafile")
    offsets = cbgen.bgen_metafile(tmp_path / "metafile").read_partition(0).variants.offset
    assert not any(bgen.read_genotype(offset).phased for offset in offsets)


def test_a_region_writes_the_records_of_the_vcf_of_that_region(odd_run, tmp_path):
    region = ["--region", "20:9030000-9060000"]
    vcf = _impute(tmp_path / "region.vcf.gz", odd_run.panel, odd_run.target, *region)
    for kind, tolerance in (("bgen", BGEN_8_BITS), ("pgen", PGEN_UNIT)):
        out = _impute(tmp_path / f"region_{kind}.{kind}", odd_run.panel, odd_run.target, *region)
        keys = _plink2_reads_the_vcf_s_records(vcf, out, tmp_path, tolerance)
        assert 10 < len(keys) < len(_vcf_table(odd_run.vcf)[0]) and 9_030_000 <= keys[0][1] <= keys[-1][1] <= 9_060_000


@pytest.mark.parametrize("out, extra, said", [
    ("x.vcf", [], "--out: expected an output ending in .vcf.gz, .bcf, .bgen or .pgen; found "),
    ("x.bcf.gz", [], "--out: expected an output ending in .vcf.gz, .bcf, .bgen or .pgen; found "),
    ("x.bgen", ["--format", "GT:DS"], "--format: expected a .vcf.gz or .bcf output (FORMAT fields are VCF's); found "),
    ("x.pgen", ["--bgen-bits", "16"], "--bgen-bits, --bgen-unphased: expected a .bgen output; found "),
    ("x.vcf.gz", ["--bgen-unphased"], "--bgen-bits, --bgen-unphased: expected a .bgen output; found "),
    ("x.chr{chrom}.bgen", [], "--out: expected a .vcf.gz output for a genome-wide run"),
    ("x.chr{chrom}.bcf", [], "--out: expected a .vcf.gz output for a genome-wide run"),
])
def test_an_output_it_cannot_write_is_refused_in_one_line(tmp_path, out, extra, said):
    result = run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(tmp_path / out), *extra],
                 ok=False)
    assert result.exit_code == 1 and result.output.startswith(f"genimpute: error: {said}")
    assert result.output.count("\n") == 1 and list(tmp_path.iterdir()) == []


def _header_samples(path: Path) -> list[str]:
    with gzip.open(path, "rt") as handle:
        return next(line for line in handle if line.startswith("#CHROM")).rstrip("\n").split("\t")[9:]


def test_cbgen_reads_the_phase_ploidy_and_samples_of_the_run(odd_run, tmp_path):
    keys = [k for k in _vcf_table(odd_run.vcf)[0] if "," not in k[3]]
    bgen = cbgen.bgen_file(odd_run.bgen)
    bgen.create_metafile(tmp_path / "metafile")
    genotypes = [bgen.read_genotype(offset)
                 for offset in cbgen.bgen_metafile(tmp_path / "metafile").read_partition(0).variants.offset]
    records = [line.split("\t") for line in odd_run.target.read_text().splitlines() if not line.startswith("#")]
    unphased = [(r[0], int(r[1]), r[3], r[4]) for r in records if any("/" in call for call in r[9:])]
    assert [k for k, g in zip(keys, genotypes) if not g.phased] == unphased  # every other record phased
    assert all(g.ploidy[0] == 1 and (g.ploidy[1:] == 2).all() for g in genotypes)  # the first sample haploid
    assert [s.decode() for s in bgen.read_samples()] == _header_samples(odd_run.vcf)


def _bgi_variants(path: Path) -> list[tuple]:
    with sqlite3.connect(Path(f"{path}.bgi")) as index:
        return index.execute("SELECT * FROM Variant ORDER BY file_start_position").fetchall()


def test_batches_and_threads_write_the_same_bytes(odd_run):
    """One batch; batches of 3 samples and a shorter last; one thread (a
    process of its own: --threads holds for the rest of a process)."""
    for kind in ("bgen", "pgen"):
        first = getattr(odd_run, kind)
        batched = _impute(odd_run.directory / f"batched_{kind}.{kind}", odd_run.panel, odd_run.target, "--batch-samples", "3")
        threaded = odd_run.directory / f"threaded_{kind}.{kind}"
        result = subprocess.run([sys.executable, "-m", "genimpute", "-q", "--", "impute", str(odd_run.target), "--ref",
                                 str(odd_run.panel), "--out", str(threaded), "--threads", "1"], capture_output=True,
                                text=True)
        assert result.returncode == 0, result.stderr
        for other in (batched, threaded):
            for ending in ((".bgen", ".sample") if kind == "bgen" else (".pgen", ".psam")):
                assert first.with_suffix(ending).read_bytes() == other.with_suffix(ending).read_bytes()
            assert info_path(first).read_bytes() == info_path(other).read_bytes()
            if kind == "bgen":
                assert _bgi_variants(first) == _bgi_variants(other)
            else:  # the header names the command
                assert [line for line in first.with_suffix(".pvar").read_text().splitlines() if line[:2] != "##"] == \
                    [line for line in other.with_suffix(".pvar").read_text().splitlines() if line[:2] != "##"]


def _info_lines(path: Path) -> list[list[str]]:
    with gzip.open(info_path(path), "rt") as handle:
        lines = [line.rstrip("\n").split("\t") for line in handle]
    assert lines[0] == HEADER.split("\t")
    return lines[1:]


def test_the_info_file_has_a_line_per_record_written_with_its_info(odd_run):
    keys, _, info = _vcf_table(odd_run.vcf)
    lines = _info_lines(odd_run.vcf)
    assert [(line[1], line[2]) for line in lines] == [(k[2], k[3]) for k in keys]
    for line, key, text in zip(lines, keys, info):
        fields = dict(f.split("=") if "=" in f else (f, "") for f in text.split(";"))
        kind = "Typed_Only" if text == "." else "Imputed" if "IMP" in fields else "Genotyped"
        assert line[7] == kind
        sums = DosageSums.from_columns(np.array([line[9].split(",")], dtype=np.int64))
        if line[3] != "-":  # ALT_Frq is the mean of the summed probabilities, typed records' calls included
            assert float(line[3]) == pytest.approx(sums.af()[0], abs=5e-6)
        if kind != "Typed_Only":
            assert float(line[3]) == pytest.approx(float(fields["AF"]), rel=1e-3, abs=1e-5)
            assert 0.5 <= float(line[5]) <= 1
        if kind == "Imputed":
            assert float(line[6]) == pytest.approx(float(fields["DR2"]), abs=5.1e-4)  # printed to 3 and 5 decimals
        if "," in key[3]:
            assert line[3:7] == ["-", "-", "-", "-"]
    assert line[0] != "." and any(line[0] == f"20:{odd_run.split}:{k[2]}:{k[3]}" for k in keys for line in lines)
    typed_only = [line for line in lines if line[7] == "Typed_Only" and "," not in line[2]]
    assert len(typed_only) == 2 and all(line[3] != "-" for line in typed_only)
    for kind in ("bgen", "pgen"):  # the records written: all but the multi-allelic one the panel lacks
        assert _info_lines(getattr(odd_run, kind)) == [line for line in lines if "," not in line[2]]


def test_the_pvar_carries_the_vcf_s_info_and_the_qc_page_and_audit_sit_beside_the_output(odd_run, tmp_path):
    _, _, info = _vcf_table(odd_run.vcf)
    pvar = [line.split("\t") for line in odd_run.pgen.with_suffix(".pvar").read_text().splitlines()
            if not line.startswith("#")]
    assert [f[7] for f in pvar] == [text for text, line in zip(info, _info_lines(odd_run.vcf)) if "," not in line[2]]
    assert odd_run.bgen.with_suffix(".html").exists() and odd_run.pgen.with_suffix(".html").exists()
    out = _impute(tmp_path / "audited.bgen", odd_run.panel, odd_run.target, "--audit", str(tmp_path / "audit.tsv"))
    assert (tmp_path / "audit.tsv").read_text().count("\n") > 10 and out.with_suffix(".html").exists()


def _without_command(header: str) -> list[str]:
    """Header lines but those naming the command (genimpute's, and bcftools' own)."""
    return [line for line in header.splitlines() if not line.startswith(("##genimputeCommand", "##bcftools"))]


def test_the_bcf_holds_the_records_header_and_info_file_of_the_vcf(odd_run):
    """Every record (the multi-allelic one the panel lacks too), haploid
    and missing calls as in the VCF, its index, the info file's bytes."""
    body = _bcftools("view", "-H", odd_run.bcf)
    assert body == _bcftools("view", "-H", odd_run.vcf) and body.count("\n") == len(_vcf_table(odd_run.vcf)[0])
    records = [line.split("\t") for line in body.splitlines()]
    assert any("," in r[4] and r[7] == "." for r in records) and any(".|." in r[9:] for r in records)
    assert all(r[9].split(":")[0] in ("0", "1") for r in records if r[7] != ".")  # the first sample haploid
    assert _without_command(_bcftools("view", "-h", odd_run.bcf)) == _without_command(_bcftools("view", "-h", odd_run.vcf))
    assert _bcftools("index", "-n", odd_run.bcf).strip() == str(len(records))
    assert info_path(odd_run.bcf).read_bytes() == info_path(odd_run.vcf).read_bytes()
    assert odd_run.bcf.with_suffix(".html").exists()


def _bcf_records(path: Path) -> bytes:
    """A BCF's records as stored, uncompressed, after its header (which names the command)."""
    raw = gzip.decompress(path.read_bytes())
    assert raw[:5] == b"BCF\2\2"
    return raw[9 + int.from_bytes(raw[5:9], "little"):]


def test_bcf_batches_threads_and_region_write_the_records_of_the_vcf(odd_run, tmp_path):
    batched = _impute(tmp_path / "batched.bcf", odd_run.panel, odd_run.target, "--batch-samples", "3")
    threaded = tmp_path / "threaded.bcf"
    result = subprocess.run([sys.executable, "-m", "genimpute", "-q", "--", "impute", str(odd_run.target), "--ref",
                             str(odd_run.panel), "--out", str(threaded), "--threads", "1"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for other in (batched, threaded):
        assert _bcf_records(other) == _bcf_records(odd_run.bcf)
        assert info_path(other).read_bytes() == info_path(odd_run.bcf).read_bytes()
    region = ["--region", "20:9030000-9060000"]
    vcf = _impute(tmp_path / "region.vcf.gz", odd_run.panel, odd_run.target, *region)
    bcf = _impute(tmp_path / "region_bcf.bcf", odd_run.panel, odd_run.target, *region)
    assert _bcftools("view", "-H", bcf) == _bcftools("view", "-H", vcf)
    assert 10 < _bcftools("view", "-H", bcf).count("\n") < _bcftools("view", "-H", odd_run.bcf).count("\n")
    vcf = _impute(tmp_path / "fields_vcf.vcf.gz", odd_run.panel, odd_run.target, *region, "--format", "GT:DS")
    bcf = _impute(tmp_path / "fields_bcf.bcf", odd_run.panel, odd_run.target, *region, "--format", "GT:DS")
    assert _bcftools("view", "-H", bcf) == _bcftools("view", "-H", vcf) and "\tGT:DS\t" in _bcftools("view", "-H", bcf)


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "data"  # the quickstart's: 101 targets, 991 panel samples


def _truth_counts(keys: list[tuple], samples: list[str]) -> np.ndarray:
    """(V, S) true ALT counts of the example's targets at the records
    `keys` (NaN where the truth lacks one)."""
    import cyvcf2

    truth = cyvcf2.VCF(str(EXAMPLE / "targets.truth.vcf.gz"))
    order = [truth.samples.index(s) for s in samples]
    counts = {(v.CHROM, v.POS, v.REF, v.ALT[0]): np.array(v.genotypes)[order, :2].sum(axis=1) for v in truth}
    return np.array([counts.get(k, np.full(len(samples), np.nan)) for k in keys], dtype=np.float64)


@pytest.mark.parametrize("kind", ["bgen", "pgen"])
def test_r2_from_plink2_s_dosages_is_the_vcf_s_to_three_decimals(tmp_path, kind):
    """The bundled example (the quickstart's) imputed to VCF and to
    BGEN or PGEN: the aggregate r2 against the truth over the imputed
    records, from the VCF's DS and from the dosages plink2 exports."""
    inputs = [str(EXAMPLE / "targets.omni2.5.vcf.gz"), "--map", str(EXAMPLE / "plink.chr20_8.9-9.4Mb.GRCh37.map")]
    vcf = _impute(tmp_path / "example.vcf.gz", EXAMPLE / "panel.vcf.gz", *inputs)
    out = _impute(tmp_path / f"example_{kind}.{kind}", EXAMPLE / "panel.vcf.gz", *inputs)
    keys, ds, info = _vcf_table(vcf)
    dosages, _ = _plink2_dosages(tmp_path, *_plink2_input(out))
    truth = _truth_counts(keys, _header_samples(vcf))
    scored = np.array(["IMP" in i.split(";") for i in info]) & ~np.isnan(truth).any(axis=1)
    assert scored.sum() > 2000
    r2 = [pooled_r2(d[scored], truth[scored]) for d in (ds, dosages)]
    assert r2[0] > 0.9 and abs(r2[0] - r2[1]) < 5e-4, r2
