"""How often distinct samples are taken for panel duplicates (issue 25): for
each target file and panel given, the target samples that share a panel
sample's name, those whose genotypes agree with a panel sample's as a
duplicate's would (>= IDENTITY_CONCORDANCE of >= 100 informative typed
sites), the typed span, and how many are decided to be the same sample (and
so kept out of their own context) under genimpute.identity's rule.

    python benchmarks/panel_duplicates.py NAME=TARGET,PANEL [NAME=TARGET,PANEL ...]
"""

import sys
import time

import numpy as np

from genimpute.identity import IDENTITY_CONCORDANCE, MIN_IDENTITY_SPAN_BP, samples_in_panel
from genimpute.io.vcf_reader import read_target
from genimpute.panel import align_target, read_reference


def main(pairs: list[str]) -> None:
    print(f"identical: >= {IDENTITY_CONCORDANCE:.0%} agreement; decided only over >= {MIN_IDENTITY_SPAN_BP / 1e6:.0f} Mb")
    print("set                 targets  panel  span_Mb  same_name  identical  decided_same  "
          "closest_concordance_of_the_rest  seconds")
    for pair in pairs:
        name, paths = pair.split("=", 1)
        target_path, panel_path = paths.split(",")
        panel = read_reference(panel_path)
        target = read_target(target_path)
        started = time.monotonic()
        matches = samples_in_panel(panel, align_target(panel, target), target.samples)
        seconds = time.monotonic() - started
        rest = ~matches.identical & (matches.closest >= 0)
        highest = matches.concordance[rest].max() if rest.any() else float("nan")
        print(f"{name:<18} {len(target.samples):>8} {len(panel.samples):>6} {matches.span_bp / 1e6:>8.2f} "
              f"{int((matches.by_name >= 0).sum()):>10} {int(matches.identical.sum()):>10} "
              f"{int((matches.in_panel >= 0).sum()):>13}  {highest:>27.4f} {seconds:>8.1f}")
        flagged = np.nonzero(matches.identical)[0]
        for s in flagged[:10]:
            print(f"    {target.samples[s]} ~ {panel.samples[matches.closest[s]]}: "
                  f"{matches.concordance[s]:.4f} of {matches.informative[s]} sites ({matches.decision(s)})")


if __name__ == "__main__":
    main(sys.argv[1:])
