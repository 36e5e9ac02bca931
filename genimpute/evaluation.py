"""Accuracy of imputed VCFs against truth genotypes.

Aggregate r2 of a MAF bin = squared Pearson correlation between imputed
dosage and true alt allele count, pooled over every genotype of every
imputed variant in the bin. An imputed variant is a record flagged IMP
(genimpute, Beagle) or IMPUTED and not TYPED (Minimac4 flags typed sites
with both), matched to truth by CHROM:POS:REF:ALT. Dosage is FORMAT/DS, or
the GT allele count when a file has no DS.

MAF bins come from the reference panel's genotypes when a panel is given,
else from INFO/AF of the first imputed file (so every tool is binned alike),
else from the truth genotypes.

Calibration compares each tool's own per-variant quality estimate (INFO/DR2
for genimpute and Beagle, INFO/R2 for Minimac4) with the true per-variant r2:
the mean true r2 by bin of the estimate, and the estimate's error by MAF bin.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig
from genimpute.io.vcf_reader import open_vcf, read_panel
from genimpute.metrics import r2_from_sums
from genimpute.panel import alt_counts, alt_frequency, is_compact, read_reference

log = logging.getLogger(__name__)

MAF_BINS = [0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5]
BIN_LABELS = [f"[{lo:g}, {hi:g}{']' if hi == 0.5 else ')'}" for lo, hi in zip(MAF_BINS[:-1], MAF_BINS[1:])]
ALL = "all imputed"
EVERYONE = "all"  # the population label of scores over every sample

R2_BINS = np.arange(11) / 10  # exact tenths, unlike linspace's 0.30000000000000004
R2_BIN_LABELS = [f"[{lo:.1f}, {hi:.1f}{']' if hi == 1.0 else ')'}" for lo, hi in zip(R2_BINS[:-1], R2_BINS[1:])]
QUALITY_FIELDS = ("DR2", "R2")  # genimpute/Beagle, Minimac4

# columns of the per-sample statistics summed per variant and population
_N, _X, _Y, _XX, _YY, _XY, _CONCORDANT, _NONREF_DISCORDANT, _NONREF = range(9)


# Values are rounded to this many decimals before binning, so 1 - 0.9
# (0.0999... in floating point) and float32 values such as DR2=0.9
# (0.89999998) or a panel's MAF of 0.005 fall in the bin their decimal
# spelling names. The rounding is done in float64: rounded in float32, 0.005
# is still 0.00499999988, below the bin edge.
_BIN_DECIMALS = 6


def _rounded(values: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(values, dtype=np.float64), _BIN_DECIMALS)


def maf_bin(maf: np.ndarray) -> np.ndarray:
    """Index into BIN_LABELS; MAF 0.5 falls in the last, closed bin."""
    return np.clip(np.searchsorted(MAF_BINS, _rounded(maf), side="right") - 1, 0, len(BIN_LABELS) - 1)


def r2_bin(r2: np.ndarray) -> np.ndarray:
    """Index into R2_BIN_LABELS; estimates outside [0, 1] count as the nearest end."""
    r2 = _rounded(np.clip(r2, 0.0, 1.0))
    return np.clip(np.searchsorted(R2_BINS, r2, side="right") - 1, 0, len(R2_BIN_LABELS) - 1)


def variant_key(rec) -> tuple:
    """(contig, POS, REF, ALT) of a record, the contig spelled one way: files naming it differently still meet."""
    return (normalise_contig(rec.CHROM), rec.POS, rec.REF, ",".join(rec.ALT))


# About this many genotypes (records x samples) are scored at once: one
# record at a time, numpy's cost per call was most of an evaluation's time.
_CALLS_PER_BLOCK = 1 << 21


def _records_per_block(n_samples: int) -> int:
    return max(1, _CALLS_PER_BLOCK // max(1, n_samples))


def _genotypes(rec) -> np.ndarray:
    """(S, 2) a record's two allele indices per sample (cyvcf2's: -1 missing, -2 absent)."""
    return rec.genotype.array()[:, :2]


def _allele_counts(genotypes: np.ndarray) -> np.ndarray:
    """(..., S) float alt allele count per sample of genotypes (..., S, 2);
    nan where a call is missing. A haploid call's absent second allele
    (-2) counts 0."""
    counts = (genotypes > 0).sum(axis=-1).astype(np.float64)
    counts[(genotypes == -1).any(axis=-1)] = np.nan
    return counts


def _maf(af):
    """The minor allele's frequency, of an ALT frequency or an array of them."""
    return np.minimum(af, 1 - af)


