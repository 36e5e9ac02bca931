"""What a filter on the quality score keeps: each tool's imputed variants
whose estimate (INFO/DR2, or Minimac4's R2) reaches a threshold, their mean
true per-variant r2, and the share they keep of the variants whose true r2
reaches it. A conservative score keeps fewer bad variants and drops more
good ones; an optimistic one the reverse.

    python benchmarks/quality_filters.py TRUTH LABEL=IMPUTED [LABEL=IMPUTED ...] [--thresholds 0.3,0.8]

Variants are scored as `genimpute evaluate` scores them (those whose truth
varies). On held-out panel samples, TRUTH is heldout_quality.sh's
OUT_DIR/truth.vcf.gz and the IMPUTED files OUT_DIR's.
"""

from __future__ import annotations

import argparse

import numpy as np

from genimpute.evaluation import estimated_and_true, read_truth, score_vcf


def scored(path: str, truth_samples: list, truth: dict) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, true r2) of path's imputed variants whose truth varies and that carry an estimate."""
    estimate, true, _ = estimated_and_true(score_vcf(path, truth_samples, truth, [""] * len(truth_samples)))
    return estimate, true


def filter_line(label: str, estimate: np.ndarray, true: np.ndarray, threshold: float) -> str:
    """What keeping the variants whose estimate reaches threshold keeps, in one line."""
    kept, good = estimate >= threshold, true >= threshold
    return (f"{label:12s} >= {threshold:g}: keeps {kept.sum():6d} of {len(kept)} (mean true r2 "
            f"{true[kept].mean():.4f}, {np.sum(kept & ~good)} below {threshold:g}); "
            f"of the {good.sum()} at or above {threshold:g}, {kept[good].mean():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("truth")
    parser.add_argument("imputed", nargs="+", help="LABEL=IMPUTED")
    parser.add_argument("--thresholds", default="0.3,0.8")
    args = parser.parse_args()
    truth_samples, truth = read_truth(args.truth)
    for pair in args.imputed:
        label, _, path = pair.partition("=")
        estimate, true = scored(path, truth_samples, truth)
        for threshold in map(float, args.thresholds.split(",")):
            print(filter_line(label, estimate, true, threshold))


if __name__ == "__main__":
    main()
