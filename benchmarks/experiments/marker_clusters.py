"""What Beagle's clustering of typed markers would cost the copying engine
in accuracy, measured on held-out panel samples before building it.

Beagle 5 merges typed markers within a short genetic distance (its
`cluster` parameter, 0.005 cM) into one step of its model: the step's
emission is the product of its markers' and no switch happens inside it.
The copying engine run with no switch between typed sites of one cluster
(its jump distances zeroed there) is that model exactly; only the speed,
fewer rows for the forward-backward and the untyped step, is not built.
So the error measured here is the one a clustered engine would have.

    python benchmarks/experiments/marker_clusters.py PANEL ARRAY MAP OUT_DIR [--held-out 100] [--seed 1]
        [--cluster-cm 0.005 [--cluster-cm ...]]

The held-out draw and its files are benchmarks/heldout_large_panel.py's
(OUT_DIR may be shared with it); prints how many steps the typed sites make
at each distance, and the errors by MAF bin with paired intervals against
the engine as it is (benchmarks/paired_errors.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from heldout_large_panel import make_inputs, truth_and_bins  # noqa: E402
from paired_errors import common_variants, dosages, report  # noqa: E402

from genimpute import copying_engine  # noqa: E402
from genimpute.config import CopyingSettings  # noqa: E402
from genimpute.imputation import impute  # noqa: E402
from genimpute.modeldir import PRETRAINED_DIR  # noqa: E402


def cluster_starts(cm: np.ndarray, distance: float) -> np.ndarray:
    """(t,) bool: the typed sites (cm ascending) that start a cluster, as
    Beagle groups them: a site joins the cluster of the one before it while
    it lies within `distance` cM of that cluster's first site."""
    starts = np.zeros(len(cm), dtype=bool)
    first = -np.inf
    for j, position in enumerate(cm):
        if position - first > distance:
            starts[j], first = True, position
    return starts


def clustered_model(distance: float):
    """ContigModel with no switch between the typed sites of one cluster."""
    class Clustered(copying_engine.ContigModel):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            starts = cluster_starts(self.typed_cm, distance)
            self.jump_cm = np.where(starts[1:], self.jump_cm, 0.0)
            print(f"{distance:g} cM: {len(starts)} typed sites in {starts.sum()} steps "
                  f"({len(starts) / max(1, starts.sum()):.2f} a step)")
    return Clustered


def run(gt: Path, ref: Path, genetic_map: str, out: Path, distance: float) -> Path:
    original = copying_engine.ContigModel  # the class the copying engine builds its contigs' models from
    if distance > 0:
        copying_engine.ContigModel = clustered_model(distance)
    try:
        impute(str(gt), PRETRAINED_DIR, str(out), "cpu", progress=False, genetic_map=genetic_map, ref=str(ref),
               force=True, copying=CopyingSettings())
    finally:
        copying_engine.ContigModel = original
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("panel", "array", "map", "out"):
        parser.add_argument(name)
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cluster-cm", type=float, action="append", default=[])
    args = parser.parse_args()
    out = Path(args.out)
    ref, gt, held_out = make_inputs(args.panel, args.array, args.map, out, args.held_out, args.seed)
    distances = [0.0, *(args.cluster_cm or [0.005])]
    outputs = {("engine" if d == 0 else f"clusters {d:g} cM"): run(gt, ref, args.map, out / f"clusters{d:g}.vcf.gz", d)
               for d in distances}
    found = {name: dosages(path, held_out) for name, path in outputs.items()}
    keys = common_variants(found)
    truth, bins = truth_and_bins(args.panel, held_out, keys)
    print(f"{len(keys)} untyped variants, {len(held_out)} held-out samples")
    report({name: np.stack([found[name][k] for k in keys]) for name in found}, truth, bins)


if __name__ == "__main__":
    main()
