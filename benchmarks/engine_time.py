"""The copying engine alone, per target haplotype: one segment of the scale
series imputed for every haplotype of a cohort on one thread (no reading,
formatting or writing), the best of ROUNDS runs. How its cost grows with the
panel, apart from the output that grows with the panel's records.

    python benchmarks/engine_time.py SEED_DIR PANEL_SAMPLES TARGETS [ROUNDS [SETTINGS]]

SETTINGS: copying engine settings other than the defaults, as neighbours=32,max_states=800.

SEED_DIR: a scale_series.sh output directory (panel.N.gpanel, targets.N.vcf.gz).
"""

from __future__ import annotations

import sys
import time

import numba
import numpy as np
from heldout_large_panel import copying_settings

from genimpute.config import CopyingSettings
from genimpute.copying import ContigModel
from genimpute.io.vcf_reader import read_target
from genimpute.panel import align_target, read_reference


def one_segment_job(seed_dir: str, panel_samples: str, targets: str, settings: CopyingSettings) -> tuple:
    """(ContigModel, its one segment, the targets' alleles (t, Q) at its
    typed sites) of a scale-series job, the engine set to one thread."""
    panel = read_reference(f"{seed_dir}/panel.{panel_samples}.gpanel")
    aln = align_target(panel, read_target(f"{seed_dir}/targets.{targets}.vcf.gz"), source="targets")
    model = ContigModel(panel, 0, aln.typed_records(len(panel)), settings)
    [segment] = model.segments()
    numba.set_num_threads(1)
    return model, segment, np.ascontiguousarray(aln.alleles_at(model.typed_rows), dtype=np.int8)


def main() -> None:
    seed_dir, panel_samples, targets, *rest = sys.argv[1:]
    rounds = int(rest[0]) if rest else 3
    settings = CopyingSettings(**copying_settings(rest[1] if len(rest) > 1 else ""))
    model, segment, queries = one_segment_job(seed_dir, panel_samples, targets, settings)
    excluded = np.full(queries.shape[1], -1, dtype=np.int64)
    model.probabilities(segment, queries[:, :4], excluded[:4])  # compiled, and the segment's index built
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        model.probabilities(segment, queries, excluded)
        seconds.append(time.perf_counter() - started)
    print(f"panel {panel_samples} samples, {queries.shape[1]} haplotypes: {1000 * min(seconds) / queries.shape[1]:.2f} "
          f"ms per haplotype (best of {rounds})")


if __name__ == "__main__":
    main()
