"""How many distinct minor-allele patterns a target haplotype's kept
states carry in each gap between typed sites, against how many states:
what summing the states by pattern (genimpute.copying.patterns) saves in
the untyped step. For every haplotype of the cohort, over one segment of
the contig: the state-gap pairs (a state kept in a block of typed sites,
genimpute.copying.untyped), the distinct patterns among them, and the
record additions each way (each state adding to the records it carries;
each pattern once).

    python benchmarks/states_by_pattern.py SEED_DIR PANEL_SAMPLES TARGETS [SEGMENT]

SEED_DIR holds panel.N.gpanel and targets.N.vcf.gz, as engine_stages.py reads them.
"""

from __future__ import annotations

import sys

import numpy as np
from engine_time import contig_job

from genimpute.config import CopyingSettings
from genimpute.copying.hmm import _posteriors, switch_probabilities
from genimpute.copying.pbwt import _sightings
from genimpute.copying.states import _composite_states, _state_alleles
from genimpute.copying.untyped import MAXIMA_BLOCK, _block_maxima


def kept_haplotypes(segments: np.ndarray, posterior: np.ndarray, floor: float) -> np.ndarray:
    """(sites, K) the haplotype each state copies at each typed site where
    its block of MAXIMA_BLOCK sites is kept, -1 where it is skipped."""
    maxima = _block_maxima(posterior)
    out = np.full(posterior.shape, -1, dtype=np.int64)
    for slot, start, stop, h in segments.T.tolist():
        start, stop = max(start, 0), min(stop, len(posterior))
        for site in range(start, stop):
            if maxima[site // MAXIMA_BLOCK, slot] >= floor:
                out[site, slot] = h
    return out


def main() -> None:
    seed_dir, panel_samples, targets, *rest = sys.argv[1:]
    settings = CopyingSettings()
    model, contig_segments, queries = contig_job(seed_dir, panel_samples, targets, settings)
    segment = contig_segments[int(rest[0]) if rest else 0]
    queries = np.ascontiguousarray(queries[segment.first:segment.last])
    forward, backward, alleles, untyped = model._build(segment, *model._untyped_span(segment.core_first,
                                                                                        segment.core_last))
    record_gap, g_lo, pattern_of, pattern_first, starts = untyped[2], *untyped[4:8]
    carried = np.diff(starts)  # records each pattern slot carries
    jump = switch_probabilities(model.jump_cm[segment.first:segment.last - 1], model.switch_cm)
    neighbours, max_states = model.passes[0]
    n, sites = queries.shape[1], queries.shape[0]
    sightings = _sightings(forward, backward, queries, np.arange(n), neighbours, settings.sight_every,
                           np.full(n, -1, dtype=np.int64))
    slot_of = np.full(model.panel.n_haplotypes, -1, dtype=np.int32)
    capacity = sightings[0].size + max_states
    buffer, heap = np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64)
    totals = np.zeros(4)
    for q in range(n):
        segments, n_states = _composite_states(sightings[q], settings.sight_every, sites, max_states, slot_of,
                                               buffer, heap)
        segments = segments.copy()
        posterior = _posteriors(_state_alleles(alleles, segments, n_states, sites), queries[:, q].copy(), jump,
                                settings.error, 0, sites)
        kept = kept_haplotypes(segments, posterior, settings.posterior_floor)
        for g in range(max(g_lo, 1), min(sites, g_lo + pattern_of.shape[1])):
            haplotypes = np.unique(np.concatenate([kept[g - 1][kept[g - 1] >= 0], kept[g][kept[g] >= 0]]))
            slots = pattern_first[g - g_lo] + pattern_of[haplotypes, g - g_lo].astype(np.int64)
            distinct = np.unique(slots)
            totals += [len(haplotypes), len(distinct), carried[slots].sum(), carried[distinct].sum()]
    pairs, patterns, adds, pattern_adds = totals / n
    print(f"{n} haplotypes, {sites} typed sites, {len(record_gap)} untyped records; per haplotype: "
          f"{pairs:.0f} state-gap pairs in {patterns:.0f} patterns; record additions {adds:.0f} by state, "
          f"{pattern_adds:.0f} by pattern")


if __name__ == "__main__":
    main()
