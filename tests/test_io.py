"""Input readers: SNP-array lists and panel/target VCFs."""

from __future__ import annotations

from pathlib import Path

import cyvcf2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ARRAY, PANEL, TARGET_PHASED, TARGET_TRUTH, TARGET_UNPHASED
from tools import run_tool

from genimpute.errors import InputError
from genimpute.io.array_list import ArraySites, read_array_list
from genimpute.io.contigs import normalise_contig
from genimpute.io.file_rows import FileRows, RowSpool
from genimpute.io.vcf_reader import ABSENT, MISSING, read_panel, read_target


def _bcftools(*args) -> str:
    return run_tool(["bcftools", *args], check=True, capture_output=True, text=True).stdout


def _gt_matrix(path) -> np.ndarray:
    """(M, 2S) alleles parsed from `bcftools query`, independent of genimpute and cyvcf2."""
    rows = []
    for line in _bcftools("query", "-f", "[%GT\t]\n", str(path)).splitlines():
        calls = line.rstrip("\t").split("\t")
        rows.append([int(a) for gt in calls for a in gt.replace("/", "|").split("|")])
    return np.asarray(rows)


VCF_HEADER = (
    "##fileformat=VCFv4.2\n"
    "##contig=<ID=20>\n"
    "##contig=<ID=21>\n"
    '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n'
)


def write_vcf(directory: Path, rows: list[str], samples=("S1", "S2"), name="small.vcf") -> Path:
    """Plain-text VCF; each row is whitespace-separated CHROM POS ID REF ALT QUAL FILTER INFO FORMAT GT..."""
    path = directory / name
    header = "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *samples])
    body = "".join("\t".join(row.split()) + "\n" for row in rows)
    path.write_text(VCF_HEADER + header + "\n" + body)
    return path


# --------------------------------------------------------------------------
# array lists
# --------------------------------------------------------------------------


def _array(tmp_path: Path, text: str, name="array.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_array_list_chrom_pos(tmp_path):
    sites = read_array_list(_array(tmp_path, "20\t9000779\n20 9000854\n20\t\t9002313  \n"))
    assert isinstance(sites, ArraySites)
    assert sites.positions == {("20", 9000779), ("20", 9000854), ("20", 9002313)}
    assert sites.alleles == frozenset()
    assert len(sites) == 3


def test_array_list_with_alleles_uppercased(tmp_path):
    sites = read_array_list(_array(tmp_path, "20 100 a g\n20 200\n20 300 CTT C\n"))
    assert sites.positions == {("20", 100), ("20", 200), ("20", 300)}
    assert sites.alleles == {("20", 100, "A", "G"), ("20", 300, "CTT", "C")}


def test_array_list_comments_and_blank_lines(tmp_path):
    text = "# CHROM POS\n\n   \n20 100\n\t# indented comment 1 2 3\n#20 200\n\n20 300\n"
    sites = read_array_list(_array(tmp_path, text))
    assert sites.positions == {("20", 100), ("20", 300)}


@pytest.mark.parametrize("name", ["20", "chr20", "CHR20", "Chr20"])
def test_array_list_contig_naming_normalised(tmp_path, name):
    sites = read_array_list(_array(tmp_path, f"{name} 100\n{name} 200 A C\n"))
    assert sites.positions == {("20", 100), ("20", 200)}
    assert sites.alleles == {("20", 200, "A", "C")}


def test_array_list_same_site_in_both_namings_counted_once(tmp_path):
    sites = read_array_list(_array(tmp_path, "chr20 100\n20 100\nCHR20 100\n"))
    assert sites.positions == {("20", 100)}
    assert len(sites) == 1


@pytest.mark.parametrize(
    "name, key",
    [("20", "20"), ("chr20", "20"), ("CHRX", "X"), ("chrM", "MT"), ("M", "MT"), ("MT", "MT"), ("chrMT", "MT"),
     ("GL000192.1", "GL000192.1")],
)
def test_normalise_contig(name, key):
    assert normalise_contig(name) == key


def test_array_list_real_file():
    sites = read_array_list(ARRAY)
    expected = set()
    for line in ARRAY.read_text().splitlines():
        chrom, pos = line.split("\t")
        expected.add((chrom, int(pos)))
    assert sites.positions == expected
    assert len(sites) == 75
    assert all(9_000_000 <= pos <= 9_100_000 for _, pos in sites.positions)


@pytest.mark.parametrize(
    "text, lineno, fragment",
    [
        ("20 100\n20 100 A\n", 2, "3 fields"),
        ("20\n", 1, "1 fields"),
        ("20 100 A C G\n", 1, "5 fields"),
        ("# header\n\n20 1.5\n", 3, "'1.5'"),
        ("20 100\n20 abc\n", 2, "'abc'"),
        ("20 0\n", 1, "'0'"),
        ("20 -7\n", 1, "'-7'"),
        ("20 100\n20 200\n20 9e6 A C\n", 3, "'9e6'"),
    ],
)
def test_array_list_malformed_line_names_file_and_line(tmp_path, text, lineno, fragment):
    path = _array(tmp_path, text)
    with pytest.raises(InputError) as info:
        read_array_list(path)
    message = str(info.value)
    assert str(path) in message
    assert f"line {lineno}:" in message
    assert fragment in message


def test_array_list_missing_file(tmp_path):
    path = tmp_path / "nope.txt"
    with pytest.raises(InputError, match="no such file") as info:
        read_array_list(path)
    assert str(path) in str(info.value)


def test_array_list_directory_is_not_a_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_array_list(tmp_path)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n\n  \n"])
def test_array_list_without_sites(tmp_path, text):
    path = _array(tmp_path, text)
    with pytest.raises(InputError, match="at least one site") as info:
        read_array_list(path)
    assert str(path) in str(info.value)


# text that stays on one line: no \n or \r (universal newlines), no surrogates
_line_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r")
_token = st.one_of(
    st.sampled_from(["20", "chr20", "X", "0", "-1", "1.5", "abc", "#", "A", "CT", "9000779", " ", "\t", "\x0b"]),
    st.integers(-5, 10**12).map(str),
    st.text(_line_chars, max_size=8),
)
_line = st.lists(_token, max_size=6).map(" ".join) | st.text(_line_chars, max_size=30)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line, max_size=8))
def test_array_list_arbitrary_lines_only_raise_input_error(tmp_path, lines):
    path = tmp_path / "fuzz.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        sites = read_array_list(path)
    except InputError as exc:
        assert str(path) in str(exc)
        return
    assert len(sites) >= 1
    for contig, pos in sites.positions:
        assert isinstance(contig, str)
        assert isinstance(pos, int) and pos >= 1
    for contig, pos, ref, alt in sites.alleles:
        assert (contig, pos) in sites.positions
        assert ref == ref.upper() and alt == alt.upper()


