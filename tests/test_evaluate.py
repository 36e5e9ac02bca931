"""Accuracy evaluation (genimpute.evaluation) against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from paths import DATA, TARGET_TRUTH
from tools import run_tool

from genimpute.errors import InputError
from genimpute.evaluation import ALL, BIN_LABELS, evaluate, maf_bin, side_by_side
from genimpute.metrics import pooled_r2, r2_from_sums
from genimpute.panel import convert_to_compact

HEADER_META = [
    "##fileformat=VCFv4.2",
    '##INFO=<ID=IMP,Number=0,Type=Flag,Description="Imputed marker">',
    '##INFO=<ID=IMPUTED,Number=0,Type=Flag,Description="Minimac4 imputed marker">',
    '##INFO=<ID=TYPED,Number=0,Type=Flag,Description="Minimac4 typed marker">',
    '##INFO=<ID=AF,Number=A,Type=Float,Description="Estimated ALT allele frequency">',
    '##INFO=<ID=DR2,Number=A,Type=Float,Description="Dosage r2 (genimpute, Beagle)">',
    '##INFO=<ID=R2,Number=1,Type=Float,Description="Estimated r2 (Minimac4)">',
    '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
    '##FORMAT=<ID=DS,Number=A,Type=Float,Description="Dosage">',
]

# Bin labels, spelled out so a change in the binning scheme is noticed.
B0, B1, B2, B3, B4, B5, B6 = BIN_LABELS
assert BIN_LABELS == ["[0, 0.001)", "[0.001, 0.005)", "[0.005, 0.01)", "[0.01, 0.05)",
                      "[0.05, 0.1)", "[0.1, 0.2)", "[0.2, 0.5]"]


def write_vcf(path: Path, samples: list, records: list, contig: str = "20") -> Path:
    """records: (pos, ref, alt, info, format, [one field per sample])."""
    lines = list(HEADER_META)
    lines.append(f"##contig=<ID={contig}>")
    lines.append("\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *samples]))
    for pos, ref, alt, info, fmt, fields in records:
        assert len(fields) == len(samples)
        lines.append("\t".join([contig, str(pos), ".", ref, alt, ".", "PASS", info, fmt, *fields]))
    path.write_text("\n".join(lines) + "\n")
    return path


GT_OF_COUNT = {0: "0|0", 1: "0|1", 2: "1|1"}


def truth_file(path: Path, samples: list, rows: list, contig: str = "20") -> Path:
    """rows: (pos, ref, alt, [alt allele count per sample])."""
    return write_vcf(path, samples, [(pos, ref, alt, ".", "GT", [GT_OF_COUNT[c] for c in counts])
                                     for pos, ref, alt, counts in rows], contig)


def row(table: pd.DataFrame, bin_label: str, tool: str | None = None) -> pd.Series:
    sel = table[table["maf_bin"] == bin_label]
    if tool is not None:
        sel = sel[sel["tool"] == tool]
    assert len(sel) == 1, sel
    return sel.iloc[0]


# ---------------------------------------------------------------------------
# Hand-checked example
#
# Truth, samples S1..S4 (alt allele counts):
#   V1 pos 100: 0 0 0 1  -> AF 1/8 = 0.125 -> bin [0.1, 0.2)
#   V2 pos 200: 0 1 1 2  -> AF 4/8 = 0.5   -> bin [0.2, 0.5]
#   V3 pos 300: 0 1 2 0  -> AF 3/8 = 0.375 -> bin [0.2, 0.5]
# Imputed (GT best guess / DS):
#   V1: 0|0 0, 0|0 0, 0|1 0.5, 0|1 1   best guess 0 0 1 1  (3 of 4 concordant)
#   V2: 0|0 0, 0|1 1, 0|1 1,   1|1 2   best guess 0 1 1 2  (4 of 4 concordant)
#   V3: 0|0 0, 0|1 1, 0|1 1,   0|0 0   best guess 0 1 1 0  (3 of 4 concordant)
#
# Per-variant r2:
#   V1: x = 0 0 .5 1 (mean .375), y = 0 0 0 1 (mean .25)
#       Sxy = .09375+.09375-.03125+.46875 = .625
#       Sxx = .140625+.140625+.015625+.390625 = .6875 ; Syy = .0625*3+.5625 = .75
#       r2 = .390625 / (.6875*.75) = (25/64)/(33/64) = 25/33
#   V2: x == y -> 1
#   V3: x = 0 1 1 0 (mean .5), y = 0 1 2 0 (mean .75)
#       Sxy = .375+.125+.625+.375 = 1.5 ; Sxx = 1 ; Syy = .5625+.0625+1.5625+.5625 = 2.75
#       r2 = 2.25/2.75 = 9/11
# Pooled, bin [0.2, 0.5] (V2 + V3, n = 8):
#   sum x = 6, sum y = 7, sum x^2 = 8, sum y^2 = 11, sum xy = 9
#   cov = 9 - 6*7/8 = 3.75 ; vx = 8 - 36/8 = 3.5 ; vy = 11 - 49/8 = 4.875
#   r2 = 14.0625 / 17.0625 = 225/273 = 75/91
# Pooled, all (V1 + V2 + V3, n = 12):
#   sum x = 1.5+6 = 7.5, sum y = 1+7 = 8, sum x^2 = 1.25+8 = 9.25,
#   sum y^2 = 1+11 = 12, sum xy = 1+9 = 10
#   cov = 10 - 7.5*8/12 = 5 ; vx = 9.25 - 56.25/12 = 4.5625 ; vy = 12 - 64/12 = 20/3
#   r2 = 25 / (4.5625*20/3) = 75/91.25 = 60/73
# Mean per-variant r2: bin [0.1,0.2): 25/33 ; bin [0.2,0.5]: (1 + 9/11)/2 = 10/11 ;
#   all: (25/33 + 33/33 + 27/33)/3 = 85/99
# Concordance: 3/4 ; 7/8 ; 10/12 = 5/6
# ---------------------------------------------------------------------------

SAMPLES = ["S1", "S2", "S3", "S4"]
TRUTH_ROWS = [
    (100, "A", "G", [0, 0, 0, 1]),
    (200, "C", "T", [0, 1, 1, 2]),
    (300, "G", "A", [0, 1, 2, 0]),
]
IMPUTED_BY_SAMPLE = {  # pos -> {sample: "GT:DS"}
    100: {"S1": "0|0:0", "S2": "0|0:0", "S3": "0|1:0.5", "S4": "0|1:1"},
    200: {"S1": "0|0:0", "S2": "0|1:1", "S3": "0|1:1", "S4": "1|1:2"},
    300: {"S1": "0|0:0", "S2": "0|1:1", "S3": "0|1:1", "S4": "0|0:0"},
}
REFALT = {100: ("A", "G"), 200: ("C", "T"), 300: ("G", "A")}


@pytest.fixture
def truth(tmp_path) -> Path:
    return truth_file(tmp_path / "truth.vcf", SAMPLES, TRUTH_ROWS)


def hand_imputed(path: Path, flag: str = "IMP", order=("S3", "S1", "EXTRA", "S4", "S2"), info: dict | None = None) -> Path:
    """The hand example, with sample columns shuffled, an extra sample absent
    from the truth, a typed (unflagged) record with wrong dosages and an
    imputed record absent from the truth: none of these may change a score.
    info: {pos: extra INFO fields} for V1..V3."""
    def fields(by_sample):
        return [by_sample.get(s, "1|1:2") for s in order]

    records = [(150, "T", "C", ".", "GT:DS", fields({"S1": "1|1:2", "S2": "1|1:2", "S3": "0|0:0", "S4": "0|0:0"}))]
    for pos in (100, 200, 300):
        ref, alt = REFALT[pos]
        extra = (info or {}).get(pos)
        records.append((pos, ref, alt, f"{flag};{extra}" if extra else flag, "GT:DS", fields(IMPUTED_BY_SAMPLE[pos])))
    records.append((400, "A", "C", flag, "GT:DS", fields({"S1": "1|1:2", "S2": "0|0:0", "S3": "1|1:2", "S4": "0|0:0"})))
    return write_vcf(path, list(order), sorted(records))


EXPECTED = {  # bin: (variants, aggregate r2, mean variant r2, concordance)
    B5: (1, 25 / 33, 25 / 33, 3 / 4),
    B6: (2, 75 / 91, 10 / 11, 7 / 8),
    ALL: (3, 60 / 73, 85 / 99, 5 / 6),
}


def check_expected(table: pd.DataFrame, tool: str | None = None) -> None:
    for bin_label in [*BIN_LABELS, ALL]:
        r = row(table, bin_label, tool)
        if bin_label in EXPECTED:
            n, agg, mean, conc = EXPECTED[bin_label]
            assert r["variants"] == n, bin_label
            assert r["aggregate_r2"] == pytest.approx(agg, abs=1e-9), bin_label
            assert r["mean_variant_r2"] == pytest.approx(mean, abs=1e-9), bin_label
            assert r["concordance"] == pytest.approx(conc, abs=1e-9), bin_label
        else:
            assert r["variants"] == 0, bin_label
            assert math.isnan(r["aggregate_r2"]), bin_label
            assert math.isnan(r["mean_variant_r2"]), bin_label
            assert math.isnan(r["concordance"]), bin_label


def test_hand_checked_example(tmp_path, truth):
    imputed = hand_imputed(tmp_path / "imputed.vcf")
    table = evaluate(truth, [imputed], labels=["genimpute"]).accuracy
    assert list(table.columns) == ["tool", "population", "maf_bin", "variants", "aggregate_r2", "mean_variant_r2",
                                   "concordance", "nonref_discordance"]
    assert list(table["tool"]) == ["genimpute"] * (len(BIN_LABELS) + 1)
    assert list(table["maf_bin"]) == [*BIN_LABELS, ALL]
    check_expected(table)


def test_default_label_is_file_name(tmp_path, truth):
    imputed = hand_imputed(tmp_path / "imputed.vcf")
    table = evaluate(truth, [imputed]).accuracy
    assert set(table["tool"]) == {"imputed.vcf"}


def test_maf_bin_boundaries():
    got = maf_bin(np.array([0.0, 0.001, 0.5, 0.0049, 0.00099, 0.005, 0.1999, 0.2, 0.3]))
    assert got.tolist() == [0, 1, 6, 1, 0, 2, 5, 6, 6]
    assert BIN_LABELS[got[0]] == "[0, 0.001)"
    assert BIN_LABELS[got[1]] == "[0.001, 0.005)"
    assert BIN_LABELS[got[2]] == "[0.2, 0.5]"
    # a panel's frequencies are float32, in which no edge but 0.5 is exact (13 / 2,600 is 0.00499999988)
    edges = np.array([0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5])
    assert maf_bin(edges.astype(np.float32)).tolist() == maf_bin(edges).tolist() == [1, 2, 3, 4, 5, 6, 6]
    assert maf_bin(np.array([13 / 2600], np.float32)).tolist() == [2]


def test_unflagged_records_are_not_scored(tmp_path, truth):
    # Same genotypes as the hand example but no IMP flag anywhere: typed
    # records only, so nothing is scored.
    plain = hand_imputed(tmp_path / "typed.vcf", flag=".")
    with pytest.raises(InputError, match="imputed records"):
        evaluate(truth, [plain])


def test_unflagged_record_excluded_from_scores(tmp_path, truth):
    # Only V2 flagged: V1 and V3 present with dosages but not flagged IMP.
    recs = []
    for pos in (100, 200, 300):
        ref, alt = REFALT[pos]
        recs.append((pos, ref, alt, "IMP" if pos == 200 else ".", "GT:DS",
                     [IMPUTED_BY_SAMPLE[pos][s] for s in SAMPLES]))
    imputed = write_vcf(tmp_path / "imputed.vcf", SAMPLES, recs)
    table = evaluate(truth, [imputed]).accuracy
    assert row(table, ALL)["variants"] == 1
    assert row(table, B5)["variants"] == 0
    assert row(table, B6)["variants"] == 1
    assert row(table, ALL)["aggregate_r2"] == pytest.approx(1.0)
    assert row(table, ALL)["concordance"] == pytest.approx(1.0)


def test_minimac4_imputed_flag_is_scored(tmp_path, truth):
    # Minimac4 marks imputed records IMPUTED and typed ones TYPED.
    imputed = hand_imputed(tmp_path / "minimac.vcf", flag="IMPUTED")
    text = imputed.read_text().replace("\t.\tGT:DS", "\tTYPED\tGT:DS")
    imputed.write_text(text)
    table = evaluate(truth, [imputed], labels=["minimac4"]).accuracy
    check_expected(table, "minimac4")


def test_gt_only_file_uses_allele_counts_as_dosage(tmp_path, truth):
    # No DS in the header or records: dosage = GT alt allele count.
    # V1 best guess x = 0 0 1 1 (mean .5), truth y = 0 0 0 1 (mean .25)
    #   Sxy = .125+.125-.125+.375 = .5 ; Sxx = 1 ; Syy = .75 -> r2 = .25/.75 = 1/3
    # V3 best guess x = 0 1 1 0, truth 0 1 2 0 -> 9/11 (as in the hand example)
    # Pooled over V1 + V3 (n = 8): sum x = 4, sum y = 4, sum x^2 = 4, sum y^2 = 6, sum xy = 4
    #   cov = 4 - 16/8 = 2 ; vx = 4 - 2 = 2 ; vy = 6 - 2 = 4 -> r2 = 4/8 = 0.5
    path = tmp_path / "gt_only.vcf"
    header = [line for line in HEADER_META if "ID=DS" not in line]
    lines = [*header, "##contig=<ID=20>",
             "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *SAMPLES]),
             "\t".join(["20", "100", ".", "A", "G", ".", "PASS", "IMP", "GT", "0|0", "0|0", "0|1", "0|1"]),
             "\t".join(["20", "300", ".", "G", "A", ".", "PASS", "IMP", "GT", "0|0", "1|0", "0|1", "0|0"])]
    path.write_text("\n".join(lines) + "\n")
    table = evaluate(truth, [path]).accuracy
    assert row(table, B5)["aggregate_r2"] == pytest.approx(1 / 3)
    assert row(table, B6)["aggregate_r2"] == pytest.approx(9 / 11)
    assert row(table, ALL)["variants"] == 2
    assert row(table, ALL)["aggregate_r2"] == pytest.approx(0.5)
    assert row(table, ALL)["mean_variant_r2"] == pytest.approx((1 / 3 + 9 / 11) / 2)
    # best guess is the dosage, so V1 3/4 and V3 3/4 concordant
    assert row(table, ALL)["concordance"] == pytest.approx(6 / 8)


def test_panel_maf_binning_differs_from_truth_maf(tmp_path, truth):
    # Panel of 6 samples (12 haplotypes), contig named chr20 (matched to 20):
    #   V1 (truth AF .125 -> [0.1, 0.2)): all ref in the panel, MAF 0 -> [0, 0.001)
    #   V2 (truth AF .5 -> [0.2, 0.5]): 10 of 12 alt, MAF 2/12 = 0.167 -> [0.1, 0.2)
    #   V3: absent from the panel -> falls back to truth MAF .375 -> [0.2, 0.5]
    panel = write_vcf(tmp_path / "panel.vcf", ["P1", "P2", "P3", "P4", "P5", "P6"], [
        (100, "A", "G", ".", "GT", ["0|0"] * 6),
        (200, "C", "T", ".", "GT", ["1|1", "1|1", "0|1", "1|1", "1|0", "1|1"]),
    ], contig="chr20")
    imputed = hand_imputed(tmp_path / "imputed.vcf")

    by_truth = evaluate(truth, [imputed]).accuracy
    assert row(by_truth, B0)["variants"] == 0
    assert row(by_truth, B5)["variants"] == 1
    assert row(by_truth, B6)["variants"] == 2

    by_panel = evaluate(truth, [imputed], ref=panel).accuracy
    compact = tmp_path / "panel.gpanel"
    convert_to_compact(panel, compact)
    pd.testing.assert_frame_equal(evaluate(truth, [imputed], ref=compact).accuracy, by_panel)
    assert row(by_panel, B0)["variants"] == 1
    assert row(by_panel, B5)["variants"] == 1
    assert row(by_panel, B6)["variants"] == 1
    # V1 alone in [0, 0.001): 25/33 ; V2 alone in [0.1, 0.2): perfect ; V3 alone: 9/11
    assert row(by_panel, B0)["aggregate_r2"] == pytest.approx(25 / 33)
    assert row(by_panel, B5)["aggregate_r2"] == pytest.approx(1.0)
    assert row(by_panel, B6)["aggregate_r2"] == pytest.approx(9 / 11)
    # the "all" row does not depend on the binning
    assert row(by_panel, ALL)["aggregate_r2"] == pytest.approx(60 / 73)


def test_panel_maf_splits_a_vcfs_multiallelic_records_and_reads_an_unphased_one_with_htslib(tmp_path, caplog):
    from genimpute.evaluation import panel_maf

    records = [(100, "A", "G", ".", "GT", ["0|0", "0|1", "1|1", "0|0"]),  # 3 of 8 alt
               (200, "C", "T,G", ".", "GT", ["0|1", "2|2", "0|0", "0|0"])]  # T 1 of 8, G 2 of 8
    split = panel_maf(write_vcf(tmp_path / "phased.vcf", ["P1", "P2", "P3", "P4"], records))
    assert split == {("20", 100, "A", "G"): pytest.approx(3 / 8), ("20", 200, "C", "T"): pytest.approx(1 / 8),
                     ("20", 200, "C", "G"): pytest.approx(2 / 8)}
    unphased = [(pos, ref, alt, info, fmt, [gt.replace("|", "/") for gt in gts])
                for pos, ref, alt, info, fmt, gts in records]
    with caplog.at_level("WARNING", logger="genimpute.evaluation"):
        by_record = panel_maf(write_vcf(tmp_path / "unphased.vcf", ["P1", "P2", "P3", "P4"], unphased))
    assert "read with htslib" in caplog.text
    assert by_record == {("20", 100, "A", "G"): pytest.approx(3 / 8)}  # multi-allelic records left out


def test_no_shared_samples(tmp_path, truth):
    imputed = write_vcf(tmp_path / "other.vcf", ["X1", "X2"], [(100, "A", "G", "IMP", "GT:DS", ["0|0:0", "0|1:1"])])
    with pytest.raises(InputError, match="shared"):
        evaluate(truth, [imputed])


def test_no_imputed_records_in_truth(tmp_path, truth):
    # Flagged IMP but at sites (or alleles) the truth does not have.
    imputed = write_vcf(tmp_path / "elsewhere.vcf", SAMPLES, [
        (100, "A", "T", "IMP", "GT:DS", ["0|0:0"] * 4),  # same position, other ALT
        (500, "A", "G", "IMP", "GT:DS", ["0|1:1"] * 4),
    ])
    with pytest.raises(InputError, match="present in the truth"):
        evaluate(truth, [imputed])


def test_label_count_mismatch(tmp_path, truth):
    imputed = hand_imputed(tmp_path / "imputed.vcf")
    with pytest.raises(InputError, match="one label per imputed file"):
        evaluate(truth, [imputed], labels=["a", "b"])
    with pytest.raises(InputError, match="one label per imputed file"):
        evaluate(truth, [imputed, imputed], labels=["a"])


def test_side_by_side(tmp_path, truth):
    good = hand_imputed(tmp_path / "good.vcf")
    # Second tool: perfect dosages on V1..V3.
    perfect = write_vcf(tmp_path / "perfect.vcf", SAMPLES, [
        (pos, ref, alt, "IMP", "GT:DS", [f"{GT_OF_COUNT[c]}:{c}" for c in counts])
        for pos, ref, alt, counts in TRUTH_ROWS
    ])
    table = evaluate(truth, [good, perfect], labels=["zeta", "alpha"]).accuracy
    wide = side_by_side(table)
    assert list(wide.index) == [*BIN_LABELS, ALL]
    assert list(wide.columns) == ["variants", "zeta", "alpha"]  # tool order as given, not sorted
    assert wide.loc[B5, "zeta"] == pytest.approx(25 / 33)
    assert wide.loc[B6, "zeta"] == pytest.approx(75 / 91)
    assert wide.loc[ALL, "zeta"] == pytest.approx(60 / 73)
    assert wide.loc[B5, "alpha"] == pytest.approx(1.0)
    assert wide.loc[B6, "alpha"] == pytest.approx(1.0)
    assert wide.loc[ALL, "alpha"] == pytest.approx(1.0)
    assert wide["variants"].tolist() == [0, 0, 0, 0, 0, 1, 2, 3]
    assert wide.loc[B0, ["zeta", "alpha"]].isna().all()


def test_perfect_imputation_on_real_slice(tmp_path, data):
    """Imputed = truth GT with DS = alt allele count and IMP on every record."""
    import cyvcf2

    truth_path = data / "targets.truth.vcf.gz"
    src = cyvcf2.VCF(str(truth_path))
    src.add_info_to_header({"ID": "IMP", "Number": "0", "Type": "Flag", "Description": "Imputed marker"})
    src.add_format_to_header({"ID": "DS", "Number": "A", "Type": "Float", "Description": "Dosage"})
    out_path = tmp_path / "perfect.vcf.gz"
    out = cyvcf2.Writer(str(out_path), src, mode="wz")
    n = 0
    for rec in src:
        rec.INFO["IMP"] = True
        gts = rec.genotype.array()[:, :2]
        rec.set_format("DS", (gts > 0).sum(axis=1).astype(np.float32).reshape(-1, 1))
        out.write_record(rec)
        n += 1
    out.close()
    src.close()
    assert n > 1000

    # the file really has IMP and DS where expected
    check = cyvcf2.VCF(str(out_path))
    first = next(iter(check))
    assert first.INFO.get("IMP") is True
    assert first.format("DS")[:, 0].tolist() == [1, 1, 1, 0, 2, 0, 0, 1, 1, 1]
    check.close()

    table = evaluate(truth_path, [out_path], labels=["perfect"]).accuracy
    all_row = row(table, ALL)
    assert all_row["variants"] == n
    assert all_row["aggregate_r2"] == pytest.approx(1.0, abs=1e-12)
    assert all_row["mean_variant_r2"] == pytest.approx(1.0, abs=1e-12)
    assert all_row["concordance"] == 1.0
    scored_bins = table[(table["maf_bin"] != ALL) & (table["variants"] > 0)]
    assert scored_bins["variants"].sum() == n
    # every bin with polymorphic variants is perfect too
    finite = scored_bins["aggregate_r2"].dropna()
    assert len(finite) >= 2
    assert np.allclose(finite, 1.0)


def test_maf_bin_does_not_depend_on_which_allele_is_alt():
    for af in (0.1, 0.2, 0.01, 0.005):
        assert maf_bin(np.array([min(af, 1 - af)]))[0] == maf_bin(np.array([min(1 - af, af)]))[0]
        assert maf_bin(np.array([1 - (1 - af)]))[0] == maf_bin(np.array([af]))[0]


def test_duplicate_labels_are_an_input_error(tmp_path):
    truth = tmp_path / "truth.vcf"
    imputed = tmp_path / "imp.vcf"
    truth.write_text(_HEADER_FOR_DUPLICATES + "20\t100\t.\tA\tG\t.\t.\t.\tGT\t0|1\t0|0\n")
    imputed.write_text(_HEADER_FOR_DUPLICATES + "20\t100\t.\tA\tG\t.\t.\tIMP\tGT:DS\t0|1:0.9\t0|0:0.1\n")
    with pytest.raises(InputError, match="distinct labels"):
        evaluate(str(truth), [str(imputed), str(imputed)])


_HEADER_FOR_DUPLICATES = (
    '##fileformat=VCFv4.2\n##INFO=<ID=IMP,Number=0,Type=Flag,Description="x">\n'
    '##FORMAT=<ID=GT,Number=1,Type=String,Description="x">\n##FORMAT=<ID=DS,Number=A,Type=Float,Description="x">\n'
    "##contig=<ID=20>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\tS2\n"
)


def test_side_by_side_shows_per_tool_counts_when_they_differ():
    table = pd.DataFrame([
        {"tool": "a", "population": "all", "maf_bin": ALL, "variants": 10, "aggregate_r2": 0.9},
        {"tool": "b", "population": "all", "maf_bin": ALL, "variants": 8, "aggregate_r2": 0.8},
    ])
    wide = side_by_side(table)
    assert list(wide.columns) == ["variants a", "variants b", "a", "b"]
    assert wide.loc[ALL, "variants b"] == 8


# ---------------------------------------------------------------------------
# Non-reference discordance, populations, calibration, MAF from INFO/AF; all
# on the hand example above.
#
# NRD = discordant / genotypes where truth or best guess carries an alt allele:
#   V1 truth 0 0 0 1, best guess 0 0 1 1: non-ref S3 S4, discordant S3 -> 1/2
#   V2 truth 0 1 1 2, best guess 0 1 1 2: non-ref S2 S3 S4, none discordant -> 0/3
#   V3 truth 0 1 2 0, best guess 0 1 1 0: non-ref S2 S3, discordant S3 -> 1/2
#   bin [0.1, 0.2) = 1/2 ; bin [0.2, 0.5] = 1/5 ; all = 2/7
# ---------------------------------------------------------------------------


def test_nonref_discordance(tmp_path, truth):
    table = evaluate(truth, [hand_imputed(tmp_path / "imputed.vcf")]).accuracy
    assert row(table, B5)["nonref_discordance"] == pytest.approx(1 / 2)
    assert row(table, B6)["nonref_discordance"] == pytest.approx(1 / 5)
    assert row(table, ALL)["nonref_discordance"] == pytest.approx(2 / 7)
    assert math.isnan(row(table, B0)["nonref_discordance"])


# Populations: P1 = S1 S2, P2 = S3 S4 (EXTRA, absent from the truth, is ignored).
#   P1, all imputed: dosage equals truth everywhere (V1 0 0 / 0 0, V2 0 1, V3 0 1) -> r2 1;
#     per-variant r2: V1 undefined (truth constant), V2 1, V3 1 -> mean 1; concordance 6/6
#   P2, all imputed: x = .5 1 | 1 2 | 1 0, y = 0 1 | 1 2 | 2 0 (n = 6)
#     sum x 5.5, sum y 6, sum x^2 7.25, sum y^2 10, sum xy 8
#     cov = 8 - 5.5 = 2.5 ; vx = 7.25 - 30.25/6 = 53/24 ; vy = 10 - 6 = 4
#     r2 = 6.25 / (53/6) = 75/106 ; per-variant r2 1, 1, 1 (two points each) ; concordance: S3 wrong at V1, V3 -> 4/6


def test_scores_by_population(tmp_path, truth):
    samples = tmp_path / "samples.tsv"
    samples.write_text("sample\tpopulation\tsex\nS1\tP1\tf\nS2\tP1\tm\nS3\tP2\tf\nS4\tP2\tm\nEXTRA\tP3\tf\n")
    table = evaluate(truth, [hand_imputed(tmp_path / "imputed.vcf")], samples=samples).accuracy
    assert list(dict.fromkeys(table["population"])) == ["all", "P1", "P2"]  # P3 has no truth sample

    def pick(population):
        return row(table[table["population"] == population], ALL)

    check_expected(table[table["population"] == "all"])  # everyone: as without the table
    assert pick("P1")["aggregate_r2"] == pytest.approx(1.0)
    assert pick("P1")["mean_variant_r2"] == pytest.approx(1.0)
    assert pick("P1")["concordance"] == pytest.approx(1.0)
    assert pick("P2")["aggregate_r2"] == pytest.approx(75 / 106)
    assert pick("P2")["mean_variant_r2"] == pytest.approx(1.0)
    assert pick("P2")["concordance"] == pytest.approx(4 / 6)


def test_samples_table_needs_sample_and_population_columns(tmp_path, truth):
    samples = tmp_path / "samples.tsv"
    samples.write_text("id\tpop\nS1\tP1\n")
    with pytest.raises(InputError, match="'sample' and 'population'"):
        evaluate(truth, [hand_imputed(tmp_path / "imputed.vcf")], samples=samples)


def test_samples_table_sharing_no_sample_with_truth(tmp_path, truth):
    samples = tmp_path / "samples.tsv"
    samples.write_text("sample\tpopulation\nX1\tP1\n")
    with pytest.raises(InputError, match="found none"):
        evaluate(truth, [hand_imputed(tmp_path / "imputed.vcf")], samples=samples)


# Calibration: true per-variant r2 V1 25/33, V2 1, V3 9/11 (see above).
#   estimates 0.05, 0.95, 0.85 fall in bins [0.0, 0.1), [0.9, 1.0], [0.8, 0.9).


@pytest.mark.parametrize("field", ["DR2", "R2"])
def test_calibration_pairs_estimate_with_true_r2(tmp_path, truth, field):
    estimates = {100: 0.05, 200: 0.95, 300: 0.85}
    imputed = hand_imputed(tmp_path / "imputed.vcf", info={p: f"{field}={e}" for p, e in estimates.items()})
    cal = evaluate(truth, [imputed], labels=["tool"]).calibration.set_index("estimated_bin")
    assert set(cal["field"]) == {field} and set(cal["tool"]) == {"tool"}
    assert cal["variants"].sum() == 3
    for label, est, true in [("[0.0, 0.1)", 0.05, 25 / 33), ("[0.9, 1.0]", 0.95, 1.0), ("[0.8, 0.9)", 0.85, 9 / 11)]:
        assert cal.loc[label, "variants"] == 1
        assert cal.loc[label, "mean_estimated_r2"] == pytest.approx(est)
        assert cal.loc[label, "mean_true_r2"] == pytest.approx(true)
    assert math.isnan(cal.loc["[0.5, 0.6)", "mean_true_r2"])


def test_quality_error_by_maf_bin(tmp_path, truth):
    # V1 (MAF 0.125, bin [0.1, 0.2)): 0.05 against 25/33; V2 and V3 ([0.2, 0.5]): 0.95 against 1, 0.85 against 9/11
    estimates, true = np.array([0.05, 0.95, 0.85]), np.array([25 / 33, 1.0, 9 / 11])
    imputed = hand_imputed(tmp_path / "imputed.vcf", info={100: "DR2=0.05", 200: "DR2=0.95", 300: "DR2=0.85"})
    quality = evaluate(truth, [imputed], labels=["tool"]).quality.set_index("maf_bin")
    assert set(quality["field"]) == {"DR2"} and set(quality["tool"]) == {"tool"}
    for label, chosen in [(B5, [0]), (B6, [1, 2]), (ALL, [0, 1, 2])]:
        error = estimates[chosen] - true[chosen]
        assert quality.loc[label, "variants"] == len(chosen)
        assert quality.loc[label, "mean_estimated_r2"] == pytest.approx(estimates[chosen].mean())
        assert quality.loc[label, "mean_true_r2"] == pytest.approx(true[chosen].mean())
        assert quality.loc[label, "mean_error"] == pytest.approx(error.mean())
        assert quality.loc[label, "mean_absolute_error"] == pytest.approx(np.abs(error).mean())
    assert quality.loc[ALL, "mean_error"] < 0  # V1's estimate far below its r2
    assert quality.loc[ALL, "correlation"] == pytest.approx(np.corrcoef(estimates, true)[0, 1])
    assert quality.loc[B6, "correlation"] == pytest.approx(1.0)  # two variants, ranked alike
    assert math.isnan(quality.loc[B5, "correlation"])  # one variant: undefined
    assert quality.loc[B0, "variants"] == 0 and math.isnan(quality.loc[B0, "mean_error"])


def test_no_calibration_without_a_quality_field(tmp_path, truth):
    result = evaluate(truth, [hand_imputed(tmp_path / "imputed.vcf")])
    assert result.calibration.empty and result.quality.empty


def test_maf_bins_from_the_first_files_info_af(tmp_path, truth):
    # INFO/AF puts V1 (truth MAF 0.125) in [0.2, 0.5] and V2 (0.5) in [0.05, 0.1);
    # the second file has no AF and is binned by the first file's.
    first = hand_imputed(tmp_path / "first.vcf", info={100: "AF=0.7", 200: "AF=0.08", 300: "AF=0.375"})
    second = hand_imputed(tmp_path / "second.vcf")
    result = evaluate(truth, [first, second], labels=["first", "second"])
    assert result.maf_source == "INFO/AF of the first imputed file"
    for tool in ("first", "second"):
        assert row(result.accuracy, B4, tool)["variants"] == 1
        assert row(result.accuracy, B5, tool)["variants"] == 0
        assert row(result.accuracy, B6, tool)["variants"] == 2
    assert evaluate(truth, [second, first], labels=["second", "first"]).maf_source == "truth genotypes"


# ---------------------------------------------------------------------------
# Beagle 5.4 and Minimac4 outputs as they come (tests/data/make_slices.sh)
# ---------------------------------------------------------------------------


def _query(path, include, fmt):
    out = run_tool(["bcftools", "query", "-i", include, "-f", fmt, str(path)],
                         check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def _independent_aggregate_r2(imputed, include):
    """(variants, variants whose truth varies, pooled r2 of DS against the
    truth's allele counts), from bcftools output."""
    ds = {tuple(f[:4]): np.array(f[4:-1] if f[-1] == "" else f[4:], float)
          for f in _query(imputed, include, "%CHROM\t%POS\t%REF\t%ALT[\t%DS]\n")}
    truth = {tuple(f[:4]): np.array([g.count("1") for g in f[4:]], float)
             for f in _query(TARGET_TRUTH, "1=1", "%CHROM\t%POS\t%REF\t%ALT[\t%GT]\n")}
    shared = [k for k in ds if k in truth]
    x = np.concatenate([ds[k] for k in shared])
    y = np.concatenate([truth[k] for k in shared])
    varying = sum(truth[k].std() > 0 for k in shared)
    return len(shared), varying, np.corrcoef(x, y)[0, 1] ** 2


@pytest.mark.parametrize(("name", "include", "field"), [
    ("beagle.imputed.vcf.gz", "INFO/IMP=1", "DR2"),
    ("minimac4.imputed.vcf.gz", "INFO/IMPUTED=1 && INFO/TYPED=0", "R2"),
])
def test_real_tool_outputs_are_read_as_they_come(name, include, field):
    # The same target samples in the same order in both files, so column order lines up.
    n, varying, r2 = _independent_aggregate_r2(DATA / name, include)
    result = evaluate(TARGET_TRUTH, [DATA / name], labels=["tool"])
    assert row(result.accuracy, ALL)["variants"] == n
    assert row(result.accuracy, ALL)["aggregate_r2"] == pytest.approx(r2, abs=1e-6)
    assert r2 > 0.9
    assert set(result.calibration["field"]) == {field}
    assert result.calibration["variants"].sum() == varying  # true r2 is undefined where the truth does not vary


def test_r2_from_cells_and_from_sums_agree_where_both_vary():
    rng = np.random.default_rng(0)
    dosage, truth = rng.random((50, 6)) * 2, rng.integers(0, 3, (50, 6)).astype(float)
    sums = np.array([dosage.size, dosage.sum(), truth.sum(), (dosage * dosage).sum(), (truth * truth).sum(),
                     (dosage * truth).sum()])
    assert pooled_r2(dosage, truth) == pytest.approx(float(r2_from_sums(sums)), rel=1e-9)
    assert pooled_r2(dosage.astype(np.float32), truth.astype(np.int8)) == pytest.approx(pooled_r2(dosage, truth), rel=1e-6)
    # a constant dosage: undefined from the cells, 0 from the sums (the truth varies)
    assert math.isnan(pooled_r2(np.ones(5), np.arange(5.0)))
    assert r2_from_sums(np.array([5, 5, 10, 5, 30, 10.0])) == 0
    assert math.isnan(pooled_r2(np.arange(5.0), np.ones(5)))
