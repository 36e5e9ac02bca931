"""Accuracy of imputed VCFs against truth genotypes.

Aggregate r2 of a MAF bin = squared Pearson correlation between imputed
dosage and true alt allele count, pooled over every genotype of every
imputed variant in the bin. Bins are by reference-panel MAF when a panel is
given, else by the truth's own MAF. An imputed variant is a record flagged
IMP (genimpute, Beagle) or IMPUTED and not TYPED (Minimac4 flags typed sites
with both), matched to truth by CHROM:POS:REF:ALT.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig
from genimpute.io.vcf_reader import open_vcf

log = logging.getLogger(__name__)

MAF_BINS = [0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5]
BIN_LABELS = [f"[{lo:g}, {hi:g}{']' if hi == 0.5 else ')'}" for lo, hi in zip(MAF_BINS[:-1], MAF_BINS[1:])]
ALL = "all imputed"


def maf_bin(maf: np.ndarray) -> np.ndarray:
    """Index into BIN_LABELS; MAF 0.5 falls in the last, closed bin. MAF is
    rounded first so min(af, 1 - af) bins alike whichever allele is ALT
    (1 - 0.9 is 0.0999... in floating point)."""
    maf = np.round(maf, 12)
    return np.clip(np.searchsorted(MAF_BINS, maf, side="right") - 1, 0, len(BIN_LABELS) - 1)


def _key(rec) -> tuple:
    return (normalise_contig(rec.CHROM), rec.POS, rec.REF, ",".join(rec.ALT))


def _allele_counts(rec) -> np.ndarray:
    """(S,) float alt allele count per sample; nan where a call is missing."""
    gts = rec.genotype.array()[:, :2].astype(np.float64)
    gts[gts == -2] = 0  # haploid: the absent second allele counts 0
    counts = (gts > 0).sum(axis=1).astype(np.float64)
    counts[(gts == -1).any(axis=1)] = np.nan
    return counts


def read_truth(path: str | Path) -> tuple[list, dict]:
    vcf = open_vcf(path)
    truth = {_key(rec): _allele_counts(rec) for rec in vcf if len(rec.ALT) == 1}
    return list(vcf.samples), truth


def panel_maf(path: str | Path) -> dict:
    """Minor allele frequency of each biallelic panel record, from its genotypes."""
    vcf = open_vcf(path)
    maf = {}
    for rec in vcf:
        if len(rec.ALT) == 1:
            called = rec.num_called
            af = (rec.num_het + 2 * rec.num_hom_alt) / (2 * called) if called else 0.0
            maf[_key(rec)] = min(af, 1 - af)
    return maf


@dataclass
class _Accumulator:
    """Running sums for pooled r2, mean per-variant r2 and concordance."""

    n_variants: int = 0
    sums: np.ndarray = field(default_factory=lambda: np.zeros(6))  # n, x, y, xx, yy, xy
    variant_r2: list = field(default_factory=list)
    concordant: int = 0

    def add(self, dosage: np.ndarray, truth: np.ndarray, best_guess: np.ndarray) -> None:
        ok = ~np.isnan(truth) & ~np.isnan(dosage)
        x, y = dosage[ok], truth[ok]
        self.n_variants += 1
        self.sums += [len(x), x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum()]
        self.concordant += int((best_guess[ok] == y).sum())
        if len(x) > 1 and y.std() > 0:
            self.variant_r2.append(np.corrcoef(x, y)[0, 1] ** 2 if x.std() > 0 else 0.0)

    def result(self) -> dict:
        n, sx, sy, sxx, syy, sxy = self.sums
        r2 = float("nan")
        if n > 1:
            cov = sxy - sx * sy / n
            vx, vy = sxx - sx * sx / n, syy - sy * sy / n
            if vx > 0 and vy > 0:
                r2 = cov * cov / (vx * vy)
        return {
            "variants": self.n_variants,
            "aggregate_r2": r2,
            "mean_variant_r2": float(np.mean(self.variant_r2)) if self.variant_r2 else float("nan"),
            "concordance": self.concordant / n if n else float("nan"),
        }


def _is_imputed(rec) -> bool:
    return bool(rec.INFO.get("IMP") or (rec.INFO.get("IMPUTED") and not rec.INFO.get("TYPED")))


def score_vcf(path: str | Path, truth_samples: list, truth: dict, maf: dict | None) -> dict:
    """{bin label or ALL: result dict} for one imputed VCF."""
    vcf = open_vcf(path)
    samples = list(vcf.samples)
    shared = [s for s in samples if s in set(truth_samples)]
    if not shared:
        raise InputError(f"{path}: expected samples shared with the truth file; found none")
    mine = np.array([samples.index(s) for s in shared])
    theirs = np.array([truth_samples.index(s) for s in shared])
    has_ds = "DS" in vcf
    accs = {label: _Accumulator() for label in [*BIN_LABELS, ALL]}
    missing_truth = 0
    for rec in vcf:
        if not _is_imputed(rec) or len(rec.ALT) != 1:
            continue
        key = _key(rec)
        true = truth.get(key)
        if true is None:
            missing_truth += 1
            continue
        best_guess = _allele_counts(rec)[mine]
        dosage = rec.format("DS")[mine, 0].astype(np.float64) if has_ds else best_guess
        true = true[theirs]
        m = maf.get(key) if maf is not None else None
        if m is None:
            af = np.nanmean(true) / 2
            m = min(af, 1 - af)
        for label in (BIN_LABELS[maf_bin(np.array([m]))[0]], ALL):
            accs[label].add(dosage, true, best_guess)
    if missing_truth:
        log.warning("%s: %d imputed records absent from the truth file were skipped", path, missing_truth)
    if accs[ALL].n_variants == 0:
        raise InputError(f"{path}: expected imputed records (INFO IMP or IMPUTED) present in the truth; found none")
    return {label: acc.result() for label, acc in accs.items()}


def evaluate(truth_path: str | Path, imputed: list, labels: list | None = None, ref: str | Path | None = None) -> pd.DataFrame:
    """One row per (tool, MAF bin): variants, aggregate r2, mean per-variant
    r2, concordance."""
    labels = labels or [Path(p).name for p in imputed]
    if len(labels) != len(imputed):
        raise InputError(f"expected one label per imputed file ({len(imputed)}); found {len(labels)}")
    if len(set(labels)) != len(labels):
        raise InputError(f"expected distinct labels; found {', '.join(labels)} (name the files with --labels)")
    truth_samples, truth = read_truth(truth_path)
    maf = panel_maf(ref) if ref is not None else None
    rows = []
    for label, path in zip(labels, imputed):
        for bin_label, result in score_vcf(path, truth_samples, truth, maf).items():
            rows.append({"tool": label, "maf_bin": bin_label, **result})
    return pd.DataFrame(rows)


def side_by_side(table: pd.DataFrame) -> pd.DataFrame:
    """Aggregate r2 by MAF bin (rows) and tool (columns), with variant counts:
    one `variants` column when every tool scored the same number per bin,
    else a `variants <tool>` column per tool."""
    order = [*BIN_LABELS, ALL]
    tools = list(dict.fromkeys(table["tool"]))
    wide = table.pivot(index="maf_bin", columns="tool", values="aggregate_r2").reindex(index=order, columns=tools)
    counts = table.pivot(index="maf_bin", columns="tool", values="variants").reindex(index=order, columns=tools)
    if counts.nunique(axis=1).max() <= 1:
        out = pd.DataFrame({"variants": counts.iloc[:, 0]})
    else:
        out = counts.add_prefix("variants ")
    for tool in tools:
        out[tool] = wide[tool]
    return out