def test_array_list_gzipped_file_raises_input_error(tmp_path):
    import gzip

    path = tmp_path / "array.txt.gz"
    path.write_bytes(gzip.compress(b"20\t9000779\n20\t9000854\n"))
    with pytest.raises(InputError) as info:
        read_array_list(path)
    assert str(path) in str(info.value)


_site = st.tuples(
    st.sampled_from(["", "chr", "CHR", "Chr"]),
    st.sampled_from(["20", "21", "X"]),
    st.integers(1, 250_000_000),
    st.none() | st.tuples(st.sampled_from(["A", "c", "GT"]), st.sampled_from(["t", "G", "A"])),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sites=st.lists(_site, min_size=1, max_size=20),
    seps=st.lists(st.sampled_from([" ", "\t", "  ", " \t "]), min_size=3, max_size=3),
    comments=st.lists(st.sampled_from(["", "# comment", "   ", "#20 5"]), max_size=5),
)
def test_array_list_well_formed_lines_parse_exactly(tmp_path, sites, seps, comments):
    lines = []
    for i, (prefix, chrom, pos, alleles) in enumerate(sites):
        fields = [prefix + chrom, str(pos)] + (list(alleles) if alleles else [])
        line = fields[0]
        for sep, field in zip(seps, fields[1:]):
            line += sep + field
        lines.append(line)
        if i < len(comments):
            lines.append(comments[i])
    path = tmp_path / "good.txt"
    path.write_text("\n".join(lines) + "\n")
    result = read_array_list(path)
    assert result.positions == {(chrom, pos) for _, chrom, pos, _ in sites}
    assert result.alleles == {
        (chrom, pos, a[0].upper(), a[1].upper()) for _, chrom, pos, a in sites if a is not None
    }


# --------------------------------------------------------------------------
# reference panel
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def panel_data():
    return read_panel(PANEL)


