"""Imputed VCF output (genimpute.io.vcf_writer) against hand-computed values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tools import run_tool


from genimpute.errors import InputError
from genimpute.io.vcf_writer import DR2_CERTAIN, DosageSums, FormatFields, VcfWriter, genotype_columns

# ---------------------------------------------------------------------------
# genotype_columns
# ---------------------------------------------------------------------------

# (p1, p2, expected "GT:DS:GP"), worked by hand:
HAND_CASES = [
    # p1 .9, p2 .2: GT 1|0 ; DS 1.1 ; GP0 = .1*.8 = .08 ; GP1 = .9*.8 + .1*.2 = .74 ; GP2 = .9*.2 = .18
    (0.9, 0.2, "1|0:1.1:0.08,0.74,0.18"),
    # p1 .2, p2 .9: the mirror image, GT 0|1
    (0.2, 0.9, "0|1:1.1:0.08,0.74,0.18"),
    # certain ref: DS 0, GP (1, 0, 0) -- "1" and "0", not "1.000" / "0.000"
    (0.0, 0.0, "0|0:0:1,0,0"),
    # certain alt on both: DS 2
    (1.0, 1.0, "1|1:2:0,0,1"),
    # certain het
    (1.0, 0.0, "1|0:1:0,1,0"),
    # p1 .4, p2 .6: GT 0|1 ; DS 1 ; GP0 = .6*.4 = .24 ; GP2 = .4*.6 = .24 ; GP1 = .36 + .16 = .52
    (0.4, 0.6, "0|1:1:0.24,0.52,0.24"),
    # p1 .49 rounds to ref, p2 .51 to alt ; DS 1 ; GP0 = .51*.49 = .2499 -> 0.25 ;
    # GP2 = .49*.51 = .2499 -> 0.25 ; GP1 = .49*.49 + .51*.51 = .2401 + .2601 = .5002 -> 0.5
    (0.49, 0.51, "0|1:1:0.25,0.5,0.25"),
    # p1 .1234, p2 .0005: DS .1239 -> 0.124 ; GP0 = .8766*.9995 = .87616 -> 0.876 ;
    # GP2 = .1234*.0005 = .0000617 -> 0 ; GP1 = .1234*.9995 + .8766*.0005 = .12334 + .00044 = .12378 -> 0.124
    (0.1234, 0.0005, "0|0:0.124:0.876,0.124,0"),
    # p1 .7, p2 .95: GT 1|1 ; DS 1.65 ; GP0 = .3*.05 = .015 ; GP1 = .7*.05 + .3*.95 = .035 + .285 = .32 ;
    # GP2 = .7*.95 = .665
    (0.7, 0.95, "1|1:1.65:0.015,0.32,0.665"),
]


def test_genotype_columns_hand_values():
    p1 = np.array([[c[0] for c in HAND_CASES]])
    p2 = np.array([[c[1] for c in HAND_CASES]])
    got = genotype_columns(p1, p2).rows()
    assert got == ["\t".join(c[2] for c in HAND_CASES)]


def test_genotype_columns_shape_and_row_order():
    # (V=2, S=3): row v, column s must come from p[v, s]
    p1 = np.array([[0.0, 1.0, 0.3], [0.6, 0.0, 1.0]])
    p2 = np.array([[0.0, 1.0, 0.0], [0.0, 0.8, 1.0]])
    got = [row.split("\t") for row in genotype_columns(p1, p2).rows()]
    # (0.3, 0): GP0 = .7, GP1 = .3, GP2 = 0 ; (0.6, 0): GP0 .4 GP1 .6 ; (0, .8): GP0 .2 GP1 .8
    assert got == [
        ["0|0:0:1,0,0", "1|1:2:0,0,1", "0|0:0.3:0.7,0.3,0"],
        ["1|0:0.6:0.4,0.6,0", "0|1:0.8:0.2,0.8,0", "1|1:2:0,0,1"],
    ]


def test_haploid_calls_take_p1_alone_beside_diploid_ones():
    p1 = np.array([[0.8, 0.8, 0.0], [0.25, 1.0, 0.5]])
    p2 = np.array([[0.4, 0.4, 0.9], [0.9, 0.0, 0.5]])  # ignored where haploid
    haploid = np.array([[True, False, True], [True, True, False]])
    # haploid p .8: GT 1, DS .8, GP (.2, .8) ; diploid (.8, .4): DS 1.2, GP (.12, .56, .32)
    # haploid 0: GT 0, GP (1, 0) ; haploid .25: GT 0 ; haploid 1: GT 1, GP (0, 1) ; diploid (.5, .5): 1|1, GP .25 .5 .25
    assert genotype_columns(p1, p2, haploid).rows() == [
        "1:0.8:0.2,0.8\t1|0:1.2:0.12,0.56,0.32\t0:0:1,0",
        "0:0.25:0.75,0.25\t1:1:0,1\t1|1:1:0.25,0.5,0.25",
    ]


def test_genotype_columns_of_no_records_or_no_samples():
    assert genotype_columns(np.zeros((0, 4)), np.zeros((0, 4))).rows() == []
    assert genotype_columns(np.zeros((2, 0)), np.zeros((2, 0))).rows() == ["", ""]


def test_genotype_columns_matches_definition_on_random_probabilities():
    rng = np.random.default_rng(7)
    p1 = rng.random((20, 15))
    p2 = rng.random((20, 15))
    p1[0, :5] = [0.0, 1.0, 0.0, 1.0, 0.5 - 1e-9]
    got = [row.split("\t") for row in genotype_columns(p1, p2).rows()]
    assert len(got) == p1.shape[0]
    for v in range(p1.shape[0]):
        assert len(got[v]) == p1.shape[1]
        for s in range(p1.shape[1]):
            a, b = p1[v, s], p2[v, s]
            gt, ds, gp = got[v][s].split(":")
            assert gt == f"{int(a >= 0.5)}|{int(b >= 0.5)}"
            assert float(ds) == pytest.approx(a + b, abs=0.0005 + 1e-12)
            assert len(ds.partition(".")[2]) <= 3
            assert ds == "0" or not ds.endswith(("0", "."))
            gps = [float(x) for x in gp.split(",")]
            want = [(1 - a) * (1 - b), a * (1 - b) + (1 - a) * b, a * b]
            assert gps == pytest.approx(want, abs=0.0005 + 1e-12)
            for text in gp.split(","):
                assert text == "0" or not text.endswith("0")
                assert not text.endswith(".")


def test_format_fields_choose_and_order_each_calls_values():
    rng = np.random.default_rng(3)
    p1, p2 = rng.random((6, 9)), rng.random((6, 9))
    haploid = rng.random((6, 9)) < 0.3
    default = [row.split("\t") for row in genotype_columns(p1, p2, haploid).rows()]
    chosen = [row.split("\t") for row in
              genotype_columns(p1, p2, haploid, FormatFields(("GP", "HDS", "DS", "GT"))).rows()]
    short = [row.split("\t") for row in genotype_columns(p1, p2, haploid, FormatFields(("GT", "DS"))).rows()]
    for v in range(6):
        for s in range(9):
            gt, ds, gp = default[v][s].split(":")
            assert short[v][s] == f"{gt}:{ds}"
            gt2, ds2, hds, gp2 = chosen[v][s].split(":")  # in the order GT, DS, HDS, GP, as given or not
            assert (gt2, gp2, ds2) == (gt, gp, ds)
            want = [p1[v, s]] if haploid[v, s] else [p1[v, s], p2[v, s]]
            assert [float(x) for x in hds.split(",")] == pytest.approx(want, abs=0.0005 + 1e-12)


@pytest.mark.parametrize("names", [("GT", "DS", "GP"), ("GT",), ("GT", "DS"), ("GT", "HDS", "GP")])
def test_calls_certain_of_ref_are_written_as_each_field_set_says(names):
    """Calls of P(alt) 0 on both haplotypes are copied whole from one text:
    the same text as a call's own fields would give, and a haploid call of
    0 keeps its one allele."""
    p1 = np.array([[0.0, 0.0, 0.0, 1e-9]])
    p2 = np.array([[0.0, 0.0, 0.3, 0.0]])
    haploid = np.array([[False, True, False, False]])
    got = genotype_columns(p1, p2, haploid, FormatFields(names)).rows()[0].split("\t")
    whole = {"GT": "0|0", "DS": "0", "HDS": "0,0", "GP": "1,0,0"}
    assert got[0] == ":".join(whole[n] for n in names)
    assert got[1] == ":".join({"GT": "0", "DS": "0", "HDS": "0", "GP": "1,0"}[n] for n in names)
    assert got[3] == got[0]  # 1e-9 rounds to the same text through the fields
    assert got[2] == "0|0" if names == ("GT",) else got[2].startswith("0|0:") and got[2] != got[0]


def _reference_call(a: float, b: float, names: tuple) -> str:
    """A diploid call's fields, each value rounded to three decimals (ties
    to even) with trailing zeros dropped, computed one value at a time."""
    def text(x):
        return f"{np.rint(x * 1000) / 1000:.3f}".rstrip("0").rstrip(".")
    gp0, gp2 = (1 - a) * (1 - b), a * b
    fields = {"GT": f"{int(a >= 0.5)}|{int(b >= 0.5)}", "DS": text(a + b), "HDS": f"{text(a)},{text(b)}",
              "GP": ",".join(text(x) for x in (gp0, min(max(1 - gp0 - gp2, 0), 1), gp2))}
    return ":".join(fields[n] for n in names)


@pytest.mark.parametrize("names", [("GT", "DS", "GP"), ("GT",), ("GT", "DS"), ("GT", "HDS"), ("GT", "DS", "HDS", "GP")])
def test_calls_near_zero_print_their_own_rounded_values(names):
    """Most calls at rare records have P(alt) near 0 on both haplotypes and
    are copied whole as REF|REF when every field rounds to it; those whose
    DS, HDS or GP rounds to 0.001 must not be."""
    rng = np.random.default_rng(11)
    p1 = rng.random((30, 40)) * 0.0012
    p2 = rng.random((30, 40)) * 0.0012
    p1[:, :10] = 0.0
    p2[:, 5:15] = 0.0
    got = [row.split("\t") for row in genotype_columns(p1, p2, None, FormatFields(names)).rows()]
    want = [[_reference_call(p1[v, s], p2[v, s], names) for s in range(40)] for v in range(30)]
    assert got == want
    if names != ("GT",):  # both kinds are there
        hom_ref = _reference_call(0.0, 0.0, names)
        assert 0 < sum(call != hom_ref for row in want for call in row) < 30 * 40


@pytest.mark.parametrize("text, names", [("GT:DS:GP", ("GT", "DS", "GP")), ("gt,ds", ("GT", "DS")),
                                         ("GT", ("GT",)), ("GP:HDS:GT", ("GT", "HDS", "GP"))])
def test_format_fields_parse_colons_or_commas_into_the_written_order(text, names):
    fields = FormatFields.parse(text)
    assert fields.names == names and str(fields) == ":".join(names)
    assert [line.split(",")[0].removeprefix("##FORMAT=<ID=") for line in fields.header_lines()] == list(names)


@pytest.mark.parametrize("text, said", [("DS:GP", "expected GT"), ("GT:DS:DS", "each field once"),
                                        ("GT:AP", "found AP"), ("", "found")])
def test_format_fields_refuse_what_they_cannot_write(text, said):
    with pytest.raises(InputError, match=said):
        FormatFields.parse(text)


# ---------------------------------------------------------------------------
# DosageSums: AF and DR2
# ---------------------------------------------------------------------------


def dosage_r2(p: np.ndarray, present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    sums = DosageSums.of(p, present)
    return sums.af(), sums.r2()


def test_dosage_r2_hand_value():
    # p = .9 .1 .8 .2 : AF = 2/4 = .5 ; deviations .4 -.4 .3 -.3 ;
    # var = (.16 + .16 + .09 + .09)/4 = .125 ; DR2 = .125 / (.5*.5) = .5
    # p = .5 .5 .5 .5 : AF .5, var 0 -> DR2 0
    # p = 1 .5 0 .5 : AF .5 ; var = (.25 + 0 + .25 + 0)/4 = .125 -> .5
    # p = .6 .2 0 0 : AF .2 ; devs .4 0 -.2 -.2 ; var = (.16+0+.04+.04)/4 = .06 ; .06/(.2*.8) = .375
    p = np.array([[0.9, 0.1, 0.8, 0.2], [0.5, 0.5, 0.5, 0.5], [1.0, 0.5, 0.0, 0.5], [0.6, 0.2, 0.0, 0.0]])
    af, r2 = dosage_r2(p)
    assert af == pytest.approx([0.5, 0.5, 0.5, 0.2])
    assert r2 == pytest.approx([0.5, 0.0, 0.5, 0.375])


def test_dosage_r2_counts_near_certain_probabilities_as_certain_and_af_does_not():
    # one carrier at .995 and 199 others at .005: AF = (.995 + .995) / 200 = .00995; DR2 from 1, 0 x 199:
    # AF' = .005, var = .005 - .005^2, DR2 = 1. Counted as they are, the spread .005s sink it to about .5
    p = np.full((2, 200), 0.005)
    p[:, 0] = 0.995
    p[1, 1:] = 0.03  # beyond DR2_CERTAIN: kept as it is
    af, r2 = dosage_r2(p)
    assert af[0] == pytest.approx((0.995 + 199 * 0.005) / 200)
    assert r2[0] == pytest.approx(1.0)
    x = np.r_[1.0, np.full(199, 0.03)]
    assert r2[1] == pytest.approx(x.var() / (x.mean() * (1 - x.mean())))
    raw = p[0]
    assert raw.var() / (raw.mean() * (1 - raw.mean())) < 0.6


def test_dosage_r2_monomorphic_is_zero():
    p = np.array([[0.0] * 6, [1.0] * 6, [1e-15] * 6])
    af, r2 = dosage_r2(p)
    assert af == pytest.approx([0.0, 1.0, 0.0])
    assert r2.tolist() == [0.0, 0.0, 0.0]
    assert np.isfinite(r2).all()


def test_dosage_r2_confident_polymorphic_is_one():
    p = np.array([[1, 0, 0, 1, 0, 0], [1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1]], dtype=float)
    af, r2 = dosage_r2(p)
    assert af == pytest.approx([1 / 3, 5 / 6, 1 / 6])
    assert r2 == pytest.approx([1.0, 1.0, 1.0])


def test_dosage_r2_matches_definition_and_is_clipped():
    rng = np.random.default_rng(3)
    p = rng.random((30, 40)) ** 3
    af, r2 = dosage_r2(p)
    for v in range(p.shape[0]):
        row = p[v]
        assert af[v] == pytest.approx(sum(row) / len(row))
        row = [0.0 if x < DR2_CERTAIN else 1.0 if x > 1 - DR2_CERTAIN else x for x in row]
        mean = sum(row) / len(row)
        var = sum((x - mean) ** 2 for x in row) / len(row)
        assert r2[v] == pytest.approx(min(1.0, max(0.0, var / (mean * (1 - mean)))))
    assert ((r2 >= 0) & (r2 <= 1)).all()


# ---------------------------------------------------------------------------
# VcfWriter
# ---------------------------------------------------------------------------

SAMPLES = ["NA1", "NA2", "NA3"]
P1 = np.array([[0.9, 0.0, 1.0], [0.2, 0.4, 0.0], [0.0, 1.0, 0.1234]])
P2 = np.array([[0.2, 0.0, 1.0], [0.9, 0.6, 0.0], [0.0, 0.0, 0.0005]])
FIXED = [["20", "100", "rs1", "A", "G"], ["20", "250", ".", "C", "T"], ["20", "9000", "rs3", "G", "GA"]]
INFO = ["AF=0.517;DR2=0.61;IMP", "AF=0.35;DR2=0.4;IMP", "AF=0.187;DR2=0.9"]


def write_example(path: Path, force: bool = False) -> VcfWriter:
    with VcfWriter(path, force=force) as writer:
        writer.write_header(SAMPLES, ["20", "21"], {"source": "genimpute-test"})
        writer.write_records(FIXED[:2], INFO[:2], "GT:DS:GP", genotype_columns(P1[:2], P2[:2]))
        writer.write_records(FIXED[2:], INFO[2:], "GT:DS:GP", genotype_columns(P1[2:], P2[2:]))
    return writer


def bcftools(*args: str) -> str:
    return run_tool(["bcftools", *args], check=True, capture_output=True, text=True).stdout


def test_writer_output_read_back_by_bcftools(tmp_path):
    out = tmp_path / "out.vcf.gz"
    writer = write_example(out)
    assert writer.records == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.vcf.gz", "out.vcf.gz.tbi"]
    # BGZF: gzip magic plus the BC extra subfield
    raw = out.read_bytes()
    assert raw[:4] == b"\x1f\x8b\x08\x04" and raw[12:14] == b"BC"

    header = bcftools("view", "-h", str(out))
    assert "##source=genimpute-test" in header
    assert "##contig=<ID=20>" in header and "##contig=<ID=21>" in header
    assert header.rstrip("\n").split("\n")[-1].split("\t")[9:] == SAMPLES

    body = bcftools("query", "-f", "%CHROM\t%POS\t%ID\t%REF\t%ALT\t%INFO/AF\t%INFO/DR2[\t%GT:%DS:%GP]\n", str(out))
    assert body.splitlines() == [
        "20\t100\trs1\tA\tG\t0.517\t0.61\t1|0:1.1:0.08,0.74,0.18\t0|0:0:1,0,0\t1|1:2:0,0,1",
        "20\t250\t.\tC\tT\t0.35\t0.4\t0|1:1.1:0.08,0.74,0.18\t0|1:1:0.24,0.52,0.24\t0|0:0:1,0,0",
        "20\t9000\trs3\tG\tGA\t0.187\t0.9\t0|0:0:1,0,0\t1|0:1:0,1,0\t0|0:0.124:0.876,0.124,0",
    ]

    flagged = bcftools("query", "-i", "IMP=1", "-f", "%POS\n", str(out))
    assert flagged.split() == ["100", "250"]

    # the .tbi index answers region queries
    region = bcftools("view", "-H", "-r", "20:200-300", str(out))
    assert [line.split("\t")[1] for line in region.splitlines()] == ["250"]
    assert bcftools("view", "-H", "-r", "21", str(out)) == ""


def test_writer_output_read_back_by_cyvcf2(tmp_path):
    import cyvcf2

    out = tmp_path / "out.vcf.gz"
    write_example(out)
    vcf = cyvcf2.VCF(str(out))
    assert vcf.samples == SAMPLES
    recs = list(vcf)
    assert [(r.CHROM, r.POS, r.REF, r.ALT) for r in recs] == [
        ("20", 100, "A", ["G"]), ("20", 250, "C", ["T"]), ("20", 9000, "G", ["GA"])]
    assert [r.INFO.get("IMP") for r in recs] == [True, True, None]
    assert [r.INFO.get("DR2") for r in recs] == pytest.approx([0.61, 0.4, 0.9])
    ds = np.array([r.format("DS")[:, 0] for r in recs])
    assert ds == pytest.approx(np.round(P1 + P2, 3), abs=1e-6)
    gp = recs[0].format("GP")
    assert np.allclose(gp, [[0.08, 0.74, 0.18], [1, 0, 0], [0, 0, 1]], atol=1e-6)
    gts = np.array([r.genotype.array() for r in recs])  # (V, S, 3): allele1, allele2, phased
    assert gts[:, :, 0].tolist() == (P1 >= 0.5).astype(int).tolist()
    assert gts[:, :, 1].tolist() == (P2 >= 0.5).astype(int).tolist()
    assert (gts[:, :, 2] == 1).all()  # phased
    # indexed region query through cyvcf2 too
    assert [r.POS for r in vcf("20:9000-9000")] == [9000]
    vcf.close()


def test_writer_refuses_existing_output_without_force(tmp_path):
    out = tmp_path / "out.vcf.gz"
    out.write_bytes(b"old")
    with pytest.raises(InputError, match="exists"):
        VcfWriter(out)
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.vcf.gz"]


def test_writer_overwrites_with_force(tmp_path):
    out = tmp_path / "out.vcf.gz"
    out.write_bytes(b"old")
    Path(f"{out}.tbi").write_bytes(b"stale index")
    write_example(out, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.vcf.gz", "out.vcf.gz.tbi"]
    assert len(bcftools("view", "-H", str(out)).splitlines()) == 3
    assert bcftools("view", "-H", "-r", "20:100", str(out)).split("\t")[1] == "100"


@pytest.mark.parametrize("name", ["out.vcf", "out.bcf", "out.vcf.bgz", "out.gz", "out.vcf.gz.tmp"])
def test_writer_refuses_name_not_ending_vcf_gz(tmp_path, name):
    with pytest.raises(InputError, match=r"\.vcf\.gz"):
        VcfWriter(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_missing_directory(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        VcfWriter(tmp_path / "nope" / "out.vcf.gz")


class Boom(RuntimeError):
    pass


def test_writer_leaves_nothing_when_the_block_raises(tmp_path):
    out = tmp_path / "out.vcf.gz"
    with pytest.raises(Boom):
        with VcfWriter(out) as writer:
            writer.write_header(SAMPLES, ["20"], {})
            writer.write_records(FIXED[:2], INFO[:2], "GT:DS:GP", genotype_columns(P1[:2], P2[:2]))
            assert writer.tmp.exists()  # work in progress goes to a temporary file
            assert not out.exists()
            raise Boom("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_writer_failure_keeps_previous_output_with_force(tmp_path):
    out = tmp_path / "out.vcf.gz"
    write_example(out)
    before = out.read_bytes(), Path(f"{out}.tbi").read_bytes()
    with pytest.raises(Boom):
        with VcfWriter(out, force=True) as writer:
            writer.write_header(SAMPLES, ["20"], {})
            raise Boom("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.vcf.gz", "out.vcf.gz.tbi"]
    assert (out.read_bytes(), Path(f"{out}.tbi").read_bytes()) == before


def test_writer_failure_while_indexing_leaves_nothing(tmp_path):
    # Unsorted records make tabix indexing fail at exit: no partial output either.
    out = tmp_path / "out.vcf.gz"
    with pytest.raises(OSError, match="index"):
        with VcfWriter(out) as writer:
            writer.write_header(SAMPLES, ["20"], {})
            writer.write_records(FIXED[::-1], INFO[::-1], "GT:DS:GP", genotype_columns(P1[::-1], P2[::-1]))
    assert list(tmp_path.iterdir()) == []


def test_bgzf_blocks_compressed_in_threads_read_back_in_order(tmp_path):
    import gzip
    import struct

    from genimpute.io.bgzf import BLOCK, EOF_BLOCK, BgzfWriter

    data = b"".join(b"20\t%d\t.\tA\tC\n" % i for i in range(300_000))  # about 4 MB: dozens of blocks
    writer = BgzfWriter(tmp_path / "x.gz", threads=3)
    # writes that end inside blocks, and at 50 block edges, all inside the data
    edges = BLOCK * np.arange(1, 51)
    assert edges[-1] < len(data)
    cuts = np.unique(np.concatenate([np.random.default_rng(3).integers(1, len(data), 350), edges]))
    for start, end in zip([0, *cuts], [*cuts, len(data)]):
        writer.write(data[start:end])
    writer.close()
    raw = (tmp_path / "x.gz").read_bytes()
    assert gzip.decompress(raw) == data and raw.endswith(EOF_BLOCK)
    at, sizes = 0, []
    while at < len(raw):  # every member is a BGZF block whose BC field gives its size
        assert raw[at:at + 4] == b"\x1f\x8b\x08\x04" and raw[at + 12:at + 14] == b"BC"
        size = struct.unpack("<H", raw[at + 16:at + 18])[0] + 1
        sizes.append(struct.unpack("<I", raw[at + size - 4:at + size])[0])  # its uncompressed length
        at += size
    assert at == len(raw) and sum(sizes) == len(data)
    assert set(sizes[:-2]) == {BLOCK} and sizes[-1] == 0  # full blocks whatever the writes; the EOF block last


def test_dosage_sums_of_batches_add_up_to_those_of_the_whole_exactly():
    from genimpute.io.vcf_writer import DosageSums

    rng = np.random.default_rng(11)
    p = (rng.random((40, 60)) ** 4).astype(np.float32)
    present = rng.random(p.shape) > 0.1
    whole = DosageSums.of(p, present)
    parts = [DosageSums.of(p[:, cut], present[:, cut]) for cut in (slice(0, 7), slice(7, 31), slice(31, 60))]
    total = parts[2] + parts[0] + parts[1]  # in any order
    for field in ("alt", "alt_squared", "haplotypes", "certain_alt", "certain_alt_squared"):
        assert np.array_equal(getattr(total, field), getattr(whole, field))
    assert np.array_equal(total.r2(), whole.r2())
    af, r2 = dosage_r2(p.astype(np.float64), present)
    for v in range(len(p)):  # against the definition over the present haplotypes
        x = p[v, present[v]].astype(np.float64)
        assert af[v] == pytest.approx(x.mean(), abs=1e-9)
        c = np.where(x < DR2_CERTAIN, 0.0, np.where(x > 1 - DR2_CERTAIN, 1.0, x))
        assert r2[v] == pytest.approx(min(1.0, c.var() / (c.mean() * (1 - c.mean()))), abs=1e-7)


def test_spooled_batches_join_into_the_columns_of_the_whole(tmp_path):
    from genimpute.io.spool import ColumnSpool

    rng = np.random.default_rng(5)
    p1, p2 = rng.random((50, 30)), rng.random((50, 30))
    haploid = rng.random((50, 30)) < 0.2
    batches, chunks = (slice(0, 7), slice(7, 20), slice(20, 30)), (slice(0, 20), slice(20, 21), slice(21, 50))
    with ColumnSpool(tmp_path) as spool:
        for window in range(2):  # the spool empties between windows
            for b in batches:
                for c in chunks:
                    spool.put(genotype_columns(p1[c, b], p2[c, b], haploid[c, b]))
            joined = list(spool.joined(len(batches)))
            assert [len(j) for j in joined] == [20, 1, 29]
            assert sum((j.rows() for j in joined), []) == genotype_columns(p1, p2, haploid).rows()
        for b in batches:  # a window whose chunks are not all read leaves nothing for the next one
            spool.put(genotype_columns(p1[:5, b], p2[:5, b]))
        assert next(spool.joined(len(batches))).rows() == genotype_columns(p1[:5], p2[:5]).rows()
        for b in batches:
            spool.put(genotype_columns(p1[5:9, b], p2[5:9, b]))
        assert [j.rows() for j in spool.joined(len(batches))] == [genotype_columns(p1[5:9], p2[5:9]).rows()]
    assert not list(tmp_path.iterdir())  # the spool's file has no name to leave behind


def test_a_killed_writers_temporary_files_are_removed_by_the_next_writer(tmp_path):
    import os
    import subprocess as sp

    dead = sp.Popen(["true"])
    dead.wait()  # its pid is no longer running
    stale = [tmp_path / f".tmp{dead.pid}.out.vcf.gz", tmp_path / f".tmp{dead.pid}.out.vcf.gz.tbi"]
    other = [tmp_path / f".tmp{dead.pid}.other.vcf.gz", tmp_path / "notes.tmp",
             tmp_path / f".tmp{os.getpid()}.out.vcf.gz.keep"]  # another output's; not a writer's name; ours
    for path in [*stale, *other]:
        path.write_text("partial")
    with VcfWriter(tmp_path / "out.vcf.gz") as writer:
        writer.write_header(SAMPLES, ["20"], {})
    assert not any(p.exists() for p in stale) and all(p.exists() for p in other)
    assert (tmp_path / "out.vcf.gz").exists()


def test_a_full_disk_gives_one_error_line_and_no_partial_output(tmp_path, monkeypatch):
    import errno

    from cli_helpers import run
    from paths import PANEL, TARGET_PHASED

    from genimpute.io import bgzf

    written = {"bytes": 0}
    real_open = open

    class FillingFile:  # a disk that fills after 5 kB
        def __init__(self, path, mode):
            self.handle = real_open(path, mode)

        def write(self, data):
            written["bytes"] += len(data)
            if written["bytes"] > 5_000:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.handle.write(data)

        def close(self):
            self.handle.close()

    monkeypatch.setattr(bgzf, "open", FillingFile, raising=False)
    out = tmp_path / "out" / "imputed.vcf.gz"
    out.parent.mkdir()
    result = run(["-q", "impute", str(TARGET_PHASED), "--ref", str(PANEL), "--out", str(out)], ok=False)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("genimpute: error: No space left on device: ") and str(out) in lines[0]
    assert list(out.parent.iterdir()) == []


def test_the_index_written_with_the_file_finds_what_tabix_own_index_finds(tmp_path):
    import shutil

    import pysam

    rng = np.random.default_rng(4)
    out = tmp_path / "out.vcf.gz"
    expected = []
    with VcfWriter(out) as writer:
        writer.write_header(SAMPLES, ["20", "21"], {})
        for contig, n in (("20", 3000), ("21", 500)):
            positions = np.sort(rng.choice(np.arange(1, 3_000_000), n, replace=False))
            refs = ["A" * int(k) for k in rng.choice([1, 1, 1, 40_000], n)]  # a few span 16 kb windows
            for cut in np.split(np.arange(n), np.sort(rng.choice(np.arange(1, n), 25, replace=False))):
                fixed = [[contig, str(positions[i]), ".", refs[i], "G"] for i in cut]
                p = rng.random((len(cut), len(SAMPLES)))
                writer.write_records(fixed, ["."] * len(cut), "GT:DS:GP", genotype_columns(p, p))
                expected += [(contig, int(positions[i]), len(refs[i])) for i in cut]
    theirs = tmp_path / "theirs.vcf.gz"
    shutil.copy(out, theirs)
    pysam.tabix_index(str(theirs), preset="vcf", force=True)
    ours_file, theirs_file = pysam.TabixFile(str(out)), pysam.TabixFile(str(theirs))
    assert list(ours_file.contigs) == ["20", "21"]
    for _ in range(200):
        contig = str(rng.choice(["20", "21"]))
        start = int(rng.integers(0, 3_000_000))
        stop = start + int(rng.choice([1, 100, 20_000, 400_000]))
        ours = list(ours_file.fetch(contig, start, stop))
        want = [(c, p) for c, p, length in expected if c == contig and p - 1 < stop and p - 1 + length > start]
        assert [(r.split("\t")[0], int(r.split("\t")[1])) for r in ours] == want
        assert ours == list(theirs_file.fetch(contig, start, stop))


def test_bgzf_level_changes_the_size_not_the_content(tmp_path):
    import gzip

    from genimpute.io.bgzf import BgzfWriter

    rng = np.random.default_rng(5)
    data = b"\t".join(b"0|1" if rng.random() < 0.03 else b"0|0" for _ in range(400_000))
    sizes = {}
    for level in (1, 9):
        writer = BgzfWriter(tmp_path / f"{level}.gz", level=level)
        writer.write(data)
        writer.close()
        raw = (tmp_path / f"{level}.gz").read_bytes()
        assert gzip.decompress(raw) == data
        sizes[level] = len(raw)
    assert sizes[9] < sizes[1]


def test_the_writers_compression_pools_take_no_more_than_threads(tmp_path, monkeypatch):
    from genimpute import runtime
    from genimpute.io.bgzf import BgzfWriter
    from genimpute.io.spool import ColumnSpool

    monkeypatch.setattr(runtime, "_thread_limit", 1)  # as --threads 1 sets it
    writer = BgzfWriter(tmp_path / "x.gz")
    writer.close()
    with ColumnSpool(tmp_path) as spool:
        assert writer.threads == 1 and spool.pool._max_workers == 1
