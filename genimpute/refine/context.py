"""The copying engine's context for each untyped record and query
haplotype of a segment: the engine's own P(alt), and the TOP_STATES
composite states that carry the most posterior weight at the typed sites
either side of the record's gap, with the haplotype each copies at those
sites, its posterior there, and how well that haplotype matches the query
around the gap (the run of typed sites it matches going outwards, and its
mismatches among the nearest `near` typed sites).

The per-query work is the engine's own (genimpute.copying: the same
sightings, composite states, forward-backward and untyped sums, imported
and called as the engine calls them), run here rather than through
ContigModel.probabilities because the engine keeps none of its states or
posteriors: it returns P(alt) alone. The states are kept per gap, not per
record: the records of a gap share the typed sites either side, and only
their interpolation weight differs (features.py combines the two).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from genimpute.copying.hmm import _posteriors, switch_probabilities
from genimpute.copying.model import ContigModel, Segment, selection_group
from genimpute.copying.pbwt import _sightings, count_ones, sighted_sites
from genimpute.copying.states import _composite_states, _state_alleles
from genimpute.copying.untyped import _impute_untyped

TOP_STATES = 16  # states kept per gap: beyond these, the posterior left is summed (SegmentContext.kept)
NEAR_SITES = 8  # typed sites either side of a gap whose mismatches with each state's haplotype are counted
RUN_CAP = 4000  # longest run of matching typed sites counted (int16)


@dataclass
class SegmentContext:
    """The context of a segment's U untyped records for Q query haplotypes,
    states kept per gap (G gaps: the records' typed sites either side)."""

    records: np.ndarray  # (U,) panel rows of the untyped records
    gap: np.ndarray  # (U,) each record's gap, 0 .. G - 1
    weight: np.ndarray  # (U,) its interpolation weight (0 at the left typed site, 1 at the right)
    cm_left: np.ndarray  # (U,) cM from the typed site on its left
    cm_right: np.ndarray  # (U,) cM to the typed site on its right
    alt_freq: np.ndarray  # (U,) ALT frequency in the reference panel
    alleles: np.ndarray  # (U, H) uint8 the reference haplotypes' alleles at the records
    p_alt: np.ndarray  # (U, Q) float32 the engine's P(alt)
    hap: np.ndarray  # (Q, G, K, 2) int32 haplotype each state copies at the left, right typed site (-1: none)
    post: np.ndarray  # (Q, G, K, 2) float32 its posterior there
    run: np.ndarray  # (Q, G, K, 2) int16 typed sites matched going left from the left site, right from the right
    mismatch: np.ndarray  # (Q, G, K, 2) int8 mismatches among the `near` typed sites on that side
    kept: np.ndarray  # (Q, G) float32 the K states' share of the posterior, mean of the two sites
    n_haplotypes: int  # the reference panel's
    switch_cm: float  # cM over which the engine switches state once on average (ContigModel.switch_cm)


@nb.njit(cache=True)
def _state_haplotypes(segments, n_states, lo, hi):
    """(hi - lo, K) int32 the haplotype each composite state copies at typed sites lo .. hi - 1 (-1: none)."""
    out = np.full((hi - lo, n_states), -1, dtype=np.int32)
    for e in range(segments.shape[1]):
        slot, start, end, h = segments[0, e], segments[1, e], segments[2, e], segments[3, e]
        for j in range(max(start, lo), min(end, hi)):
            out[j - lo, slot] = h
    return out


@nb.njit(cache=True)
def _allele(haplotype_words, h, j):
    return np.int8((haplotype_words[h, j >> 6] >> np.uint64(j & 63)) & np.uint64(1))


@nb.njit(cache=True)
def _query_words(query, n_words):
    """(alleles, called) of a query as words of bits, site j bit j % 64 of
    word j // 64, as haplotype_words holds the panel's: XOR of the two,
    masked by `called`, marks a haplotype's mismatches 64 sites at a time."""
    alleles, called = np.zeros(n_words, dtype=np.uint64), np.zeros(n_words, dtype=np.uint64)
    for j in range(len(query)):
        if query[j] >= 0:
            bit = np.uint64(1) << np.uint64(j & 63)
            called[j >> 6] |= bit
            if query[j] == 1:
                alleles[j >> 6] |= bit
    return alleles, called


@nb.njit(cache=True)
def _highest_bit(word):
    """The index of the highest set bit of a non-zero word."""
    for shift in (1, 2, 4, 8, 16, 32):
        word |= word >> np.uint64(shift)
    return count_ones(word) - 1


@nb.njit(cache=True)
def _match_run(haplotype_words, h, query_words, j, step, last):
    """Typed sites from j on, stepping by `step` (1 or -1), that haplotype h
    matches the query at before its first mismatch (a missing call
    matches), at most RUN_CAP: a word of 64 sites at a time."""
    alleles, called = query_words
    n, w, bit = 0, j >> 6, j & 63
    while n < RUN_CAP:
        word = (haplotype_words[h, w] ^ alleles[w]) & called[w]
        if step > 0:
            word >>= np.uint64(bit)  # site j at bit 0
            if word:
                return min(n + count_ones((word & (~word + np.uint64(1))) - np.uint64(1)), last - j, RUN_CAP)
            n, w, bit = n + 64 - bit, w + 1, 0
            if 64 * w >= last:
                return min(n, last - j, RUN_CAP)
        else:
            word <<= np.uint64(63 - bit)  # site j at bit 63
            if word:
                return min(n + 63 - _highest_bit(word), RUN_CAP)
            n, w, bit = n + bit + 1, w - 1, 63
            if w < 0:
                return min(n, RUN_CAP)
    return RUN_CAP


@nb.njit(cache=True)
def _mismatches(haplotype_words, h, query, j, step, near, last):
    """Mismatches of haplotype h with the query at the `near` typed sites from j on, stepping by `step`."""
    n = 0
    for i in range(near):
        site = j + i * step
        if 0 <= site < last and query[site] >= 0 and _allele(haplotype_words, h, site) != query[site]:
            n += 1
    return n


@nb.njit(cache=True)
def _top_states(score, k, order):
    """Fill order[:k] with the states of the k largest scores, largest
    first (ties to the lower state): one pass, each score compared with the
    smallest kept, as most states carry next to no posterior at a gap."""
    n = 0
    for s in range(len(score)):
        if n == k and score[s] <= score[order[k - 1]]:
            continue
        i = min(n, k - 1)
        while i > 0 and score[order[i - 1]] < score[s]:
            order[i] = order[i - 1]
            i -= 1
        order[i] = s
        n = min(n + 1, k)


@nb.njit(cache=True)
def _gap_states(posterior, haps_at, query, haplotype_words, core_first, last, near, hap, post, run, mismatch, kept):
    """Fill the per-gap tables of one query (SegmentContext, rows for gaps
    core_first .. core_first + G - 1, local numbering: gap g lies between
    typed sites g - 1 and g) from its posterior and state haplotypes (rows:
    typed sites core_first ..). The states kept are the K of largest
    posterior summed over the two sites."""
    n_states = posterior.shape[1]
    k = min(hap.shape[1], n_states)
    score, order = np.empty(n_states, dtype=np.float32), np.empty(k, dtype=np.int64)
    query_words = _query_words(query, haplotype_words.shape[1])
    for gi in range(hap.shape[0]):
        g = core_first + gi
        rows = (max(g - 1, 0) - core_first, min(g, last - 1) - core_first)
        if rows[0] < 0:  # the gap before the core's first site holds no record of this segment
            continue
        for s in range(n_states):
            score[s] = posterior[rows[0], s] + posterior[rows[1], s]
        _top_states(score, k, order)
        kept[gi] = 0.5 * score[order[:k]].sum()
        for i in range(k):
            s = order[i]
            for side in range(2):
                row, step = rows[side], 2 * side - 1
                h = haps_at[row, s]
                hap[gi, i, side], post[gi, i, side] = h, posterior[row, s]
                if h >= 0:
                    site = row + core_first
                    run[gi, i, side] = _match_run(haplotype_words, h, query_words, site, step, last)
                    mismatch[gi, i, side] = _mismatches(haplotype_words, h, query, site, step, near, last)
    return kept


@nb.njit(cache=True, parallel=True)
def _segment_context(queries, excluded, forward_index, backward_index, haplotype_words, core_first, core_last,
                     jump_cm, neighbours, max_states, every, switch_cm, error, floor, untyped, size, k, near):
    """(P(alt) (U, Q), hap, post, run, mismatch (Q, G, K, 2), kept (Q, G)):
    one pass of the engine's _impute_segment over queries (t, Q), keeping
    each query's states per gap (_gap_states)."""
    n_queries, n_haplotypes, last = queries.shape[1], haplotype_words.shape[0], queries.shape[0]
    n_gaps, hi = core_last - core_first + 1, min(core_last + 1, last)
    out = np.zeros((n_queries, len(untyped[0])), dtype=np.float32)
    hap = np.full((n_queries, n_gaps, k, 2), -1, dtype=np.int32)
    post = np.zeros((n_queries, n_gaps, k, 2), dtype=np.float32)
    run = np.zeros((n_queries, n_gaps, k, 2), dtype=np.int16)
    mismatch = np.zeros((n_queries, n_gaps, k, 2), dtype=np.int8)
    kept = np.zeros((n_queries, n_gaps), dtype=np.float32)
    jump_rate = switch_probabilities(jump_cm, switch_cm)
    for group in nb.prange((n_queries + size - 1) // size):
        start, stop = group * size, min(n_queries, (group + 1) * size)
        columns = np.arange(start, stop)
        sightings = _sightings(forward_index, backward_index, queries, columns, neighbours, every, excluded[columns])
        slot_of = np.full(n_haplotypes, -1, dtype=np.int32)
        capacity = sightings[0].size + max_states
        segment_buffer, heap = np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64)
        for g in range(len(columns)):
            q = columns[g]
            segments, n_states = _composite_states(sightings[g], every, last, max_states, slot_of, segment_buffer,
                                                   heap)
            query = queries[:, q].copy()
            state_alleles = _state_alleles(haplotype_words, segments, n_states, last)
            posterior = _posteriors(state_alleles, query, jump_rate, error, core_first, hi)
            if len(out[q]):
                _impute_untyped(untyped, segments, posterior, core_first, last, floor, out[q])
            haps_at = _state_haplotypes(segments, n_states, core_first, hi)
            _gap_states(posterior, haps_at, query, haplotype_words, core_first, last, near, hap[q], post[q], run[q],
                        mismatch[q], kept[q])
    return out.T, hap, post, run, mismatch, kept


def segment_context(model: ContigModel, segment: Segment, queries: np.ndarray, excluded: np.ndarray | None = None,
                    k: int = TOP_STATES, near: int = NEAR_SITES) -> SegmentContext:
    """The context of the segment's untyped records for queries (t, Q) int8
    (alleles at the contig's typed sites, negative: no call; excluded (Q,):
    the panel sample each may not copy, -1 none, as ContigModel.probabilities
    takes them). Its p_alt is the engine's P(alt) for the same queries."""
    if len(model.passes) != 1:
        raise ValueError(f"expected the engine's settings to make one pass; found {len(model.passes)} (wide_states)")
    s, first, last = model.settings, segment.first, segment.last
    excluded = np.full(queries.shape[1], -1, dtype=np.int64) if excluded is None else excluded.astype(np.int64)
    start, stop = model._untyped_span(segment.core_first, segment.core_last)
    forward_index, backward_index, haplotype_words, untyped = model._build(segment, start, stop)
    neighbours, max_states = (int(x) for x in model.passes[0])
    size = selection_group(queries.shape[1], sighted_sites(last - first, s.sight_every), neighbours,
                           nb.get_num_threads())
    core_first = segment.core_first - first
    p_alt, hap, post, run, mismatch, kept = _segment_context(
        np.ascontiguousarray(queries[first:last], dtype=np.int8), excluded, forward_index, backward_index,
        haplotype_words, core_first, segment.core_last - first, model.jump_cm[first:last - 1], neighbours,
        max_states, s.sight_every, model.switch_cm, s.error, np.float32(s.posterior_floor), untyped, size, k, near)
    return SegmentContext(*_record_geometry(model, segment, untyped), p_alt=p_alt, hap=hap, post=post, run=run,
                          mismatch=mismatch, kept=kept, n_haplotypes=model.panel.n_haplotypes,
                          switch_cm=float(model.switch_cm))


def _record_geometry(model: ContigModel, segment: Segment, untyped: tuple) -> tuple:
    """(records, gap, weight, cm_left, cm_right, alt_freq, alleles) of the
    segment's untyped records (untyped: the engine's tables of them)."""
    records, weight, local_gap = untyped[0], untyped[1], untyped[2]
    first, last = segment.first, segment.last
    left = first + np.maximum(local_gap - 1, 0)
    right = first + np.minimum(local_gap, last - first - 1)
    cm = model.panel.centimorgans[records]
    cm_left = np.maximum(cm - model.typed_cm[left], 0.0)
    cm_right = np.maximum(model.typed_cm[right] - cm, 0.0)
    gap = local_gap - (segment.core_first - first)
    alleles = model.panel.haplotypes(records)
    return (records, gap.astype(np.int64), weight.astype(np.float32), cm_left, cm_right,
            model.panel.alt_freq[records], alleles)