def test_read_panel_samples_and_records(panel_data):
    samples = _bcftools("query", "-l", str(PANEL)).split()
    n_records = int(_bcftools("view", "-H", str(PANEL)).count("\n"))
    assert n_records == 1258
    assert panel_data.samples == samples
    assert panel_data.n_haplotypes == 2 * len(samples)
    assert len(panel_data.records) == n_records
    assert panel_data.packed.shape == (n_records, (2 * len(samples) + 7) // 8)
    assert panel_data.packed.dtype == np.uint8


def test_read_panel_site_fields_match_bcftools(panel_data):
    rows = [line.split("\t") for line in _bcftools("query", "-f", "%CHROM\t%POS\t%ID\t%REF\t%ALT\n", str(PANEL)).splitlines()]
    recs = panel_data.records
    assert recs.contigs == [r[0] for r in rows]
    assert recs.positions.dtype == np.int64
    assert recs.positions.tolist() == [int(r[1]) for r in rows]
    assert recs.ids == [r[2] for r in rows]
    assert recs.refs == [r[3] for r in rows]
    assert recs.alts == [r[4] for r in rows]
    assert any(len(r) > 1 for r in recs.refs) and any(len(a) > 1 for a in recs.alts)  # indels kept


def test_read_panel_packed_round_trip_against_cyvcf2(panel_data):
    n_hap = panel_data.n_haplotypes
    unpacked = np.unpackbits(panel_data.packed, axis=1, count=n_hap)
    wanted = {0, 1, 2, 500, 777, len(panel_data.records) - 1}
    seen = set()
    vcf = cyvcf2.VCF(str(PANEL))
    for i, rec in enumerate(vcf):
        if i in wanted:
            expected = np.array([g[:2] for g in rec.genotypes]).reshape(-1)
            assert rec.POS == panel_data.records.positions[i]
            np.testing.assert_array_equal(unpacked[i], expected)
            seen.add(i)
    vcf.close()
    assert seen == wanted


def test_read_panel_packed_matches_bcftools_genotypes(panel_data):
    expected = _gt_matrix(PANEL)
    unpacked = np.unpackbits(panel_data.packed, axis=1, count=panel_data.n_haplotypes)
    assert unpacked.shape == expected.shape
    np.testing.assert_array_equal(unpacked, expected)
    # padding bits past the last haplotype are zero, so equal panels pack equally
    assert not np.unpackbits(panel_data.packed, axis=1)[:, panel_data.n_haplotypes:].any()


def test_read_panel_unphased_het_names_record_and_sample(tmp_path):
    path = write_vcf(
        tmp_path,
        [
            "20 100 . A G . . . GT 0|1 0|0",
            "20 150 . C T . . . GT 0|0 1/0",
        ],
        samples=("NA001", "NA002"),
    )
    with pytest.raises(InputError) as info:
        read_panel(path)
    message = str(info.value)
    assert "20:150" in message and "record 2" in message
    assert "NA002" in message and "NA001" not in message
    assert "phased" in message
    assert str(path) in message


def test_read_panel_accepts_unphased_homozygous(tmp_path):
    path = write_vcf(tmp_path, ["20 100 . A G . . . GT 1/1 0/0", "20 101 . A G . . . GT 0|1 1|0"])
    data = read_panel(path)
    np.testing.assert_array_equal(np.unpackbits(data.packed, axis=1, count=4), [[1, 1, 0, 0], [0, 1, 1, 0]])


@pytest.mark.parametrize("gt", [".|.", "0|.", ".|1", "./.", "."])
def test_read_panel_missing_genotype(tmp_path, gt):
    path = write_vcf(tmp_path, ["20 100 . A G . . . GT 0|1 0|0", f"20 200 . A G . . . GT 0|1 {gt}"])
    with pytest.raises(InputError, match="missing") as info:
        read_panel(path)
    assert "20:200" in str(info.value)


def test_read_panel_splits_multiallelic_records_as_bcftools_norm_does(tmp_path):
    path = write_vcf(tmp_path, ["20 100 . A G . . . GT 0|1 0|0", "20 200 rs1 A T,C,AT . . . GT 0|1 2|3",
                                "20 300 . G C . . . GT 1|1 0|1"])
    split = tmp_path / "split.vcf"
    run_tool(["bcftools", "norm", "-m", "-any", "-o", str(split), str(path)], check=True, capture_output=True)
    ours, theirs = read_panel(path), read_panel(split)
    assert ours.records.alts == theirs.records.alts == ["G", "T", "C", "AT", "C"]
    assert ours.records.ids == theirs.records.ids
    np.testing.assert_array_equal(ours.records.positions, theirs.records.positions)
    np.testing.assert_array_equal(ours.packed, theirs.packed)


def test_read_panel_past_its_first_block_of_records(tmp_path):
    # records are checked and packed in blocks (4,096 for 2 samples): a multi-allelic record and a bad one in the second
    rows = [f"20 {100 + i} . A G . . . GT {i % 2}|1 1|{i % 3 // 2}" for i in range(4300)]
    rows[4150] = "20 4250 . A T,C . . . GT 0|2 1|0"
    path = write_vcf(tmp_path, rows)
    split = tmp_path / "split.vcf"
    run_tool(["bcftools", "norm", "-m", "-any", "-o", str(split), str(path)], check=True, capture_output=True)
    ours, theirs = read_panel(path), read_panel(split)
    assert len(ours.records.alts) == 4301 and ours.records.alts[4150:4152] == ["T", "C"]
    np.testing.assert_array_equal(ours.packed, theirs.packed)
    # records 4149 (1|1 1|0), 4150 split into T and C, 4151 (1|1 1|1)
    np.testing.assert_array_equal(np.unpackbits(ours.packed[4149:4153], axis=1, count=4),
                                  [[1, 1, 1, 0], [0, 0, 1, 0], [0, 1, 0, 0], [1, 1, 1, 1]])
    rows[4220] = "20 4320 . A G . . . GT 0|1 1/0"
    with pytest.raises(InputError, match="unphased") as info:
        read_panel(write_vcf(tmp_path, rows, name="bad.vcf"))
    assert "record 4221 (20:4320)" in str(info.value)


def test_read_panel_allele_beyond_alt_is_named(tmp_path):
    path = write_vcf(tmp_path, ["20 100 . A G . . . GT 0|1 0|0", "20 200 . A T,C . . . GT 0|1 3|0"])
    with pytest.raises(InputError, match="20:200.*found 3"):
        read_panel(path)


def test_read_panel_unsorted_positions(tmp_path):
    path = write_vcf(tmp_path, ["20 300 . A G . . . GT 0|1 0|0", "20 200 . A G . . . GT 0|1 0|0"])
    with pytest.raises(InputError, match="sorted") as info:
        read_panel(path)
    assert "20:200" in str(info.value)


def test_read_panel_contigs_not_grouped(tmp_path):
    path = write_vcf(
        tmp_path,
        ["20 300 . A G . . . GT 0|1 0|0", "21 100 . A G . . . GT 0|1 0|0", "20 400 . A G . . . GT 0|1 0|0"],
    )
    with pytest.raises(InputError, match="grouped"):
        read_panel(path)


def test_read_panel_haploid_calls_rejected(tmp_path):
    path = write_vcf(tmp_path, ["20 100 . A G . . . GT 0 1"])
    with pytest.raises(InputError, match="diploid"):
        read_panel(path)


def test_read_panel_missing_file(tmp_path):
    path = tmp_path / "absent.vcf.gz"
    with pytest.raises(InputError) as info:
        read_panel(path)
    assert str(path) in str(info.value)


def test_read_panel_not_a_vcf(tmp_path):
    path = tmp_path / "notes.vcf"
    path.write_text("this is not a VCF\n")
    with pytest.raises(InputError, match="cannot be read"):
        read_panel(path)


def test_read_panel_accepts_split_multiallelic_and_indels(tmp_path):
    path = write_vcf(
        tmp_path,
        [
            "20 100 . A G . . . GT 0|1 0|0",  # split multi-allelic: two records at one position
            "20 100 . A T . . . GT 0|0 1|0",
            "20 200 . CTT C . . . GT 1|1 0|1",  # deletion
            "20 300 . G GAAC . . . GT 0|0 0|1",  # insertion
            "20 400 . A . . . . GT 0|0 0|0",  # monomorphic: skipped
            "21 50 . C A . . . GT 1|0 0|0",
        ],
    )
    data = read_panel(path)
    assert data.samples == ["S1", "S2"]
    assert data.records.contigs == ["20", "20", "20", "20", "21"]
    assert data.records.positions.tolist() == [100, 100, 200, 300, 50]
    assert data.records.refs == ["A", "A", "CTT", "G", "C"]
    assert data.records.alts == ["G", "T", "C", "GAAC", "A"]
    np.testing.assert_array_equal(
        np.unpackbits(data.packed, axis=1, count=4),
        [[0, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1], [0, 0, 0, 1], [1, 0, 0, 0]],
    )


def test_read_panel_without_variant_records(tmp_path):
    path = write_vcf(tmp_path, ["20 400 . A . . . . GT 0|0 0|0"])
    with pytest.raises(InputError, match="found none"):
        read_panel(path)


# --------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------


def test_read_target_phased_slice():
    target = read_target(TARGET_PHASED)
    n_records = int(_bcftools("view", "-H", str(TARGET_PHASED)).count("\n"))
    assert target.samples == _bcftools("query", "-l", str(TARGET_PHASED)).split()
    assert len(target.samples) == 10
    assert target.alleles.shape == (n_records, 2 * len(target.samples)) == (72, 20)
    assert target.alleles.dtype == np.int8
    assert target.phased.shape == (n_records,) and target.phased.dtype == bool
    assert target.phased.all()
    np.testing.assert_array_equal(target.alleles, _gt_matrix(TARGET_PHASED))


def test_read_target_unphased_slice():
    phased = read_target(TARGET_PHASED)
    target = read_target(TARGET_UNPHASED)
    assert target.alleles.shape == (72, 20)
    assert not target.phased.all()
    assert target.phased.any()  # records where every sample is homozygous carry no phase
    gts = target.alleles.reshape(72, 10, 2)
    het = gts[:, :, 0] != gts[:, :, 1]
    np.testing.assert_array_equal(target.phased, ~het.any(axis=1))
    # same genotypes as the phased slice, up to the order within each genotype
    np.testing.assert_array_equal(np.sort(gts, axis=2), np.sort(phased.alleles.reshape(72, 10, 2), axis=2))
    np.testing.assert_array_equal(target.records.positions, phased.records.positions)


def test_read_target_truth_slice_matches_panel_sites(panel_data):
    truth = read_target(TARGET_TRUTH)
    assert truth.phased.all()
    assert truth.alleles.shape == (1258, 20)
    np.testing.assert_array_equal(truth.records.positions, panel_data.records.positions)
    assert truth.records.alts == panel_data.records.alts


def test_read_target_keeps_multiallelic_and_monomorphic(tmp_path):
    path = write_vcf(
        tmp_path,
        [
            "20 100 . A T,C . . . GT 0|2 1/1",
            "20 200 . G . . . . GT 0|0 0/0",
            "20 300 . A G . . . GT 0/1 0|0",
        ],
    )
    target = read_target(path)
    assert target.records.alts == ["T,C", ".", "G"]
    np.testing.assert_array_equal(target.alleles, [[0, 2, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]])
    np.testing.assert_array_equal(target.phased, [True, True, False])


def test_read_target_keeps_missing_and_haploid_calls(tmp_path):
    path = write_vcf(tmp_path, ["X 100 . A G . . . GT 0|1 .|.", "X 200 . A G . . . GT 1 ./1", "X 300 . A G . . . GT 1 0"])
    target = read_target(path)
    np.testing.assert_array_equal(target.alleles, [[0, 1, MISSING, MISSING], [1, ABSENT, MISSING, 1], [1, ABSENT, 0, ABSENT]])
    assert target.phased.all()  # no heterozygous call lost its phase


def test_read_target_lone_dot_is_missing_of_the_samples_ploidy(tmp_path):
    # sample 1 is diploid on 20 (so its `.` is ./.), sample 2 haploid on 20 and diploid on 21
    path = write_vcf(tmp_path, ["20 100 . A G . . . GT 0|1 1", "20 200 . A G . . . GT . .",
                                "21 100 . A G . . . GT . .", "21 200 . A G . . . GT 1|0 0|1"])
    target = read_target(path)
    np.testing.assert_array_equal(target.alleles, [[0, 1, 1, ABSENT], [MISSING, MISSING, MISSING, ABSENT],
                                                   [MISSING, MISSING, MISSING, MISSING], [1, 0, 0, 1]])


def test_read_target_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_target(tmp_path / "absent.vcf")


def _edited_text(tmp_path, source: Path, row: int, edit=None) -> Path:
    """`source` (bgzipped VCF) as plain text, its body's record `row` edited by `edit` (list of columns -> list)."""
    import gzip

    with gzip.open(source, "rt") as handle:
        lines = handle.read().splitlines()
    body = [i for i, line in enumerate(lines) if not line.startswith("#")]
    if edit is not None:
        lines[body[row]] = "\t".join(edit(lines[body[row]].split("\t")))
    path = tmp_path / source.name.removesuffix(".gz")
    path.write_text("\n".join(lines) + "\n")
    return path


def _panel_variant(tmp_path, edit=None) -> Path:
    """The test panel as plain text, one record edited by `edit`."""
    return _edited_text(tmp_path, PANEL, 7, edit)


@pytest.mark.parametrize("edit", [
    None,  # the common panel, read from its text
    lambda c: c[:4] + ["G,T"] + c[5:],  # multi-allelic: split by htslib's path
    lambda c: c[:9] + ["0/0"] + c[10:],  # an unphased homozygous call is a valid panel call
    lambda c: c[:8] + ["GT:DS"] + [f"{g}:0" for g in c[9:]],  # more FORMAT fields than GT
])
def test_the_text_reader_of_common_panels_reads_what_htslib_reads(tmp_path, monkeypatch, edit):
    from genimpute.io import vcf_reader

    path = _panel_variant(tmp_path, edit)
    fast = read_panel(path)
    assert (vcf_reader._read_common_panel(path, fast.samples, vcf_reader.PackedBlocks()) is None) == (edit is not None)
    monkeypatch.setattr(vcf_reader, "_read_common_panel", lambda *args: None)
    slow = read_panel(path)
    assert fast.samples == slow.samples and fast.n_haplotypes == slow.n_haplotypes
    assert np.array_equal(fast.packed, slow.packed) and np.array_equal(fast.records.positions, slow.records.positions)
    for name in ("contigs", "ids", "refs", "alts"):
        assert getattr(fast.records, name) == getattr(slow.records, name)


def _target_variant(tmp_path, edit=None) -> Path:
    """The phased test target as plain text, one record edited by `edit`."""
    return _edited_text(tmp_path, TARGET_PHASED, 5, edit)


@pytest.mark.parametrize("edit", [
    None,  # the common target, read from its text
    lambda c: c[:9] + ["0/1"] + c[10:],  # an unphased call: htslib's path, which keeps the record's phase
    lambda c: c[:9] + [".|."] + c[10:],  # a missing call
    lambda c: c[:9] + ["1"] + c[10:],  # a haploid call
    lambda c: c[:4] + ["G,T"] + c[5:9] + ["0|2"] + c[10:],  # multi-allelic, kept whole
    lambda c: c[:4] + ["."] + c[5:9] + ["0|0"] * len(c[9:]),  # monomorphic
])
def test_the_text_reader_of_common_targets_reads_what_htslib_reads(tmp_path, monkeypatch, edit):
    from genimpute.io import vcf_reader

    path = _target_variant(tmp_path, edit)
    fast = read_target(path)
    assert (vcf_reader._read_common_target(path, fast.samples) is None) == (edit is not None)
    monkeypatch.setattr(vcf_reader, "_read_common_target", lambda *args: None)
    slow = read_target(path)
    assert fast.samples == slow.samples and fast.alleles.dtype == slow.alleles.dtype == np.int8
    assert np.array_equal(fast.alleles, slow.alleles) and np.array_equal(fast.phased, slow.phased)
    assert np.array_equal(fast.records.positions, slow.records.positions)
    for name in ("contigs", "ids", "refs", "alts"):
        assert getattr(fast.records, name) == getattr(slow.records, name)


def test_a_bcf_target_goes_to_htslibs_path_without_the_text_reader_reading_it(tmp_path, monkeypatch):
    from genimpute.io import vcf_reader

    bcf = tmp_path / "target.bcf"
    _bcftools("view", "-Ob", "-o", str(bcf), str(TARGET_PHASED))
    samples = read_target(TARGET_PHASED).samples
    with monkeypatch.context() as patched:
        patched.setattr(vcf_reader, "_common_records", lambda *args: pytest.fail("parsed BCF's bytes as text"))
        assert vcf_reader._read_common_target(bcf, samples) is None
    fast, slow = read_target(TARGET_PHASED), read_target(bcf)
    assert np.array_equal(fast.alleles, slow.alleles) and fast.records.alts == slow.records.alts


def test_the_text_reader_of_targets_stops_at_an_unsorted_record_as_htslibs_path_does(tmp_path):
    def swapped(lines):
        body = [i for i, line in enumerate(lines) if not line.startswith("#")]
        lines[body[3]], lines[body[4]] = lines[body[4]], lines[body[3]]
        return lines

    import gzip

    with gzip.open(TARGET_PHASED, "rt") as handle:
        lines = swapped(handle.read().splitlines())
    path = tmp_path / "unsorted.vcf"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"record 5 \(.*\): expected records sorted by position"):
        read_target(path)


