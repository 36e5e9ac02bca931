"""The copying engine's error by MAF bin with its switch length times each
of SCALES, on two sets of samples: a heldout_large_panel.py directory's
held-out samples, imputed from its reference, and OWN samples of that
reference itself, each kept from copying itself. The second is all a fit
of the switch length at impute time could see (the panel, no truth), so
where the two sets rank the scales alike such a fit could choose one; where
they do not, it would chase the draw.

    python benchmarks/experiments/switch_scales.py HELDOUT_DIR PANEL ARRAY --map MAP [--scales 1,2,4] [--own 300]

PANEL: the panel heldout_large_panel.py held samples out of (their truth);
ARRAY and MAP as it was given. A scale s runs CopyingSettings with ne / s
and site_switch / s, which makes the switch length s times the default's
(CopyingSettings.switch_cm); scale 1 is the engine's default, and each
other scale's intervals are against it (paired_errors.report). Contigs of
one or more segments alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the maintained scripts this one reads
from longest_runs import heldout_truth, per_sample
from paired_errors import report

from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel
from genimpute.evaluation import maf_bin
from genimpute.panel import ReferencePanel

OWN_SEED = 1


def scaled_settings(scale: float) -> CopyingSettings:
    """The default settings with a switch length `scale` times the default's."""
    default = CopyingSettings()
    return CopyingSettings(ne=default.ne / scale, site_switch=default.site_switch / scale)


def dosages(model: ContigModel, haplotypes: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """(untyped records, N) dosages of the N samples whose (typed sites, 2N) haplotypes are given."""
    queries = np.ascontiguousarray(haplotypes[model.typed_rows], dtype=np.int8)
    return np.concatenate([per_sample(model.probabilities(segment, queries, excluded)[0].astype(np.float64))
                           for segment in model.segments()])


def own_samples(panel: ReferencePanel, n: int) -> np.ndarray:
    """A seeded draw of n of the panel's samples, in panel order."""
    return np.sort(np.random.default_rng(OWN_SEED).choice(len(panel.samples), min(n, len(panel.samples)),
                                                          replace=False))


def compare(panel: ReferencePanel, typed: np.ndarray, haplotypes: np.ndarray, excluded: np.ndarray,
            scales: list) -> None:
    """Report the error by bin at each scale of the samples whose haplotypes (records, 2N) are given."""
    models = {scale: ContigModel(panel, 0, typed, scaled_settings(scale)) for scale in scales}
    predicted = np.concatenate([segment.predicted for segment in models[scales[0]].segments()])
    found = {f"x{scale:g}": dosages(model, haplotypes, excluded) for scale, model in models.items()}
    freq = panel.alt_freq[predicted]
    report(found, per_sample(haplotypes[predicted].astype(np.float64)), maf_bin(np.minimum(freq, 1 - freq)))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("heldout", "full_panel", "array"):
        parser.add_argument(name)
    parser.add_argument("--map", required=True, help="the genetic map (PLINK format) heldout_large_panel.py was given")
    parser.add_argument("--scales", default="1,2,4", help="multiples of the default switch length, as 0.5,1,2")
    parser.add_argument("--own", type=int, default=300, help="reference samples imputed from the rest of it")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    scales = sorted({float(s) for s in args.scales.split(",")} | {1.0}, key=lambda s: (s != 1.0, s))
    if min(scales) < CopyingSettings().site_switch:  # site_switch / scale must stay a probability
        raise SystemExit(f"--scales: expected multiples of at least {CopyingSettings().site_switch:g}; "
                         f"found {min(scales):g}")
    panel, typed, held, truth = heldout_truth(args.heldout, args.full_panel, args.array, args.map, None)
    print(f"{len(held)} held-out samples, imputed from {len(panel.samples)} reference samples; error (1 - r2) by bin")
    compare(panel, typed, truth.haplotypes(np.arange(len(truth))), np.full(2 * len(held), -1, dtype=np.int64), scales)
    own = own_samples(panel, args.own)
    columns = np.ravel(np.column_stack([2 * own, 2 * own + 1]))
    print(f"{len(own)} of those reference samples, each imputed from the others")
    compare(panel, typed, panel.haplotypes(np.arange(len(panel)))[:, columns], np.repeat(own, 2).astype(np.int64),
            scales)


if __name__ == "__main__":
    main()