def read_truth(path: str | Path) -> tuple[list, dict]:
    """(samples, {variant key: (S,) alt allele counts}) of the biallelic records."""
    vcf = open_vcf(path)
    truth, keys, genotypes = {}, [], []
    per_block = _records_per_block(len(vcf.samples))
    for rec in vcf:
        if len(rec.ALT) == 1:
            keys.append(variant_key(rec))
            genotypes.append(_genotypes(rec))
        if len(keys) == per_block:
            truth.update(zip(keys, _allele_counts(np.stack(genotypes))))
            keys, genotypes = [], []
    if keys:
        truth.update(zip(keys, _allele_counts(np.stack(genotypes))))
    return list(vcf.samples), truth


def panel_maf(path: str | Path) -> dict:
    """Minor allele frequency of each biallelic panel record, from its
    genotypes: a compact panel's (`genimpute panel`) or a VCF/BCF's, read as
    `impute --ref` reads it, multi-allelic records split into one record per
    ALT. A VCF that reader refuses (unphased or missing calls) is read with
    htslib instead, its multi-allelic records left out."""
    if is_compact(path):
        panel = read_reference(path)
        contigs = [panel.contig_names[c] for c in panel.contig_index.tolist()]
        return _maf_by_key(contigs, panel.positions, panel.refs, panel.alts, panel.alt_freq)
    counts = _AltCounts()
    try:
        data = read_panel(path, counts)
    except InputError as exc:
        log.warning("%s: read with htslib for MAF, a record at a time (%s)", path, exc)
        return _panel_maf_by_record(path)
    r = data.records
    return _maf_by_key(r.contigs, r.positions, r.refs, r.alts, counts.alt_freq(data.n_haplotypes))


def _maf_by_key(contigs: list, positions: np.ndarray, refs: list, alts: list, alt_freq: np.ndarray) -> dict:
    """{variant key: MAF} from a panel's records and their float32 ALT frequencies."""
    key_of = {c: normalise_contig(c) for c in set(contigs)}
    maf = _maf(alt_freq).astype(np.float64).tolist()
    return {(key_of[c], p, ref, alt): m for c, p, ref, alt, m in zip(contigs, positions.tolist(), refs, alts, maf)}


class _AltCounts:
    """Where read_panel puts a panel's packed records when only their ALT
    counts are wanted: counted block by block and dropped, so the panel is
    read in the memory of its records' descriptions (rows(): no columns)."""

    def __init__(self):
        self.counts: list = []

    def __len__(self) -> int:
        return sum(len(c) for c in self.counts)

    def append(self, block: np.ndarray) -> None:
        self.counts.append(alt_counts(block))

    def reset(self) -> None:
        self.counts = []

    def rows(self) -> np.ndarray:
        return np.empty((len(self), 0), dtype=np.uint8)

    def alt_freq(self, n_haplotypes: int) -> np.ndarray:
        return alt_frequency(np.concatenate(self.counts), n_haplotypes)


def _panel_maf_by_record(path: str | Path) -> dict:
    vcf = open_vcf(path)
    maf = {}
    for rec in vcf:
        if len(rec.ALT) == 1:
            called = rec.num_called
            maf[variant_key(rec)] = _maf((rec.num_het + 2 * rec.num_hom_alt) / (2 * called)) if called else 0.0
    return maf


def read_populations(path: str | Path) -> dict:
    """{sample: population} from a tab-separated table with a header naming
    (at least) the columns `sample` and `population`."""
    try:
        table = pd.read_csv(path, sep="\t", dtype=str)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: cannot read the samples table: {exc}") from exc
    missing = {"sample", "population"} - set(table.columns)
    if missing:
        raise InputError(f"{path}: expected tab-separated columns 'sample' and 'population'; "
                         f"found {', '.join(table.columns)}")
    return dict(zip(table["sample"], table["population"]))


@dataclass
class ToolScores:
    """Per-variant statistics of one imputed file, pooled per population."""

    keys: list  # (contig, pos, ref, alt) of each scored variant
    sums: np.ndarray  # (V, P, 9) statistics per variant and population; population 0 = everyone
    estimated_r2: np.ndarray  # (V,) the file's own quality estimate; nan when absent
    info_af: np.ndarray  # (V,) INFO/AF; nan when absent
    truth_maf: np.ndarray  # (V,) MAF of the truth genotypes scored
    quality_field: str | None  # the INFO field(s) estimated_r2 came from


