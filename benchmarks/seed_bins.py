"""Issue 23's cells over many simulation seeds: for each seed and panel
size, genimpute's and Beagle's aggregate r2 by MAF bin on the seed's
cohort, then per bin over the seeds: in how many genimpute is at least
Beagle's (at the 4 decimals the goal's tables show), and the geometric mean
of genimpute's error (1 - r2) over Beagle's with a 90% interval across
seeds.

Why seeds: each seed is another 1 Mb simulation, another genealogy. The
samples of one simulation share it, so a bootstrap over one seed's samples
or variants understates how much a bin's difference moves from one
simulation to the next (docs/journal/BENCHMARKS.md, stop 50); seeds are the independent
replicates.

    python benchmarks/seed_bins.py OUT_DIR SEED... [--panels 1000,4000,16000] [--cohort 100]

OUT_DIR: large_panels.sh's output (series.SEED with the panels, seed.SEED
with truth.COHORT.vcf.gz, genimpute_copying.PANEL.COHORT.vcf.gz and
beagle.PANEL.COHORT.vcf.gz).
"""

from __future__ import annotations

import argparse

import numpy as np
from cohort_bins import FIRST_BIN, at_least, bin_r2, cells, tool_sums

from genimpute.evaluation import BIN_LABELS, panel_maf

# one-sided 95% quantiles of Student's t by degrees of freedom: a two-sided 90% interval over n seeds takes n - 1
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
       11: 1.796, 12: 1.782, 13: 1.771, 14: 1.761, 15: 1.753, 16: 1.746, 17: 1.740, 18: 1.734, 19: 1.729}


def seed_r2(out: str, seed: str, panel: int, cohort: int) -> dict:
    """{tool: (bins from FIRST_BIN,) aggregate r2} of one seed's cohort against one panel."""
    run = f"{out}/seed.{seed}"
    files = {"genimpute": f"{run}/genimpute_copying.{panel}.{cohort}.vcf.gz",
             "beagle": f"{run}/beagle.{panel}.{cohort}.vcf.gz"}
    sums, bins = tool_sums(f"{run}/truth.{cohort}.vcf.gz", files, panel_maf(f"{out}/series.{seed}/panel.{panel}.vcf.gz"))
    return {tool: bin_r2(sums[tool], bins) for tool in files}


def ratio_interval(log_ratios: np.ndarray) -> tuple[float, float, float]:
    """(geometric mean, low, high): the mean of log ratios over seeds and its 90% t interval, exponentiated."""
    n, mean = len(log_ratios), float(np.mean(log_ratios))
    if n < 2:
        return np.exp(mean), np.nan, np.nan
    half = T95[min(n - 1, max(T95))] * np.std(log_ratios, ddof=1) / np.sqrt(n)
    return np.exp(mean), np.exp(mean - half), np.exp(mean + half)


def report_panel(out: str, seeds: list, panel: int, cohort: int) -> None:
    labels = BIN_LABELS[FIRST_BIN:]
    print(f"\n{panel} panel samples, {cohort} targets: r2 genimpute / Beagle (*: genimpute below)")
    print("seed    " + "  ".join(f"{label:>17s}" for label in labels))
    per_seed = []
    for seed in seeds:
        r2 = seed_r2(out, seed, panel, cohort)
        level_or_above = at_least(r2["genimpute"], r2["beagle"])
        print(f"{seed:6s}  " + cells(r2))
        per_seed.append((r2, level_or_above))
    counts = np.sum([ok for _, ok in per_seed], axis=0)
    log_ratios = np.array([np.log((1 - r2["genimpute"]) / (1 - r2["beagle"])) for r2, _ in per_seed])
    ratios = [ratio_interval(log_ratios[:, i]) for i in range(len(labels))]
    print(f"{'>=':6s}  " + "  ".join(f"{f'{n}/{len(seeds)}':>17s}" for n in counts)
          + f"   seeds with genimpute at least Beagle's; in every bin: {sum(ok.all() for _, ok in per_seed)}")
    print(f"{'ratio':6s}  " + "  ".join(f"{m:17.3f}" for m, _, _ in ratios)
          + "   genimpute's error / Beagle's, geometric mean over seeds")
    print(f"{'90%':6s}  " + "  ".join(f"{f'[{lo:.3f}, {hi:.3f}]':>17s}" for _, lo, hi in ratios)
          + "   its interval across seeds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("seeds", nargs="+")
    parser.add_argument("--panels", default="1000,4000,16000")
    parser.add_argument("--cohort", type=int, default=100)
    args = parser.parse_args()
    for panel in (int(p) for p in args.panels.split(",")):
        report_panel(args.out, args.seeds, panel, args.cohort)


if __name__ == "__main__":
    main()
