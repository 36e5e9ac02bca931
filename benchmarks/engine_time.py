"""The copying engine alone, per target haplotype: every segment of the
scale series' contig imputed for every haplotype of a cohort on one thread
(no reading, formatting or writing; each segment's PBWT index and untyped
records' lists built before it is timed, and timed apart, as a run builds
them once for every batch of samples), the best of ROUNDS runs. How its cost grows
with the panel, apart from the output that grows with the panel's records,
and on a region longer than one segment, what the segments' margins cost.

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


def contig_job(seed_dir: str, panel_samples: str, targets: str, settings: CopyingSettings) -> tuple:
    """(ContigModel, its segments, the targets' alleles (t, Q) at its typed
    sites) of a scale-series job, the engine set to one thread."""
    panel = read_reference(f"{seed_dir}/panel.{panel_samples}.gpanel")
    aln = align_target(panel, read_target(f"{seed_dir}/targets.{targets}.vcf.gz"), source="targets")
    typed = aln.typed_records(len(panel))
    model = ContigModel(panel, 0, typed, settings)
    segments = model.segments()
    numba.set_num_threads(1)
    queries = np.ascontiguousarray(aln.alleles_at(model.typed_rows), dtype=np.int8)
    # numba compiles on a model of its own, whose index is then not the first one timed
    ContigModel(panel, 0, typed, settings).probabilities(segments[-1], queries[:, :4], np.full(4, -1, dtype=np.int64))
    return model, segments, queries


def segment_seconds(model: ContigModel, segment, queries: np.ndarray, rounds: int) -> tuple[float, float]:
    """(seconds to build the segment's index (and impute 4 queries), the
    best of `rounds` imputing all the queries there)."""
    excluded = np.full(queries.shape[1], -1, dtype=np.int64)
    started = time.perf_counter()
    model.probabilities(segment, queries[:, :4], excluded[:4])  # the segment's index and tables built
    index = time.perf_counter() - started
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        model.probabilities(segment, queries, excluded)
        seconds.append(time.perf_counter() - started)
    return index, min(seconds)


def main() -> None:
    seed_dir, panel_samples, targets, *rest = sys.argv[1:]
    rounds = int(rest[0]) if rest else 3
    settings = CopyingSettings(**copying_settings(rest[1] if len(rest) > 1 else ""))
    model, segments, queries = contig_job(seed_dir, panel_samples, targets, settings)
    index_total = impute_total = 0.0
    for segment in segments:
        index, impute = segment_seconds(model, segment, queries, rounds)
        index_total, impute_total = index_total + index, impute_total + impute
    core = sum(s.core_last - s.core_first for s in segments)
    read = sum(s.last - s.first for s in segments)
    print(f"panel {panel_samples} samples, {queries.shape[1]} haplotypes, {len(segments)} segments, {core} typed "
          f"sites read {read / core:.2f} times: {1000 * impute_total / queries.shape[1]:.2f} ms per haplotype "
          f"(best of {rounds} per segment), the indexes and tables {index_total:.1f} s")


if __name__ == "__main__":
    main()