def _info_float(rec, field: str) -> float:
    value = rec.INFO.get(field)
    if isinstance(value, tuple):
        value = value[0]
    return float(value) if value is not None else float("nan")


def is_imputed(rec) -> bool:
    """Whether a record was imputed, not typed, by the flags genimpute, Beagle or Minimac4 set."""
    return bool(rec.INFO.get("IMP") or (rec.INFO.get("IMPUTED") and not rec.INFO.get("TYPED")))


def score_vcf(path: str | Path, truth_samples: list, truth: dict, populations: list) -> ToolScores:
    """Statistics of every imputed record of `path` present in the truth.

    populations: one population name per truth sample ("" when unknown);
    the populations scored are those named, after everyone."""
    vcf = open_vcf(path)
    samples = list(vcf.samples)
    truth_index = {s: i for i, s in enumerate(truth_samples)}
    shared = [s for s in samples if s in truth_index]
    if not shared:
        raise InputError(f"{path}: expected samples shared with the truth file; found none")
    mine = np.array([samples.index(s) for s in shared])
    theirs = np.array([truth_index[s] for s in shared])
    names = [EVERYONE, *sorted({p for p in populations if p})]
    membership = np.zeros((len(shared), len(names)))  # sample x population, 0/1
    membership[:, 0] = 1
    for i, t in enumerate(theirs):
        if populations[t]:
            membership[i, names.index(populations[t])] = 1

    has_ds = vcf.contains("DS")
    quality_seen = set()
    keys, estimated, info_af, sums, truth_maf = [], [], [], [], []
    block = _Block()
    missing_truth = 0
    per_block = _records_per_block(len(samples))
    for rec in vcf:
        if not is_imputed(rec) or len(rec.ALT) != 1:
            continue
        key = variant_key(rec)
        true = truth.get(key)
        if true is None:
            missing_truth += 1
            continue
        block.add(true, rec, has_ds)
        keys.append(key)
        quality = next((f for f in QUALITY_FIELDS if rec.INFO.get(f) is not None), None)
        estimated.append(_info_float(rec, quality) if quality else float("nan"))
        quality_seen.add(quality)
        info_af.append(_info_float(rec, "AF"))
        if len(block.true) == per_block:
            block.score(mine, theirs, membership, sums, truth_maf)
    block.score(mine, theirs, membership, sums, truth_maf)
    if missing_truth:
        log.warning("%s: %d imputed records absent from the truth file were skipped", path, missing_truth)
    if not keys:
        raise InputError(f"{path}: expected imputed records (INFO IMP or IMPUTED) present in the truth; found none")
    quality_field = "/".join(f for f in QUALITY_FIELDS if f in quality_seen) or None
    return ToolScores(keys, np.concatenate(sums), np.array(estimated), np.array(info_af), np.concatenate(truth_maf),
                      quality_field)


class _Block:
    """Records of an imputed file waiting to be scored together: their
    truth allele counts, genotypes and dosages (None without DS)."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.true, self.genotypes, self.dosages = [], [], []

    def add(self, true: np.ndarray, rec, has_ds: bool) -> None:
        self.true.append(true)
        self.genotypes.append(_genotypes(rec))
        self.dosages.append(rec.format("DS")[:, 0] if has_ds else None)

    def score(self, mine: np.ndarray, theirs: np.ndarray, membership: np.ndarray, sums: list, truth_maf: list) -> None:
        """Append the block's (B, P, 9) statistics per population to `sums`
        and its (B,) truth MAF to `truth_maf`, and empty it. mine / theirs:
        the shared samples' columns in the file and in the truth."""
        if not self.true:
            return
        true = np.stack(self.true)[:, theirs]
        best_guess = _allele_counts(np.stack(self.genotypes)[:, mine])
        dosage = best_guess if self.dosages[0] is None else np.stack(self.dosages)[:, mine].astype(np.float64)
        ok = ~np.isnan(true) & ~np.isnan(dosage)
        x, y, g = np.where(ok, dosage, 0.0), np.where(ok, true, 0.0), np.where(ok, best_guess, -1.0)
        nonref = ok & ((y > 0) | (g > 0))
        per_sample = np.stack([ok, x, y, x * x, y * y, x * y, ok & (g == y), nonref & (g != y), nonref], axis=2)
        sums.append(np.matmul(membership.T, per_sample))
        called = ~np.isnan(true)
        mean = np.where(called, true, 0.0).sum(axis=1) / np.maximum(called.sum(axis=1), 1)
        truth_maf.append(np.where(ok.any(axis=1), _maf(mean / 2), 0.0))
        self.clear()


