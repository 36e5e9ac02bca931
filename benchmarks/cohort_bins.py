"""Each cohort's aggregate r2 by MAF bin, genimpute's and Beagle's, and per
bin the cohorts where genimpute's is at least Beagle's (as issue 23 asks of
one cohort), r2 over all cohorts pooled (its bins marked likewise), and the
cohorts where each tool is at least the other's in every bin. Run in
cohorts.sh's output directory, which holds truth.K.vcf.gz,
genimpute.K.vcf.gz and beagle.K.vcf.gz for K = 1..COHORTS.

    python benchmarks/cohort_bins.py PANEL COHORTS

r2 as `genimpute evaluate` computes it (ALT-pooled, over the imputed
variants both tools wrote, MAF from PANEL), shown to 4 decimals as in
docs/results.md: a cohort counts as level where the two round to the same
figure, as the goal's tables would show it.
"""

from __future__ import annotations

import sys

import numpy as np
from paired_errors import aligned, cell_sums

from genimpute.evaluation import BIN_LABELS, maf_bin, panel_maf
from genimpute.metrics import r2_from_sums

TOOLS = ("genimpute", "beagle")
FIRST_BIN = 1  # from MAF 0.001, as the goal


def cohort_sums(k: int, maf: dict) -> tuple[dict, np.ndarray]:
    """({tool: (V, 6) sums per variant}, (V,) MAF bins) of cohort k."""
    return tool_sums(f"truth.{k}.vcf.gz", {tool: f"{tool}.{k}.vcf.gz" for tool in TOOLS}, maf)


def tool_sums(truth_path: str, files: dict, maf: dict) -> tuple[dict, np.ndarray]:
    """({tool: (V, 6) sums per variant}, (V,) MAF bins) of each tool's
    imputed VCF ({tool: path}) against the truth, over the variants every
    tool wrote."""
    keys, truth, found = aligned(truth_path, files)
    sums = {tool: cell_sums(found[tool], truth, 1) for tool in files}
    return sums, maf_bin(np.array([maf.get(key, 0.0) for key in keys]))


def bin_r2(sums: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """(bins,) aggregate r2 of each MAF bin from the goal's first."""
    return np.array([r2_from_sums(sums[bins == i].sum(0)) for i in range(FIRST_BIN, len(BIN_LABELS))])


def at_least(genimpute: np.ndarray, beagle: np.ndarray) -> np.ndarray:
    """Where genimpute's r2 is at least Beagle's at the 4 decimals the tables show."""
    return np.round(genimpute, 4) >= np.round(beagle, 4)


def cells(r2: dict) -> str:
    """A row of bins, genimpute's r2 / Beagle's, each marked * where genimpute's is below."""
    return "  ".join(f"{g:.4f} / {b:.4f}{' ' if ok else '*'}"
                     for g, b, ok in zip(r2["genimpute"], r2["beagle"], at_least(r2["genimpute"], r2["beagle"])))


def main() -> None:
    panel, cohorts = sys.argv[1], int(sys.argv[2])
    maf = panel_maf(panel)
    labels = BIN_LABELS[FIRST_BIN:]
    print("cohort  " + "  ".join(f"{label:>17s}" for label in labels) + "   (genimpute / Beagle)")
    cohorts_at_least = np.zeros(len(labels), dtype=int)
    every_bin = {"genimpute": 0, "beagle": 0}  # cohorts where the tool is at least the other's in every bin
    pooled = {tool: [] for tool in TOOLS}
    pooled_bins = []
    for k in range(1, cohorts + 1):
        sums, bins = cohort_sums(k, maf)
        r2 = {tool: bin_r2(sums[tool], bins) for tool in TOOLS}
        level_or_above = at_least(r2["genimpute"], r2["beagle"])
        cohorts_at_least += level_or_above
        every_bin["genimpute"] += level_or_above.all()
        every_bin["beagle"] += at_least(r2["beagle"], r2["genimpute"]).all()
        print(f"{k:6d}  " + cells(r2))
        for tool in TOOLS:
            pooled[tool].append(sums[tool])
        pooled_bins.append(bins)
    bins = np.concatenate(pooled_bins)
    r2 = {tool: bin_r2(np.concatenate(pooled[tool]), bins) for tool in TOOLS}
    print("pooled  " + cells(r2))
    print("cohorts with genimpute >= Beagle (*: below): " + "  ".join(
        f"{label} {n}/{cohorts}" for label, n in zip(labels, cohorts_at_least)))
    print(f"cohorts where genimpute is at least Beagle's in every bin: {every_bin['genimpute']}/{cohorts}; "
          f"where Beagle is at least genimpute's in every bin: {every_bin['beagle']}/{cohorts}")


if __name__ == "__main__":
    main()
