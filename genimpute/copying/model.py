"""A contig's segments and their imputation: each segment's PBWT indexes
and untyped tables built once for all its target haplotypes, batch after
batch, and the haplotypes imputed in parallel groups (their states
chosen together, then one forward-backward each)."""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from genimpute.config import CopyingSettings
from genimpute.copying.hmm import FAST, _posteriors, switch_probabilities
from genimpute.copying.pbwt import _sightings, pbwt_indexes, sighted_sites
from genimpute.copying.states import _composite_states, _packed_by_haplotype, _state_alleles
from genimpute.copying.untyped import _impute_untyped, minor_tables
from genimpute.runtime import release_freed_memory


# queries whose states are chosen together (_walk), at most; their sightings take 128 x sites x 4 neighbours
# int32 per thread (131 MB at 4,000 sites and 16 neighbours), and a group is made smaller where they would
# take more than SIGHTINGS_BYTES (64 at 4,000 sites and 32 neighbours, as from 48,000 haplotypes)
SELECTION_GROUP = 128
SIGHTINGS_BYTES = 1 << 27
PACKED_BLOCK = 32 << 20  # bytes of packed panel records read at a time to list the untyped records' minor alleles


@nb.njit(cache=True, fastmath=FAST)
def _impute_haplotype(haplotype_words, query, segments, n_states, last, core_first, core_last, jump_rate, error,
                      floor, untyped, out_column, typed_column):
    """Forward-backward over typed sites [0, last) of the composite states
    of `segments` (_composite_states); imputes the untyped records in the
    gaps after typed sites core_first..core_last - 1 (gap j + 1 follows
    typed site j; gap 0 is before the first typed site) into out_column
    (none with an empty out_column), and the typed sites of the core where
    the query has no call into typed_column (core_last - core_first,),
    core_first first; states below `floor` skipped there (_impute_untyped)."""
    state_alleles = _state_alleles(haplotype_words, segments, n_states, last)
    # the sites the core's gaps read: its own and the one after it
    posterior = _posteriors(state_alleles, query, jump_rate, error, core_first, min(core_last + 1, last))
    for j in range(core_first, core_last):
        if query[j] < 0:
            alt = 0.0
            for s in range(n_states):
                alt += posterior[j - core_first, s] * state_alleles[j, s]
            typed_column[j - core_first] = alt
    if not len(out_column):  # typed sites only
        return
    _impute_untyped(untyped, segments, posterior, core_first, last, floor, out_column)


