"""A lever on held-out samples over several simulation seeds: the errors by
MAF bin that heldout_large_panel.py recorded in each seed's directory
(errors.json), and per bin the geometric mean over seeds of each tool's
error over the baseline's, with its 90% interval across seeds
(seed_bins.ratio_interval). One seed's bootstrap intervals understate how
a bin's difference moves between simulations (docs/journal/BENCHMARKS.md, stop 50); the
seeds are the replicates.

    python benchmarks/heldout_seeds.py DIR... [--baseline copying] [--tools beagle,copyingmax_states800]

Each DIR: a heldout_large_panel.py output directory (one per seed) whose
runs included the baseline and the tools.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from seed_bins import ratio_interval

from genimpute.evaluation import BIN_LABELS


def read_errors(directories: list, tools: list) -> dict:
    """{tool: (seeds, bins) errors} from each directory's errors.json."""
    errors = {tool: [] for tool in tools}
    for directory in directories:
        recorded = json.loads((Path(directory) / "errors.json").read_text())
        for tool in tools:
            if tool not in recorded:
                raise SystemExit(f"{directory}/errors.json: expected {tool}; found {', '.join(recorded)}")
            errors[tool].append(recorded[tool])
    return {tool: np.array(rows) for tool, rows in errors.items()}


def report(directories: list, errors: dict, baseline: str) -> None:
    print("error (1 - r2) by bin: " + " ".join(BIN_LABELS))
    for i, directory in enumerate(directories):
        for tool, rows in errors.items():
            print(f"{Path(directory).name:20s} {tool:28s} " + " ".join(f"{e:.3g}" for e in rows[i]))
    for tool, rows in errors.items():
        if tool == baseline:
            continue
        log_ratios = np.log(rows / errors[baseline])
        ratios = [ratio_interval(log_ratios[:, b]) for b in range(len(BIN_LABELS))]
        print(f"{tool} / {baseline}, geometric mean over {len(directories)} seeds [90% interval]: " + "  ".join(
            f"{label} {m:.3f} [{lo:.3f}, {hi:.3f}]" for label, (m, lo, hi) in zip(BIN_LABELS, ratios)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+")
    parser.add_argument("--baseline", default="copying")
    parser.add_argument("--tools", default="beagle", help="tools compared with the baseline, comma-separated")
    args = parser.parse_args()
    tools = [args.baseline] + [t for t in args.tools.split(",") if t and t != args.baseline]
    report(args.directories, read_errors(args.directories, tools), args.baseline)


if __name__ == "__main__":
    main()
