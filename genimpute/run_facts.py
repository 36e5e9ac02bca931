"""What a run's QC report says, as tables: the harmonisation decisions by
contig, the target's allele frequencies against the panel's at the typed
sites (with the chi-square test the Michigan Imputation Server flags
outliers by), each sample's call rate and heterozygosity, and the imputed
records' DR2 by MAF bin. Pure functions of the run's arrays."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from genimpute.evaluation import BIN_LABELS, maf_bin
from genimpute.harmonise import USED

CHI2_OUTLIER = 300.0  # the Michigan Imputation Server's threshold for an allele-frequency mismatch
DR2_KEPT = (0.3, 0.8)  # the filters users apply most
_ROWS_PER_BLOCK = 4096  # typed records scanned at once for the sample statistics


def decision_table(decisions: list, target_contigs: list) -> pd.DataFrame:
    """One row per target contig: how many records took each decision."""
    counts: dict = {}
    for d in decisions:
        counts.setdefault(target_contigs[d.target_row], Counter())[d.decision] += 1
    table = pd.DataFrame.from_dict(counts, orient="index").fillna(0).astype(int)
    table.index.name = "contig"
    used = [c for c in table.columns if c in USED]
    table["used"] = table[used].sum(axis=1) if used else 0
    table["records"] = table.drop(columns="used").sum(axis=1)
    return table.reset_index()


def dropped_records(decisions: list, target) -> pd.DataFrame:
    """The target records not used as evidence, with why."""
    r = target.records
    rows = [(r.contigs[d.target_row], int(r.positions[d.target_row]), r.refs[d.target_row], r.alts[d.target_row],
             d.decision, d.detail) for d in decisions if not d.used]
    return pd.DataFrame(rows, columns=["contig", "pos", "ref", "alt", "decision", "detail"])


def allele_frequencies(haplotypes: np.ndarray, panel_af: np.ndarray, n_panel_haplotypes: int) -> pd.DataFrame:
    """Target and panel ALT frequency at each typed site (haplotypes: (T, 2S)
    in the panel's coding), and the chi-square statistic of the 2x2 table
    of allele counts (target, panel) x (ALT, REF)."""
    called, alt = np.zeros(len(haplotypes), np.int64), np.zeros(len(haplotypes), np.int64)
    for start in range(0, len(haplotypes), _ROWS_PER_BLOCK):  # a cohort's (T, 2S) is not copied whole
        block = haplotypes[start:start + _ROWS_PER_BLOCK]
        called[start:start + len(block)] = (block >= 0).sum(axis=1)
        alt[start:start + len(block)] = (block == 1).sum(axis=1)
    target_af = np.divide(alt, called, out=np.full(len(alt), np.nan), where=called > 0)
    panel_alt = panel_af * n_panel_haplotypes
    a, b = alt.astype(np.float64), called - alt.astype(np.float64)
    c, d = panel_alt, n_panel_haplotypes - panel_alt
    n = a + b + c + d
    denominator = (a + b) * (c + d) * (a + c) * (b + d)
    chi2 = np.divide(n * (a * d - b * c) ** 2, denominator, out=np.zeros(len(a)), where=denominator > 0)
    return pd.DataFrame({"target_af": target_af, "panel_af": panel_af, "called_alleles": called, "chi2": chi2})


def sample_table(haplotypes: np.ndarray, samples: list) -> pd.DataFrame:
    """Per sample: the share of typed sites called, the share of its diploid
    calls heterozygous, the share of its calls haploid, and how many of its
    alleles are called (half-missing calls included); with the counts they
    come from (SAMPLE_COUNTS), so that the tables of several runs add up
    (combined_sample_tables)."""
    n = len(samples)
    called, het, diploid, haploid, alleles = (np.zeros(n, np.int64) for _ in range(5))
    for start in range(0, len(haplotypes), _ROWS_PER_BLOCK):
        block = haplotypes[start:start + _ROWS_PER_BLOCK]
        first, second = block[:, 0::2], block[:, 1::2]
        is_haploid = (second == -2) & (first >= 0)
        is_diploid = (first >= 0) & (second >= 0)
        called += (is_haploid | is_diploid).sum(axis=0)
        diploid += is_diploid.sum(axis=0)
        het += (is_diploid & (first != second)).sum(axis=0)
        haploid += is_haploid.sum(axis=0)
        alleles += (first >= 0).sum(axis=0) + (second >= 0).sum(axis=0)
    counts = pd.DataFrame({"sites": np.full(n, len(haplotypes), np.int64), "called": called, "diploid": diploid,
                           "het": het, "haploid": haploid, "alleles_called": alleles})
    return _with_rates(samples, counts)


SAMPLE_COUNTS = ("sites", "called", "diploid", "het", "haploid", "alleles_called")


def _with_rates(samples: list, counts: pd.DataFrame) -> pd.DataFrame:
    n, c = len(samples), counts
    return pd.DataFrame({
        "sample": samples,
        "call_rate": c["called"] / np.maximum(c["sites"], 1),
        "heterozygosity": np.divide(c["het"], c["diploid"], out=np.full(n, np.nan), where=c["diploid"] > 0),
        "haploid_share": np.divide(c["haploid"], c["called"], out=np.zeros(n), where=c["called"] > 0),
        **{column: c[column].to_numpy() for column in SAMPLE_COUNTS},
    })


def combined_sample_tables(tables: list) -> pd.DataFrame:
    """The sample table of several runs over the same samples (the contigs
    of a genome-wide run): their counts summed, the shares from the sums."""
    counts = sum(table[list(SAMPLE_COUNTS)].to_numpy() for table in tables)
    return _with_rates(list(tables[0]["sample"]), pd.DataFrame(counts, columns=list(SAMPLE_COUNTS)))


def flagged_samples(table: pd.DataFrame, min_call_rate: float = 0.9, spread: float = 4.0) -> pd.DataFrame:
    """Samples that look wrong: a low call rate, or a heterozygosity further
    than `spread` median absolute deviations from the cohort's median."""
    het = table["heterozygosity"].to_numpy(dtype=np.float64)
    centre = np.nanmedian(het) if np.isfinite(het).any() else np.nan
    mad = np.nanmedian(np.abs(het - centre)) * 1.4826 if np.isfinite(het).any() else 0.0
    far = np.abs(het - centre) > spread * mad if mad > 0 else np.zeros(len(het), bool)
    why = np.where(table["call_rate"] < min_call_rate, "low call rate", np.where(far, "heterozygosity", ""))
    shown = table[["sample", "call_rate", "heterozygosity", "haploid_share"]]
    return shown.assign(flag=why)[why != ""]


def quality_by_maf(af: np.ndarray, dr2: np.ndarray, imputed: np.ndarray) -> pd.DataFrame:
    """Imputed records by MAF bin: their count, mean DR2, and the shares
    kept by DR2 >= each of DR2_KEPT."""
    af, dr2 = af[imputed].astype(np.float64), dr2[imputed].astype(np.float64)
    bins = maf_bin(np.minimum(af, 1 - af))
    rows = []
    for b, label in enumerate([*BIN_LABELS, "all"]):
        inside = bins == b if label != "all" else np.ones(len(af), bool)
        values = dr2[inside]
        shares = [float((values >= t).mean()) if len(values) else np.nan for t in DR2_KEPT]
        rows.append([label, int(inside.sum()), float(values.mean()) if len(values) else np.nan, *shares])
    return pd.DataFrame(rows, columns=["maf_bin", "records", "mean_dr2",
                                       *[f"share_dr2_{t:g}" for t in DR2_KEPT]])


def combined_decision_tables(tables: list) -> pd.DataFrame:
    """decision_table of several runs, a contig's rows summed (a contig
    imputed in pieces, as a chrX shipped as PAR and non-PAR files)."""
    joined = pd.concat(tables, ignore_index=True).fillna(0)
    order = list(dict.fromkeys(joined["contig"]))
    summed = joined.groupby("contig", sort=False).sum().astype(int).loc[order]
    return summed.reset_index()


def combined_quality(tables: list) -> pd.DataFrame:
    """quality_by_maf of several runs over other records: counts summed,
    the mean DR2 and the shares kept weighted by each run's records."""
    joined = pd.concat(tables, ignore_index=True)
    rows = []
    for label, group in joined.groupby("maf_bin", sort=False):
        records = int(group["records"].sum())
        weights = group["records"].to_numpy(dtype=np.float64)
        means = [float(np.average(group[c].fillna(0), weights=weights)) if records else np.nan
                 for c in group.columns[2:]]
        rows.append([label, records, *means])
    return pd.DataFrame(rows, columns=list(joined.columns))