def selection_group(n_queries: int, n_sites: int, neighbours: int, n_threads: int) -> int:
    """How many queries choose their states together: SELECTION_GROUP, fewer
    where their sightings (4 neighbours int32 per query and sighted site) would
    take more than SIGHTINGS_BYTES, and fewer where a small cohort would
    leave a thread without a group. No query's output depends on it."""
    fitting = SIGHTINGS_BYTES // max(1, 16 * neighbours * n_sites)
    return max(1, min(SELECTION_GROUP, fitting, (n_queries + n_threads - 1) // n_threads))


@nb.njit(cache=True, parallel=True, nogil=True)
def _impute_segment(queries, excluded, forward_index, backward_index, haplotype_words, core_first, core_last,
                    jump_cm, passes, every, switch_cm, error, floor, untyped, size):
    """((len(records), Q), (core_last - core_first, Q)) P(alt) of Q query
    haplotypes (queries (t, Q) int8, the segment's typed sites) at the
    untyped records of untyped[0] (none if it is empty) and at the typed
    sites of the core where a query has no call (NaN at the others): the
    mean over `passes` (P, 2) int64, each a forward-backward over the
    composite states from (neighbours, max states), the neighbours sighted
    at every `every`-th typed site. The typed output spans
    the core, not the contig: (Q, t) for every segment would grow, in memory
    and in the time to fill it, with the contig's typed sites.
    Queries choose their states in groups of `size` (selection_group)."""
    n_queries, n_haplotypes, last = queries.shape[1], haplotype_words.shape[0], queries.shape[0]
    out = np.zeros((n_queries, len(untyped[0])), dtype=np.float32)
    typed_out = np.full((n_queries, core_last - core_first), np.nan, dtype=np.float32)
    jump_rate = switch_probabilities(jump_cm, switch_cm)
    for group in nb.prange((n_queries + size - 1) // size):
        start, stop = group * size, min(n_queries, (group + 1) * size)
        columns = np.arange(start, stop)
        untyped_pass = np.empty(len(untyped[0]), dtype=np.float32)
        typed_pass = np.empty(core_last - core_first, dtype=np.float32)
        for p in range(len(passes)):
            neighbours, max_states = passes[p, 0], passes[p, 1]
            sightings = _sightings(forward_index, backward_index, queries, columns, neighbours, every,
                                   excluded[columns])
            slot_of = np.full(n_haplotypes, -1, dtype=np.int32)
            capacity = sightings[0].size + max_states
            segment_buffer, heap = np.empty((4, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64)
            for g in range(len(columns)):
                q = columns[g]
                segments, n_states = _composite_states(sightings[g], every, last, max_states, slot_of,
                                                       segment_buffer, heap)
                if p == 0:  # the first pass writes the output itself: no copy where it is the only one
                    _impute_haplotype(haplotype_words, queries[:, q].copy(), segments, n_states, last, core_first,
                                      core_last, jump_rate, error, floor, untyped, out[q], typed_out[q])
                    continue
                untyped_pass[:] = 0
                _impute_haplotype(haplotype_words, queries[:, q].copy(), segments, n_states, last, core_first,
                                  core_last, jump_rate, error, floor, untyped, untyped_pass, typed_pass)
                out[q] += untyped_pass
                for j in range(core_last - core_first):
                    if queries[core_first + j, q] < 0:
                        typed_out[q, j] += typed_pass[j]
        if len(passes) > 1:  # the group's sums to means (NaN, where a query has a call, stays NaN)
            out[start:stop] /= len(passes)
            typed_out[start:stop] /= len(passes)
    return out.T, typed_out.T  # views: a copy would double the peak memory of a large cohort


@dataclass(frozen=True)
class Segment:
    """Typed sites of one contig whose gaps one forward-backward imputes."""
    contig: int
    predicted: np.ndarray  # the gaps' untyped panel records, increasing
    first: int  # typed sites [first, last) of the contig that the forward-backward reads
    last: int
    core_first: int  # gaps (and typed sites) core_first .. core_last - 1 that it imputes
    core_last: int


class ContigModel:
    """A contig's typed sites in the panel, each segment's PBWT index built
    once for all its target haplotypes, batch after batch."""

    def __init__(self, panel, contig: int, typed_mask: np.ndarray, settings: CopyingSettings):
        rows = np.nonzero(panel.contig_index == contig)[0]
        self.contig, self.settings, self.panel = contig, settings, panel
        self.typed_rows = rows[typed_mask[rows]]
        self.untyped_rows = rows[~typed_mask[rows]]
        self._index_of: tuple = (None, None)  # ((first, last), _index of those typed sites)
        self._tables_of: tuple = (None, None)  # ((start, stop, first), _untyped_tables of those records)
        cm = panel.centimorgans
        self.typed_cm = np.maximum.accumulate(cm[self.typed_rows])  # sorted for searches, as jump_cm clips
        self.jump_cm = np.maximum(np.diff(cm[self.typed_rows]), 0.0)
        site_cm = (self.typed_cm[-1] - self.typed_cm[0]) / (len(self.typed_cm) - 1) if len(self.typed_cm) > 1 else 0.0
        self.switch_cm = settings.switch_cm(panel.n_haplotypes, site_cm)
        self.passes = np.array(settings.passes(panel.n_haplotypes), dtype=np.int64)
        self.core_sites = settings.core_sites(panel.n_haplotypes)
        # gap of each untyped record: typed sites before it, less one (-1: before the first)
        gap = np.searchsorted(self.typed_rows, self.untyped_rows) - 1
        self.gap_bounds = np.searchsorted(gap, np.arange(-1, len(self.typed_rows) + 1))  # (t + 2,)
        left = cm[self.typed_rows[np.clip(gap, 0, None)]]
        right = cm[self.typed_rows[np.clip(gap + 1, None, len(self.typed_rows) - 1)]]
        span = right - left
        self.weights = np.where(span > 0, (cm[self.untyped_rows] - left) / np.where(span > 0, span, 1), 0.5)
        self.weights = np.clip(self.weights, 0, 1)

    def drop_built(self) -> None:
        """Free the last segment's index and tables (imputation has moved to another contig)."""
        self._index_of = self._tables_of = (None, None)

    def segments(self, with_untyped_only: bool = True) -> list[Segment]:
        """The contig's segments, in order; only those with untyped records by default."""
        t, size = len(self.typed_rows), self.core_sites
        segments = []
        for core_first in range(0, t, size):
            core_last = min(t, core_first + size)
            start, stop = self._untyped_span(core_first, core_last)
            if start < stop or not with_untyped_only:
                segments.append(Segment(self.contig, self.untyped_rows[start:stop], *self._reach(core_first, core_last),
                                        core_first, core_last))
        return segments

    def _reach(self, core_first: int, core_last: int) -> tuple[int, int]:
        """[first, last) of the typed sites a forward-backward over the core
        reads: margin_sites either side, and all those within margin_switches
        of the copying model's switches (in cM) of the core's ends, up to
        half a core's sites either side (a segment's index and sweeps
        grow with its sites). A seam between segments cut the model off
        from sites it would still weigh: on held-out samples of a large
        panel, a fixed margin of sites, far shorter than the cM over which
        the model switches there, left the rare variants' error well above
        that of one forward-backward over the whole region (see
        docs/results.md)."""
        s, cm = self.settings, self.typed_cm
        reach = s.margin_switches * self.switch_cm
        most = max(s.margin_sites, self.core_sites // 2)
        first = min(core_first - s.margin_sites, int(np.searchsorted(cm, cm[core_first] - reach, side="left")))
        last = max(core_last + s.margin_sites, int(np.searchsorted(cm, cm[core_last - 1] + reach, side="right")))
        return max(0, first, core_first - most), min(len(cm), last, core_last + most)

    def _untyped_span(self, core_first: int, core_last: int) -> tuple[int, int]:
        """[start, stop) of untyped_rows in gaps core_first .. core_last - 1 (and before the first typed site)."""
        return 0 if core_first == 0 else self.gap_bounds[core_first + 1], self.gap_bounds[core_last + 1]

    def probabilities(self, segment: Segment, queries: np.ndarray, excluded: np.ndarray,
                      untyped: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """((len(segment.predicted), Q), (core_last - core_first, Q)) P(alt)
        at the segment's untyped records (none unless `untyped`) and at the
        typed sites of its core where a query has no call (NaN elsewhere);
        queries (t, Q) int8 alleles at the contig's typed sites (negative:
        no call); excluded (Q,) the panel sample each query may not copy
        (-1: none)."""
        s, first = self.settings, segment.first
        start, stop = self._untyped_span(segment.core_first, segment.core_last)
        if not untyped:
            stop = start
        forward_index, backward_index, haplotype_words, untyped_records = self._build(segment, start, stop)
        return _impute_segment(np.ascontiguousarray(queries[first:segment.last], dtype=np.int8),
                               excluded.astype(np.int64), forward_index, backward_index, haplotype_words,
                               segment.core_first - first, segment.core_last - first,
                               self.jump_cm[first:segment.last - 1], self.passes, s.sight_every,
                               self.switch_cm, s.error, np.float32(s.posterior_floor), untyped_records,
                               selection_group(queries.shape[1], sighted_sites(segment.last - first, s.sight_every),
                                               int(self.passes[:, 0].max()), nb.get_num_threads()))

    def _build(self, segment: Segment, start: int, stop: int) -> tuple:
        """(forward index, backward index, alleles (H, words of sites:
        _packed_by_haplotype), untyped tables) of the segment's typed sites
        [first, last), numbered from first, and of untyped records
        start..stop - 1. The index is built
        when first asked for and kept until another is: imputation goes
        segment by segment, every batch of samples in each, and the whole
        contig's index and alleles would take (with sight_every 2) 2.5 bytes
        per typed site and haplotype up to 32,768 samples, 2.625 up to
        65,536 and 2.75 up to 131,072 samples (3.2 GB for 40,000 sites of
        16,000 samples), a segment's a few percent of that.
        The untyped tables are kept likewise: building them takes time that
        every batch would repeat, and a segment's take far less memory than
        a contig's (see docs/results.md)."""
        first, last = segment.first, segment.last
        if self._index_of[0] != (first, last):
            self._index_of = self._tables_of = (None, None)  # the last segment's freed, and given back,
            release_freed_memory()  # before this one's is built
            self._index_of = (first, last), self._index(first, last)
        if self._tables_of[0] != (start, stop, first):
            self._tables_of = (None, None)
            self._tables_of = (start, stop, first), self._untyped_tables(start, stop, first)
        return (*self._index_of[1], self._tables_of[1])

    def _index(self, first: int, last: int) -> tuple:
        """PBWT indexes of typed sites [first, last) left to right and right
        to left, and their alleles haplotype by haplotype in bits (_packed_by_haplotype)."""
        packed = np.ascontiguousarray(self.panel.packed[self.typed_rows[first:last]])
        n = self.panel.n_haplotypes
        return *pbwt_indexes(packed, n, self.settings.sight_every), _packed_by_haplotype(packed, n)

    def _untyped_tables(self, start: int, stop: int, first: int) -> tuple:
        """The untyped records start..stop - 1 as _impute_segment reads them:
        (records, weights, each one's gap in the numbering of typed sites
        from `first`, the first record in each of those gaps or after,
        hap_starts, hap_records, alt_major, the common records, the first
        of them in each gap or after, hap_bits) (minor_tables)."""
        local_bounds = np.clip(self.gap_bounds - start, 0, stop - start).astype(np.int64)
        records = self.untyped_rows[start:stop].astype(np.int64)
        record_gap = np.repeat(np.arange(len(local_bounds) - 1), np.diff(local_bounds)) - first
        gap_first = np.searchsorted(record_gap, np.arange(len(self.typed_rows) - first + 2))
        hap_starts, hap_records, alt_major, common, hap_bits = minor_tables(
            self.panel.packed, records, self.panel.alt_freq[records], self.panel.n_haplotypes, PACKED_BLOCK,
            nb.get_num_threads())
        return (records, self.weights[start:stop], record_gap, gap_first, hap_starts, hap_records, alt_major, common,
                np.searchsorted(common, gap_first), hap_bits)

    def typed_probabilities(self, queries: np.ndarray, excluded: np.ndarray, wanted: np.ndarray) -> np.ndarray:
        """(t, Q) P(alt) at the typed sites where a query has no call, in
        the segments that hold a `wanted` (t,) site (NaN elsewhere)."""
        out = np.full(queries.shape, np.nan, dtype=np.float32)
        for segment in self.segments(with_untyped_only=False):
            if not wanted[segment.core_first:segment.core_last].any():
                continue
            typed = self.probabilities(segment, queries, excluded, untyped=False)[1]
            out[segment.core_first:segment.core_last] = typed
        return out