def _summary(sums: np.ndarray) -> dict:
    """Scores of a set of variants from their (V, 9) statistics."""
    pooled = sums.sum(axis=0)
    n = pooled[_N]
    variant_r2 = r2_from_sums(sums)
    variant_r2 = variant_r2[~np.isnan(variant_r2)]
    return {
        "variants": len(sums),
        "aggregate_r2": float(r2_from_sums(pooled)) if len(sums) else float("nan"),
        "mean_variant_r2": float(variant_r2.mean()) if len(variant_r2) else float("nan"),
        "concordance": pooled[_CONCORDANT] / n if n else float("nan"),
        "nonref_discordance": pooled[_NONREF_DISCORDANT] / pooled[_NONREF] if pooled[_NONREF] else float("nan"),
    }


def accuracy_rows(tool: str, scores: ToolScores, maf: np.ndarray, population_names: list) -> list[dict]:
    """One row per (population, MAF bin and all imputed) for one tool."""
    bins = maf_bin(maf)
    rows = []
    for p, population in enumerate(population_names):
        for b, label in enumerate([*BIN_LABELS, ALL]):
            chosen = scores.sums[:, p] if label == ALL else scores.sums[bins == b, p]
            rows.append({"tool": tool, "population": population, "maf_bin": label, **_summary(chosen)})
    return rows