def test_the_text_reader_reads_a_last_record_with_no_newline_after_it(tmp_path, monkeypatch):
    from genimpute.io import vcf_reader

    path = _panel_variant(tmp_path, None)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    monkeypatch.setattr(vcf_reader, "_TEXT_BLOCK", 1000)  # many blocks, each ending inside a line
    fast = vcf_reader._read_common_panel(path, read_panel(PANEL).samples, vcf_reader.PackedBlocks())
    slow = read_panel(PANEL)
    assert fast is not None and np.array_equal(fast.packed, slow.packed)
    assert np.array_equal(fast.records.positions, slow.records.positions)


@pytest.mark.parametrize("bad", [None, ".|0", "0|.", "0/1", "2|0", "0|1 ", "0\t1"])
def test_the_text_reader_packs_phased_calls_where_they_lie_and_no_other(bad):
    from genimpute.io.vcf_reader import _pack_calls

    calls = ["0|1", "1|0", "1|1", "0|0", "1|0"]
    line = "\t".join(calls)
    if bad is not None:
        line = line[:4] + bad + line[4 + len(bad):]  # the second call, or the tab after it
    text = np.frombuffer(f"20\t5\t{line}\n".encode(), dtype=np.uint8)
    packed, common = _pack_calls(text, np.array([5], dtype=np.int64), len(calls))
    assert common == (bad is None)
    if bad is None:
        alleles = [int(a) for call in calls for a in call.split("|")]
        assert packed.tolist() == [np.packbits(alleles).tolist()]


