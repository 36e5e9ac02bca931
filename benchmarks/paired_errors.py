"""Imputed files side by side against one truth: each tool's error (1 -
aggregate r2, pooled in ALT copies as `genimpute evaluate` pools them) by
MAF bin, and for every tool after the first, 90% paired bootstrap
intervals of its error less the first tool's, drawn once over the bin's
variants and once over the samples. A bin's difference smaller than these
is one that other variants, or other samples, could give by chance.

    python benchmarks/paired_errors.py TRUTH PANEL LABEL=IMPUTED [LABEL=IMPUTED ...]

TRUTH: the samples' true genotypes (VCF); PANEL: the reference panel the
MAF bins come from (as `genimpute evaluate --ref`); each IMPUTED a VCF with
DS from genimpute, Beagle or Minimac4 (their untyped records are scored).
benchmarks/heldout_large_panel.py uses the same functions on held-out
panel samples.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from cyvcf2 import VCF

from genimpute.evaluation import BIN_LABELS, is_imputed, maf_bin, panel_maf, read_truth, variant_key
from genimpute.metrics import r2_from_sums

BOOTSTRAP_ROUNDS = 1000


def dosages(path: Path, samples: list) -> dict:
    """variant_key -> (samples,) DS of each imputed record (is_imputed)."""
    vcf = VCF(str(path))
    missing = sorted(set(samples) - set(vcf.samples))
    if missing:
        raise SystemExit(f"{path}: expected the truth's samples; found none for {', '.join(missing[:3])}")
    order = [vcf.samples.index(s) for s in samples]
    return {variant_key(v): v.format("DS")[order, 0].astype(np.float64) for v in vcf if is_imputed(v)}


def cell_sums(dosage: np.ndarray, truth: np.ndarray, axis: int) -> np.ndarray:
    """(n, x, y, xx, yy, xy) of dosage x and true count y (both (V, N)) for
    r2_from_sums, summed over `axis`: (V, 6) per variant with axis 1, (N, 6)
    per sample with axis 0."""
    n = np.full(dosage.shape[1 - axis], dosage.shape[axis], dtype=np.float64)
    return np.stack([n, dosage.sum(axis), truth.sum(axis), (dosage * dosage).sum(axis), (truth * truth).sum(axis),
                     (dosage * truth).sum(axis)], axis=1)


def bootstrap_difference(sums: np.ndarray, baseline: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """5% and 95% quantiles of error(sums) - error(baseline), pooled r2 of
    (M, 6) sums of M units (variants or samples), over the units drawn with
    replacement, the same draws for both."""
    if not len(sums):
        return float("nan"), float("nan")
    draws = np.random.default_rng(seed).multinomial(len(sums), np.full(len(sums), 1 / len(sums)),
                                                    size=BOOTSTRAP_ROUNDS).astype(np.float64)
    difference = r2_from_sums(draws @ baseline) - r2_from_sums(draws @ sums)
    return tuple(np.nanquantile(difference, [0.05, 0.95]))


def bin_errors(dosage: np.ndarray, truth: np.ndarray, bins: np.ndarray) -> tuple[float, list]:
    """(error overall, [error of each MAF bin]) of (V, N) dosages against the truth, V's bins (V,)."""
    per_variant = cell_sums(dosage, truth, 1)
    return (float(1 - r2_from_sums(per_variant.sum(0))),
            [float(1 - r2_from_sums(per_variant[bins == i].sum(0))) for i in range(len(BIN_LABELS))])


def report(found: dict, truth: np.ndarray, bins: np.ndarray, seconds: dict | None = None) -> None:
    """Each tool's error overall and by bin (found: {tool: (V, N) dosages}),
    then each later tool's intervals against the first, over variants and
    over samples."""
    tools = list(found)
    for tool in tools:
        overall, by_bin = bin_errors(found[tool], truth, bins)
        wall = f" | {seconds[tool]:.1f} s" if seconds else ""
        print(f"{tool:10s} all {overall:.3g} | {' '.join(f'{e:.3g}' for e in by_bin)}{wall}")
    for tool in tools[1:]:
        for unit, axis in (("variants", 1), ("samples", 0)):
            intervals = (bootstrap_difference(cell_sums(found[tool][bins == i], truth[bins == i], axis),
                                              cell_sums(found[tools[0]][bins == i], truth[bins == i], axis))
                         for i in range(len(BIN_LABELS)))
            print(f"{tool} - {tools[0]}, error, 90% interval over {unit}: "
                  + " ".join(f"[{low:+.2g}, {high:+.2g}]" for low, high in intervals))


def common_variants(found: dict) -> list:
    """The variants every tool imputed, in order."""
    return sorted(set.intersection(*(set(d) for d in found.values())))


def aligned(truth_path, imputed: dict) -> tuple[list, np.ndarray, dict]:
    """(keys, true counts (V, N), {label: dosages (V, N)}) over the V
    variants that the truth holds and every file of imputed {label: VCF}
    imputed, the truth's N samples in its order."""
    samples, true_counts = read_truth(truth_path)
    found = {label: dosages(Path(path), samples) for label, path in imputed.items()}
    keys = [k for k in common_variants(found) if k in true_counts]
    truth = np.stack([true_counts[k] for k in keys])
    if np.isnan(truth).any():
        raise SystemExit(f"{truth_path}: expected every truth genotype called; found missing calls")
    return keys, truth, {label: np.stack([found[label][k] for k in keys]) for label in found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("truth"), parser.add_argument("panel")
    parser.add_argument("imputed", nargs="+", help="LABEL=VCF, the first the one the others are compared with")
    args = parser.parse_args()
    keys, truth, found = aligned(args.truth, dict(item.split("=", 1) for item in args.imputed))
    maf = panel_maf(args.panel)
    bins = maf_bin(np.array([maf.get(k, 0.0) for k in keys]))
    print(f"{len(keys)} imputed variants, {truth.shape[1]} samples; error (1 - r2) in bins {' '.join(BIN_LABELS)}")
    report(found, truth, bins)


if __name__ == "__main__":
    main()