def estimated_and_true(scores: ToolScores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimated r2, true r2, which variants) of the variants with an
    estimate whose truth varies (true r2 defined), every sample."""
    true_r2 = r2_from_sums(scores.sums[:, 0])
    usable = ~np.isnan(true_r2) & ~np.isnan(scores.estimated_r2)
    return scores.estimated_r2[usable], true_r2[usable], usable


def calibration_rows(tool: str, scores: ToolScores) -> list[dict]:
    """Mean estimated vs mean true per-variant r2, by bin of the estimate,
    over variants whose truth varies (true r2 defined)."""
    if scores.quality_field is None:
        return []
    est, true, usable = estimated_and_true(scores)
    if not usable.any():
        return []
    bins = r2_bin(est)
    rows = []
    for b, label in enumerate(R2_BIN_LABELS):
        sel = bins == b
        rows.append({
            "tool": tool, "field": scores.quality_field, "estimated_bin": label, "variants": int(sel.sum()),
            "mean_estimated_r2": float(est[sel].mean()) if sel.any() else float("nan"),
            "mean_true_r2": float(true[sel].mean()) if sel.any() else float("nan"),
        })
    return rows


def quality_rows(tool: str, scores: ToolScores, maf: np.ndarray) -> list[dict]:
    """How far the quality estimate is from the true per-variant r2, by MAF
    bin and over all imputed variants (those whose truth varies): its mean
    error (estimate - true; below 0 a conservative score), its mean
    absolute error, and its correlation with the true r2. A user filtering
    at DR2 0.8 keeps the variants the score says are good: a score too low
    drops good ones, too high keeps bad ones."""
    if scores.quality_field is None:
        return []
    est, true, usable = estimated_and_true(scores)
    bins = maf_bin(maf[usable])
    rows = []
    for b, label in enumerate([*BIN_LABELS, ALL]):
        sel = np.ones(len(est), dtype=bool) if label == ALL else bins == b
        e, t = est[sel], true[sel]
        varies = len(e) > 1 and e.std() > 0 and t.std() > 0
        rows.append({
            "tool": tool, "field": scores.quality_field, "maf_bin": label, "variants": int(sel.sum()),
            "mean_estimated_r2": float(e.mean()) if len(e) else float("nan"),
            "mean_true_r2": float(t.mean()) if len(e) else float("nan"),
            "mean_error": float((e - t).mean()) if len(e) else float("nan"),
            "mean_absolute_error": float(np.abs(e - t).mean()) if len(e) else float("nan"),
            "correlation": float(np.corrcoef(e, t)[0, 1]) if varies else float("nan"),
        })
    return rows


CALIBRATION_COLUMNS = ["tool", "field", "estimated_bin", "variants", "mean_estimated_r2", "mean_true_r2"]
QUALITY_COLUMNS = ["tool", "field", "maf_bin", "variants", "mean_estimated_r2", "mean_true_r2", "mean_error",
                   "mean_absolute_error", "correlation"]


@dataclass
class Evaluation:
    accuracy: pd.DataFrame  # tool, population, maf_bin, variants, aggregate_r2, mean_variant_r2, concordance, nonref_discordance
    calibration: pd.DataFrame  # CALIBRATION_COLUMNS: by bin of the estimate
    quality: pd.DataFrame  # QUALITY_COLUMNS: the estimate's error by MAF bin
    maf_source: str

    def overall(self) -> pd.DataFrame:
        """Every sample, all imputed variants: one row per tool."""
        a = self.accuracy
        return a[(a["population"] == EVERYONE) & (a["maf_bin"] == ALL)].set_index("tool").drop(columns=["population", "maf_bin"])


def _variant_maf(scores: list[ToolScores], panel: dict | None) -> tuple[list[np.ndarray], str]:
    """MAF of every scored variant of every tool, and where it came from."""
    if panel is not None:
        return [np.array([panel.get(k, m) for k, m in zip(s.keys, s.truth_maf)]) for s in scores], "reference panel"
    first = scores[0]
    if np.isnan(first.info_af).all():
        return [s.truth_maf for s in scores], "truth genotypes"
    info = {k: _maf(af) for k, af in zip(first.keys, first.info_af) if not np.isnan(af)}
    return [np.array([info.get(k, m) for k, m in zip(s.keys, s.truth_maf)]) for s in scores], "INFO/AF of the first imputed file"


def evaluate(
    truth_path: str | Path,
    imputed: list,
    labels: list | None = None,
    ref: str | Path | None = None,
    samples: str | Path | None = None,
) -> Evaluation:
    """Score each imputed file against the truth, by MAF bin and (with a
    samples table) by population, and the calibration of its quality field."""
    labels = labels or [Path(p).name for p in imputed]
    if len(labels) != len(imputed):
        raise InputError(f"expected one label per imputed file ({len(imputed)}); found {len(labels)}")
    if len(set(labels)) != len(labels):
        raise InputError(f"expected distinct labels; found {', '.join(labels)} (name the files with --labels)")
    maf_of = panel_maf(ref) if ref is not None else None  # first: a wrong --ref stops the run at once
    truth_samples, truth = read_truth(truth_path)
    by_sample = read_populations(samples) if samples is not None else {}
    if samples is not None and not set(by_sample) & set(truth_samples):
        raise InputError(f"{samples}: expected sample names found in the truth file {truth_path}; found none")
    populations = [by_sample.get(s, "") for s in truth_samples]
    population_names = [EVERYONE, *sorted({p for p in populations if p})]
    scores = [score_vcf(path, truth_samples, truth, populations) for path in imputed]
    mafs, source = _variant_maf(scores, maf_of)
    accuracy, calibration, quality = [], [], []
    for label, s, maf in zip(labels, scores, mafs):
        accuracy += accuracy_rows(label, s, maf, population_names)
        calibration += calibration_rows(label, s)
        quality += quality_rows(label, s, maf)
    return Evaluation(pd.DataFrame(accuracy), pd.DataFrame(calibration, columns=CALIBRATION_COLUMNS),
                      pd.DataFrame(quality, columns=QUALITY_COLUMNS), source)


def side_by_side(table: pd.DataFrame) -> pd.DataFrame:
    """Aggregate r2 over every sample by MAF bin (rows) and tool (columns),
    with variant counts: one `variants` column when every tool scored the
    same number per bin, else a `variants <tool>` column per tool."""
    table = table[table["population"] == EVERYONE]
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


def by_population(table: pd.DataFrame) -> pd.DataFrame:
    """Aggregate r2 over all imputed variants by population (rows) and tool (columns)."""
    table = table[table["maf_bin"] == ALL]
    tools = list(dict.fromkeys(table["tool"]))
    populations = list(dict.fromkeys(table["population"]))
    return table.pivot(index="population", columns="tool", values="aggregate_r2").reindex(index=populations, columns=tools)
