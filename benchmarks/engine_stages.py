"""The copying engine's stages timed one by one, per target haplotype, on
one thread: the PBWT walks (genimpute.copying.model.selection_group's haplotypes
together, as the engine groups them on one thread), then for each
haplotype its composite states, their alleles, the forward-backward and
the untyped records, both over the whole segment (the engine keeps the
posteriors of its core). Where the engine's time goes at each panel size
(`engine_time.py` times the whole of it).

    python benchmarks/engine_stages.py SEED_DIR PANEL_SAMPLES [TARGETS [SEGMENT [SETTINGS]]]

SEED_DIR: a scale_series.sh output directory (panel.N.gpanel,
targets.N.vcf.gz); TARGETS (default 100) the cohort, whose haplotypes are
all timed; SEGMENT (default 0) which of the contig's segments, numbered
from 0 (the 1 Mb series has one, the 10 Mb instance four); SETTINGS copying
engine settings other than the defaults, as sight_every=2. Each stage runs
once before it is timed (numba compiles it).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from engine_time import contig_job
from heldout_large_panel import copying_settings

from genimpute.copying.hmm import _posteriors, switch_probabilities
from genimpute.copying.model import selection_group
from genimpute.copying.pbwt import _sightings, sighted_sites
from genimpute.copying.states import _composite_states, _state_alleles
from genimpute.copying.untyped import _impute_untyped
from genimpute.config import CopyingSettings


def timed(seconds: dict, stage: str, function, *args):
    """function(*args), run once untimed and once timed into seconds[stage]."""
    function(*args)
    started = time.perf_counter()
    result = function(*args)
    seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started
    return result


def main() -> None:
    seed_dir, panel_samples, *rest = sys.argv[1:]
    targets, which, changes = (rest + ["100", "0", ""][len(rest):])[:3]
    settings = CopyingSettings(**copying_settings(changes))
    model, contig_segments, queries = contig_job(seed_dir, panel_samples, targets, settings)
    segment = contig_segments[int(which)]
    queries = np.ascontiguousarray(queries[segment.first:segment.last])
    panel = model.panel
    records = model._untyped_span(segment.core_first, segment.core_last)
    forward_index, backward_index, alleles, untyped = model._build(segment, *records)
    jump_rate = switch_probabilities(model.jump_cm[segment.first:segment.last - 1], model.switch_cm)
    neighbours, max_states = model.passes[0]  # the engine's first (by default only) pass
    n, sites = queries.shape[1], queries.shape[0]
    seconds: dict = {}
    group = selection_group(n, sighted_sites(sites, settings.sight_every), int(neighbours), 1)
    sightings = np.concatenate([  # in the engine's groups
        timed(seconds, "PBWT walks", _sightings, forward_index, backward_index, queries,
              np.arange(start, min(n, start + group)), neighbours, settings.sight_every,
              np.full(min(n - start, group), -1, dtype=np.int64))
        for start in range(0, n, group)])
    slot_of = np.full(panel.n_haplotypes, -1, dtype=np.int32)
    capacity = sightings[0].size + max_states
    buffer, heap = np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64)
    for q in range(n):
        segments, n_states = timed(seconds, "composite states", _composite_states, sightings[q],
                                   settings.sight_every, sites, max_states, slot_of, buffer, heap)
        segments = segments.copy()  # the buffer is the next call's
        state_alleles = timed(seconds, "states' alleles", _state_alleles, alleles, segments, n_states, sites)
        posterior = timed(seconds, "forward-backward", _posteriors, state_alleles, queries[:, q].copy(),
                          jump_rate, settings.error, 0, sites)
        timed(seconds, "untyped records", _impute_untyped, untyped, segments, posterior, 0, sites,
              np.float32(settings.posterior_floor), np.zeros(len(untyped[0]), dtype=np.float32))
    print(f"panel {panel_samples} samples, {n} haplotypes, {sites} typed sites, {len(untyped[0])} untyped records; "
          "ms per haplotype, one thread:")
    for stage, total in seconds.items():
        print(f"  {stage:18s} {1000 * total / n:.3f}")


if __name__ == "__main__":
    main()
