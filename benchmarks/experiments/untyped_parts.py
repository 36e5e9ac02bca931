"""Where the untyped step's time goes: genimpute.copying.untyped's loop run
with parts of it switched off, on one segment's haplotypes, one thread, CPU
time (interleaved rounds, medians), and what it does per haplotype (kept
runs of blocks, additions to rare and to common records).

The loop below is the engine's _impute_untyped with a switch for each
part, built from the engine's own helpers: a measurement, not a second
engine (no output of it is used).

    python benchmarks/experiments/untyped_parts.py SEED_DIR PANEL_SAMPLES [TARGETS [SEGMENT [HAPLOTYPES]]]

SEED_DIR, PANEL_SAMPLES, TARGETS and SEGMENT as benchmarks/engine_stages.py
reads them; HAPLOTYPES (default 300) the target haplotypes timed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine_time import contig_job  # noqa: E402

from genimpute.config import CopyingSettings  # noqa: E402
from genimpute.copying.hmm import FAST, _posteriors, switch_probabilities  # noqa: E402
from genimpute.copying.pbwt import _sightings  # noqa: E402
from genimpute.copying.states import _composite_states, _state_alleles  # noqa: E402
from genimpute.copying.untyped import (  # noqa: E402
    MAXIMA_BLOCK, _add_both, _add_common, _add_sides, _block_maxima, _sides, _kept_run)

RARE, SIDES, BULK, NORMALISE = 1, 2, 4, 8  # the parts a variant keeps
VARIANTS = {"whole step": 15, "no rare records": 14, "no boundary gaps' common records": 13,
            "no bulk common records": 11, "no normalisation": 7, "no additions (runs, copies, maxima)": 0}


@nb.njit(cache=False, fastmath=FAST)
def _rare(untyped, column, h, start, end, last, out):
    weights, record_gap, gap_first, hap_starts, hap_records = untyped[1], untyped[2], untyped[3], untyped[4], untyped[5]
    low, high = hap_starts[h], hap_starts[h + 1]
    for i in range(low + np.searchsorted(hap_records[low:high], gap_first[start]), high):
        r = hap_records[i]
        if r >= gap_first[end + 1]:
            break
        if gap_first[start + 1] <= r < gap_first[end]:
            _add_both(out, r, record_gap, weights, column, start, last)
        else:
            _add_sides(out, r, record_gap, weights, column, start, end, last)


@nb.njit(cache=False, fastmath=FAST)
def _step(untyped, segments, posterior, lo, last, floor, out, parts):
    """The engine's loop over kept runs, keeping `parts`; returns the number of runs."""
    weights, record_gap, common, common_first, hap_bits = untyped[1], untyped[2], untyped[7], untyped[8], untyped[9]
    maxima = _block_maxima(posterior)
    column, kept = np.empty(len(posterior), dtype=np.float32), np.zeros(len(posterior), dtype=np.float32)
    runs = 0
    for e in range(segments.shape[1]):
        slot, h = segments[0, e], segments[3, e]
        first, stop = max(segments[1, e] - lo, 0), min(segments[2, e] - lo, len(posterior))
        b = first // MAXIMA_BLOCK
        while b * MAXIMA_BLOCK < stop:
            start, end, b, _ = _kept_run(maxima, posterior, slot, b, first, stop, floor, column, kept)
            if start == end:
                continue
            s, t = start + lo, end + lo
            runs += 1
            if parts & RARE:
                _rare(untyped, column, h, s, t, last, out)
            for c0, c1, sides, part in ((common_first[s], common_first[s + 1], True, SIDES),
                                        (common_first[s + 1], common_first[t], False, BULK),
                                        (common_first[t], common_first[t + 1], True, SIDES)):
                if parts & part:
                    _add_common(out, hap_bits[h], common, c0, c1, sides, record_gap, weights, column, s, t, last)
    if parts & NORMALISE:
        for r in range(len(out)):
            left, right = _sides(record_gap[r], last)
            share = (1 - weights[r]) * kept[left - lo] + weights[r] * kept[right - lo]
            if share > 0:
                out[r] /= share
    return runs