@pytest.mark.parametrize("cores", [1, 2])  # inflated in the reading thread, or in one of its own
def test_the_text_reader_inflates_a_gzipped_panel_as_htslib_reads_it(monkeypatch, cores):
    from genimpute.io import vcf_reader

    slow = read_panel(PANEL)  # htslib's path reads it in full only where the text reader gives up
    monkeypatch.setattr(vcf_reader, "usable_cores", lambda: cores)
    fast = vcf_reader._read_common_panel(PANEL, slow.samples, vcf_reader.PackedBlocks())
    assert fast is not None and np.array_equal(fast.packed, slow.packed)
    assert np.array_equal(fast.records.positions, slow.records.positions) and fast.records.alts == slow.records.alts


def test_a_corrupted_gzipped_panel_is_refused_with_htslibs_message(tmp_path):
    from genimpute.io import vcf_reader

    data = bytearray(Path(PANEL).read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)  # a deflate block's middle
    path = tmp_path / "corrupted.vcf.gz"
    path.write_bytes(data)
    samples = read_panel(PANEL).samples
    assert vcf_reader._read_common_panel(path, samples, vcf_reader.PackedBlocks()) is None
    with pytest.raises(InputError, match="malformed record"):
        read_panel(path)


@pytest.mark.parametrize("edit", [None, lambda c: c[:4] + ["G,T"] + c[5:]])
def test_a_panel_spooled_to_a_file_reads_as_one_in_memory(tmp_path, monkeypatch, edit):
    from genimpute.io import vcf_reader

    path = _panel_variant(tmp_path, edit)
    in_memory = read_panel(path)
    monkeypatch.setattr(vcf_reader, "_TEXT_BLOCK", 64)  # records spooled before the one that is not common
    with RowSpool(tmp_path) as spool:
        spooled = read_panel(path, spool)
        assert isinstance(spooled.packed, FileRows)
        np.testing.assert_array_equal(spooled.packed[:], in_memory.packed)
    assert spooled.records.alts == in_memory.records.alts
    np.testing.assert_array_equal(spooled.records.positions, in_memory.records.positions)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # the spool left nothing behind


def test_the_text_reader_stops_at_the_same_records_as_htslib(tmp_path):
    for edit, says in ((lambda c: c[:9] + ["0|."] + c[10:], "missing call"),
                       (lambda c: c[:9] + ["0/1"] + c[10:], "unphased heterozygous"),
                       (lambda c: c[:1] + ["5"] + c[2:], "sorted by position")):
        with pytest.raises(InputError, match=says):
            read_panel(_panel_variant(tmp_path, edit))
