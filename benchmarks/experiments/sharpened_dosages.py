"""Each held-out haplotype's P(alt) sharpened by a power in logit space,
p^g / (p^g + (1 - p)^g), after imputation: the error by MAF bin of the
dosages it gives, and how close the DR2 recomputed from it (as genimpute
computes DR2) comes to the true per-variant r2. genimpute's DR2 ran below
the true r2 because small probabilities are spread over many haplotypes;
this asks whether a sharper P(alt) would fix the score without costing
accuracy.

    python benchmarks/experiments/sharpened_dosages.py OUT_DIR IMPUTED [--powers 1,1.1,1.2,1.5]

OUT_DIR: a heldout_large_panel.py output; IMPUTED: its held-out samples
imputed with HDS (`genimpute impute OUT_DIR/gt.vcf.gz --ref
OUT_DIR/ref.vcf.gz --map MAP --format GT:DS:HDS --out IMPUTED`). No
target is read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from cyvcf2 import VCF

from genimpute.evaluation import BIN_LABELS, is_imputed, variant_key
from genimpute.io.vcf_writer import DosageSums
from genimpute.metrics import r2_from_sums
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the maintained scripts this one reads
from heldout_large_panel import truth_and_bins
from paired_errors import bin_errors, cell_sums


def haplotype_probabilities(path: str, samples: list) -> tuple[list, np.ndarray]:
    """(keys, (V, N, 2) HDS) of path's imputed records, samples in the given order."""
    vcf = VCF(path)
    order = [vcf.samples.index(s) for s in samples]
    keys, rows = [], []
    for v in vcf:
        if is_imputed(v):
            keys.append(variant_key(v))
            rows.append(v.format("HDS")[order, :2].astype(np.float64))
    return keys, np.stack(rows)


def sharpened(p: np.ndarray, power: float) -> np.ndarray:
    """p^power / (p^power + (1 - p)^power), exact at 0 and 1."""
    with np.errstate(divide="ignore"):
        a, b = power * np.log(p), power * np.log1p(-p)
    return np.exp(a - np.logaddexp(a, b))


def dosage_r2(p: np.ndarray) -> np.ndarray:
    """(V,) DR2 of (V, N, 2) haplotype probabilities, as genimpute writes it (DosageSums)."""
    return DosageSums.of(p.reshape(len(p), -1)).r2()


def report(power: float, p: np.ndarray, truth: np.ndarray, bins: np.ndarray) -> str:
    dosage = p.sum(axis=2)
    overall, by_bin = bin_errors(dosage, truth, bins)
    true_r2 = r2_from_sums(cell_sums(dosage, truth, 1))
    scored = ~np.isnan(true_r2)
    estimate = dosage_r2(p)[scored]
    error = estimate - true_r2[scored]
    correlation = np.corrcoef(estimate, true_r2[scored])[0, 1]
    return (f"power {power:g}: error {overall:.5f} | {' '.join(f'{e:.4g}' for e in by_bin)} | DR2 - r2 "
            f"{error.mean():+.4f}, |DR2 - r2| {np.abs(error).mean():.4f}, correlation {correlation:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("imputed")
    parser.add_argument("--powers", default="1,1.1,1.2,1.5")
    args = parser.parse_args()
    held_out = (args.out_dir / "held_out.txt").read_text().split()
    panel = json.loads((args.out_dir / "inputs.json").read_text())["panel"]
    keys, p = haplotype_probabilities(args.imputed, held_out)
    truth, bins = truth_and_bins(panel, held_out, keys)
    print(f"{len(keys)} imputed variants, {len(held_out)} held-out samples; error (1 - r2) in bins "
          f"{' '.join(BIN_LABELS)}; DR2 over the variants whose true r2 is defined")
    for power in map(float, args.powers.split(",")):
        print(report(power, sharpened(p, power), truth, bins))


if __name__ == "__main__":
    main()