@nb.njit(cache=False)
def _additions(untyped, segments, posterior, lo, floor):
    """(rare, common) minor alleles a haplotype's kept blocks carry: in
    each block of typed sites [s, t) a state is kept in, those of its
    haplotype in the gaps after s up to the one after t - 1, about the
    additions the step makes."""
    gap_first, hap_starts, hap_records, common_first, hap_bits = untyped[3], untyped[4], untyped[5], untyped[8], \
        untyped[9]
    maxima = _block_maxima(posterior)
    rare, common = 0, 0
    for e in range(segments.shape[1]):
        slot, h = segments[0, e], segments[3, e]
        first, stop = max(segments[1, e] - lo, 0), min(segments[2, e] - lo, len(posterior))
        for b in range(first // MAXIMA_BLOCK, (stop + MAXIMA_BLOCK - 1) // MAXIMA_BLOCK):
            if maxima[b, slot] < floor:
                continue
            s, t = max(first, b * MAXIMA_BLOCK) + lo, min(stop, (b + 1) * MAXIMA_BLOCK) + lo
            for i in range(hap_starts[h], hap_starts[h + 1]):
                rare += gap_first[s + 1] <= hap_records[i] < gap_first[t + 1]
            for c in range(common_first[s + 1], common_first[t + 1]):
                common += (hap_bits[h, c >> 6] >> np.uint64(c & 63)) & np.uint64(1)
    return rare, common


def _cases(seed_dir: str, samples: str, targets: str, which: int, n: int) -> tuple:
    """(untyped tables, [(segments, posteriors, lo, last)] of n haplotypes, floor), as the engine builds them."""
    settings = CopyingSettings()
    model, segments, queries = contig_job(seed_dir, samples, targets, settings)
    segment = segments[which]
    queries = np.ascontiguousarray(queries[segment.first:segment.last])
    index_f, index_b, alleles, untyped = model._build(segment, *model._untyped_span(segment.core_first,
                                                                                      segment.core_last))
    jump = switch_probabilities(model.jump_cm[segment.first:segment.last - 1], model.switch_cm)
    neighbours, max_states = model.passes[0]
    n, sites = min(n, queries.shape[1]), queries.shape[0]
    sightings = _sightings(index_f, index_b, queries, np.arange(n), neighbours, settings.sight_every,
                           np.full(n, -1, dtype=np.int64))
    slot_of = np.full(model.panel.n_haplotypes, -1, dtype=np.int32)
    capacity = sightings[0].size + max_states
    buffer, heap = np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64)
    lo, hi = segment.core_first - segment.first, min(segment.core_last - segment.first + 1, sites)
    cases = []
    for q in range(n):
        states, k = _composite_states(sightings[q], settings.sight_every, sites, max_states, slot_of, buffer, heap)
        states = states.copy()
        posterior = _posteriors(_state_alleles(alleles, states, k, sites), queries[:, q].copy(), jump,
                                settings.error, lo, hi)
        cases.append((states, posterior, lo, sites))
    return untyped, cases, np.float32(settings.posterior_floor)


def main() -> None:
    seed_dir, samples, *rest = sys.argv[1:]
    targets, which, n = (rest + ["100", "0", "300"][len(rest):])[:3]
    untyped, cases, floor = _cases(seed_dir, samples, targets, int(which), int(n))
    out = np.zeros(len(untyped[0]), dtype=np.float32)
    seconds = {name: [] for name in VARIANTS}
    for round_ in range(6):  # the first compiles and warms: not counted
        for name, parts in VARIANTS.items():
            started = time.process_time()
            runs = sum(_step(untyped, s, p, lo, last, floor, out, parts) for s, p, lo, last in cases)
            if round_:
                seconds[name].append(time.process_time() - started)
    counts = np.array([_additions(untyped, s, p, lo, floor) for s, p, lo, _ in cases])
    print(f"{len(cases)} haplotypes, {len(untyped[0])} untyped records ({len(untyped[7])} common), "
          f"{cases[0][1].shape[0]} posterior rows of {cases[0][1].shape[1]} states; per haplotype: "
          f"{runs / len(cases):.0f} kept runs, {counts[:, 0].mean():.0f} rare and {counts[:, 1].mean():.0f} "
          "common minor alleles in their kept blocks")
    for name, values in seconds.items():
        print(f"  {name:38s} {1000 * np.median(values) / len(cases):.3f} CPU ms a haplotype")


if __name__ == "__main__":
    main()
