"""The copying engine: a Li and Stephens hidden Markov model run once per
target haplotype along all the typed sites of a segment (2,000 by default),
over states chosen for that haplotype by positional BWTs of the panel
(Durbin 2014), as IMPUTE5 chooses its copying states.

Why not per window: a window's context is chosen on its few hundred typed
sites, and in a panel of thousands of samples many haplotypes match a target
there equally well, so which of them carry a rare allele is a coin toss. The
haplotypes that share the target's longest segments tell the carriers apart,
and those are the ones the PBWT finds: at every typed site, the `neighbours`
haplotypes either side of the target in the PBWT order share the longest
runs of alleles with it ending there (left-to-right index) or starting there
(right-to-left index). The `max_states` chosen most often are the states,
and one forward-backward over the segment weighs each by the whole path,
where per-window passes recomputed overlapping stretches for every window.

Switches between states happen with probability 1 - exp(-0.04 ne d /
(H + haplotype_offset)) over d cM, H the panel's haplotypes: Li and
Stephens' rate falls as the panel grows, which one fixed rate per cM did
not; the offset keeps a small panel's rate from growing as 1 / H (held-out
figures in BENCHMARKS.md). Untyped records take the states' alleles weighted
by the posteriors at the typed sites either side, interpolated in cM; typed
sites without a call, the posterior at the site.

Numba-compiled: the walks and the sweeps are loops over sites that numpy
cannot vectorise across states without many temporaries, and numba (a pip
wheel, no compiler at install) compiles them to loops over plain arrays;
groups of haplotypes run in parallel (their states chosen together, then
each its own forward-backward with its own arrays), and no haplotype's
output depends on another's, so it does not depend on the thread count or
the grouping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from genimpute.config import CopyingSettings

# posterior below which a state's alleles are not read at untyped records
MIN_POSTERIOR = 1e-4
# records whose minor allele has at most this many copies are read through their carriers (minor_carriers),
# the others through the distinct sequences of their gap (gap_sequences)
SPARSE_LIMIT = 8
MAX_SEQUENCES = 65535  # per gap, numbered in uint16
SELECTION_GROUP = 128  # queries whose states are chosen together (_walk): 2 x 128 x H int32 per thread
# The sweeps' sums over states may be reordered (vectorised): half the
# forward-backward's time, P(alt) within 0.002 (mean 3e-8) of the strict
# order on the 1,000-sample, 1,000-target job. Not the NaN/inf assumptions:
# NaN marks the typed sites a query does call.
FAST = {"reassoc", "contract", "arcp"}


@nb.njit(cache=True)
def pbwt_index(alleles):
    """(order, zeros_before) of a PBWT over alleles (t, H) uint8:
    order[j] (t+1, H) the haplotypes sorted by their reversed alleles
    before site j; zeros_before[j, i] (t, H+1) the 0 alleles at site j
    among order[j, :i]."""
    t, n = alleles.shape
    order = np.empty((t + 1, n), dtype=np.int32)
    zeros_before = np.empty((t, n + 1), dtype=np.int32)
    for i in range(n):
        order[0, i] = i
    for j in range(t):
        zeros = 0
        for i in range(n):
            zeros_before[j, i] = zeros
            if alleles[j, order[j, i]] == 0:
                zeros += 1
        zeros_before[j, n] = zeros
        low, high = 0, zeros
        for i in range(n):
            h = order[j, i]
            if alleles[j, h] == 0:
                order[j + 1, low] = h
                low += 1
            else:
                order[j + 1, high] = h
                high += 1
    return order, zeros_before


@nb.njit(cache=True)
def _walk(index, queries, columns, first, last, reverse, neighbours, excluded, counts, chosen, n_chosen):
    """For each query g of queries[:, columns] (t, Q), add to chosen[g,
    :n_chosen[g]] the haplotypes within `neighbours` of its place in the
    PBWT order at each typed site of [first, last), counting each choice in
    counts[g] (H,); excluded[g] (a sample index, or -1) is never chosen.
    The queries walk together, site by site: each row of the index is read
    once for all of them (one at a time, every row was a cache miss for
    each). index: (order, zeros_before, alleles) of pbwt_index, of the sites
    right to left if `reverse` (its site j is the queries' t - 1 - j)."""
    order, zeros_before, alleles = index
    n, t = order.shape[1], queries.shape[0]
    place = np.zeros(len(columns), dtype=np.int64)
    for j in range(first, last):
        site = t - 1 - j if reverse else j
        zeros = zeros_before[j, n]
        for g in range(len(columns)):
            allele = queries[site, columns[g]]
            if allele < 0:  # a missing call follows the neighbour just above
                allele = alleles[j, order[j, min(place[g], n - 1)]]
            below = zeros_before[j, place[g]]
            place[g] = below if allele == 0 else zeros + place[g] - below
            for i in range(max(0, place[g] - neighbours), min(n, place[g] + neighbours)):
                h = order[j + 1, i]
                if h // 2 == excluded[g]:
                    continue
                if counts[g, h] == 0:
                    chosen[g, n_chosen[g]] = h
                    n_chosen[g] += 1
                counts[g, h] += 1


@nb.njit(cache=True)
def _select_states(forward_index, backward_index, queries, columns, first, last, neighbours, max_states, excluded):
    """(states (G, max_states), how many (G,)) of queries[:, columns] over
    typed sites [first, last): the haplotypes sharing the longest runs of
    alleles with each ending at each site (a PBWT of the sites left to
    right) and starting there (right to left), the `max_states` most often
    chosen (ties to the lower index), ascending."""
    n_group, n, t = len(columns), forward_index[0].shape[1], queries.shape[0]
    counts = np.zeros((n_group, n), dtype=np.int32)
    chosen = np.empty((n_group, n), dtype=np.int32)
    n_chosen = np.zeros(n_group, dtype=np.int64)
    _walk(forward_index, queries, columns, first, last, False, neighbours, excluded, counts, chosen, n_chosen)
    _walk(backward_index, queries, columns, t - last, t - first, True, neighbours, excluded, counts, chosen, n_chosen)
    states = np.empty((n_group, max_states), dtype=np.int32)
    n_states = np.empty(n_group, dtype=np.int64)
    for g in range(n_group):
        picked = chosen[g, :n_chosen[g]]
        if len(picked) > max_states:
            key = np.empty(len(picked), dtype=np.int64)
            for s in range(len(picked)):
                key[s] = -np.int64(counts[g, picked[s]]) * n + picked[s]
            picked = picked[np.argsort(key)[:max_states]]
        n_states[g] = len(picked)
        states[g, :len(picked)] = np.sort(picked)
    return states, n_states


@nb.njit(cache=True)
def _state_alleles(alleles, states, first, last):
    """(last - first, K) the states' alleles at typed sites [first, last),
    gathered once for the forward and the backward sweeps."""
    out = np.empty((last - first, len(states)), dtype=np.uint8)
    for j in range(first, last):
        for s in range(len(states)):
            out[j - first, s] = alleles[j, states[s]]
    return out


@nb.njit(cache=True, fastmath=FAST)
def _emit(state_alleles, query, i, error, out):
    """out[s] = P(the query's call at site i | copying state s): 1 with no call."""
    match, mismatch = np.float32(1.0 - error), np.float32(error)
    for s in range(len(out)):
        out[s] = np.float32(1.0) if query < 0 else (match if state_alleles[i, s] == query else mismatch)


@nb.njit(cache=True, fastmath=FAST)
def _forward(state_alleles, query, first, jump_rate, error):
    """(sites, K) normalised forward probabilities over typed sites first .. first + sites - 1."""
    n, k = state_alleles.shape
    out = np.empty((n, k), dtype=np.float32)
    previous = np.zeros(k, dtype=np.float32)
    emit = np.empty(k, dtype=np.float32)
    for i in range(n):
        _emit(state_alleles, query[first + i], i, error, emit)
        stay, jump = (np.float32(0.0), np.float32(1.0 / k)) if i == 0 else \
            (np.float32(1.0 - jump_rate[first + i - 1]), np.float32(jump_rate[first + i - 1] / k))
        total = np.float32(0.0)
        for s in range(k):
            previous[s] = (stay * previous[s] + jump) * emit[s]
            total += previous[s]
        for s in range(k):
            previous[s] /= total
            out[i, s] = previous[s]
    return out


@nb.njit(cache=True)
def _allele(packed, record, haplotype):
    return (packed[record, haplotype >> 3] >> (7 - (haplotype & 7))) & 1


@nb.njit(cache=True)
def minor_carriers(packed, records, n_haplotypes, limit):
    """(starts, carriers, minor_is_alt, listed) of records: for each record
    whose minor allele has at most `limit` copies (listed), the haplotypes
    carrying it, carriers[starts[i]:starts[i + 1]] (empty for the others),
    and which allele is minor. A rare record's P(alt) is then a sum over the
    few carriers among a query's states."""
    n = len(records)
    ones = np.zeros(256, dtype=np.int64)  # set bits of each byte value
    for value in range(256):
        for bit in range(8):
            ones[value] += (value >> bit) & 1
    alt_counts = np.zeros(n, dtype=np.int64)
    for i in range(n):  # bits past the last haplotype are 0 (np.packbits pads with zeros)
        for byte in range(packed.shape[1]):
            alt_counts[i] += ones[packed[records[i], byte]]
    minor_is_alt = 2 * alt_counts <= n_haplotypes
    starts = np.zeros(n + 1, dtype=np.int64)
    listed = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        minor = alt_counts[i] if minor_is_alt[i] else n_haplotypes - alt_counts[i]
        listed[i] = minor <= limit
        starts[i + 1] = starts[i] + (minor if listed[i] else 0)
    carriers = np.empty(starts[n], dtype=np.int32)
    for i in range(n):
        if starts[i + 1] == starts[i]:
            continue
        at = starts[i]
        wanted = 1 if minor_is_alt[i] else 0
        for byte in range(packed.shape[1]):
            value = packed[records[i], byte]
            if (value == 0 and wanted == 1) or (value == 255 and wanted == 0):
                continue
            for bit in range(8):
                h = byte * 8 + bit
                if h < n_haplotypes and ((value >> (7 - bit)) & 1) == wanted:
                    carriers[at] = h
                    at += 1
    return starts, carriers, minor_is_alt, listed


@nb.njit(cache=True)
def _number_sequences(packed, records, lo, hi, listed, n_haplotypes, ids, next_id, used):
    """Number into ids (H,) the distinct allele sequences of the panel
    haplotypes over records lo..hi - 1 that are not `listed`, refining the
    partition one record at a time; return how many (-1 past MAX_SEQUENCES)."""
    ids[:] = 0
    n = 1
    for r in range(lo, hi):
        if listed[r]:
            continue
        m = 0
        for h in range(n_haplotypes):
            key = 2 * ids[h] + _allele(packed, records[r], h)
            if next_id[key] < 0:
                next_id[key] = m
                used[m] = key
                m += 1
            ids[h] = next_id[key]
        for i in range(m):
            next_id[used[i]] = -1
        n = m
        if n > MAX_SEQUENCES:
            return -1
    return n


@nb.njit(cache=True, parallel=True)
def gap_sequences(packed, records, gap_bounds, listed, n_haplotypes):
    """(gap_row, sequence_of, first_rep, reps): for each gap g (records
    gap_bounds[g] .. gap_bounds[g + 1] - 1) with records not `listed`, the
    distinct allele sequences the panel haplotypes carry over those records:
    sequence_of[gap_row[g], h] numbers haplotype h's, and
    reps[first_rep[gap_row[g]] + i] is a haplotype carrying sequence i.
    gap_row is -1 for gaps with none, or with more than MAX_SEQUENCES.

    Haplotypes that share a gap's sequence impute it alike, so a query's
    states are summed by sequence first: the few sequences among them, not
    every state, are then read at each record (as Beagle's imputation groups
    reference haplotypes between typed markers)."""
    n_gaps = len(gap_bounds) - 1
    wanted = np.zeros(n_gaps, dtype=np.bool_)
    for g in range(n_gaps):
        for r in range(gap_bounds[g], gap_bounds[g + 1]):
            if not listed[r]:
                wanted[g] = True
                break
    gaps = np.nonzero(wanted)[0]
    sequence_of = np.zeros((len(gaps), n_haplotypes), dtype=np.uint16)
    n_sequences = np.zeros(len(gaps), dtype=np.int64)
    for i in nb.prange(len(gaps)):
        ids = np.empty(n_haplotypes, dtype=np.int32)
        next_id = np.full(2 * n_haplotypes + 2, -1, dtype=np.int32)
        used = np.empty(2 * n_haplotypes + 2, dtype=np.int32)
        n_sequences[i] = _number_sequences(packed, records, gap_bounds[gaps[i]], gap_bounds[gaps[i] + 1], listed,
                                           n_haplotypes, ids, next_id, used)
        if n_sequences[i] > 0:
            sequence_of[i] = ids
    gap_row = np.full(n_gaps, -1, dtype=np.int64)
    first_rep = np.zeros(len(gaps) + 1, dtype=np.int64)
    for i in range(len(gaps)):
        if n_sequences[i] > 0:
            gap_row[gaps[i]] = i
        first_rep[i + 1] = first_rep[i] + max(n_sequences[i], 0)
    reps = np.full(first_rep[-1], -1, dtype=np.int32)
    for i in nb.prange(len(gaps)):
        if n_sequences[i] > 0:
            for h in range(n_haplotypes):
                at = first_rep[i] + sequence_of[i, h]
                if reps[at] < 0:
                    reps[at] = h
    return gap_row, sequence_of, first_rep, reps


@nb.njit(cache=True)
def _above(posterior, out):
    """Write to out the states whose posterior exceeds MIN_POSTERIOR, ascending; return how many."""
    n = 0
    for s in range(len(posterior)):
        out[n] = s
        n += posterior[s] > MIN_POSTERIOR  # branch-free: most states are below
    return n


@nb.njit(cache=True, fastmath=FAST)
def _impute_gap(untyped, groups, gap, states, slot, left, right, out_column, scratch):
    """P(alt) at the untyped records of one gap between typed sites (gap
    g: records gap_bounds[g] .. gap_bounds[g + 1] - 1) from the posteriors
    at its left and right typed sites, interpolated by their weights (0 at
    the left site, 1 at the right). left and right: (posteriors (K,), the
    states above MIN_POSTERIOR, how many); slot (H,): each haplotype's index
    among `states`, -1 for none.

    A rare record (minor_carriers) reads its minor allele's carriers among
    the states; the others, the states above MIN_POSTERIOR summed by their
    sequence over the gap (gap_sequences), or one by one where the gap has
    too many sequences to number."""
    packed, records, weights, starts, carriers, minor_is_alt, listed, gap_bounds = untyped
    if gap_bounds[gap] == gap_bounds[gap + 1]:
        return
    gap_row, sequence_of, first_rep, reps = groups
    mass_left, mass_right, touched = scratch
    row = gap_row[gap]
    n_touched = 0
    if row >= 0:
        n_touched = _sum_by_sequence(sequence_of[row], states, left, mass_left, mass_right, touched, 0)
        n_touched = _sum_by_sequence(sequence_of[row], states, right, mass_right, mass_left, touched, n_touched)
    for r in range(gap_bounds[gap], gap_bounds[gap + 1]):
        from_left, from_right = np.float32(0.0), np.float32(0.0)
        if listed[r]:
            for c in range(starts[r], starts[r + 1]):
                s = slot[carriers[c]]
                if s >= 0:
                    from_left += left[0][s]
                    from_right += right[0][s]
            if not minor_is_alt[r]:  # the sums were of REF: the states sum to 1 at each site
                from_left, from_right = 1 - from_left, 1 - from_right
        elif row >= 0:
            for i in range(n_touched):
                if _allele(packed, records[r], reps[first_rep[row] + touched[i]]):
                    from_left += mass_left[touched[i]]
                    from_right += mass_right[touched[i]]
        else:
            from_left = _alt_mass(packed, records[r], states, left)
            from_right = _alt_mass(packed, records[r], states, right)
        out_column[r] = (1 - weights[r]) * from_left + weights[r] * from_right
    for i in range(n_touched):
        mass_left[touched[i]] = 0
        mass_right[touched[i]] = 0


@nb.njit(cache=True, fastmath=FAST)
def _sum_by_sequence(sequence_of, states, side, mass, other_mass, touched, n_touched):
    """Add each state above MIN_POSTERIOR on one side (posteriors, list,
    count) to the mass of its sequence, listing sequences not yet touched;
    return the new count."""
    posterior, above, n_above = side
    for i in range(n_above):
        s = above[i]
        sequence = sequence_of[states[s]]
        if mass[sequence] == 0 and other_mass[sequence] == 0:  # a state above MIN_POSTERIOR adds a positive mass
            touched[n_touched] = sequence
            n_touched += 1
        mass[sequence] += posterior[s]
    return n_touched


@nb.njit(cache=True, fastmath=FAST)
def _alt_mass(packed, record, states, side):
    """The posterior mass of the states above MIN_POSTERIOR on one side that carry the alt allele."""
    posterior, above, n_above = side
    total = np.float32(0.0)
    for i in range(n_above):
        if _allele(packed, record, states[above[i]]):
            total += posterior[above[i]]
    return total


@nb.njit(cache=True, fastmath=FAST)
def _impute_haplotype(alleles, query, states, first, last, core_first, core_last, jump_rate, error,
                      untyped, groups, slot, out_column, typed_column, scratch):
    """Forward-backward over typed sites [first, last); imputes the untyped
    records after typed sites core_first..core_last - 1 (_impute_gap's gap
    j + 1 follows typed site j; gap 0 is before the first typed site) into
    out_column (none with an empty out_column), and the typed sites of the
    core where the query has no call into typed_column (core_last -
    core_first,), core_first first."""
    k = len(states)
    state_alleles = _state_alleles(alleles, states, first, last)
    forward = _forward(state_alleles, query, first, jump_rate, error)
    backward = np.ones(k, dtype=np.float32)
    emit = np.empty(k, dtype=np.float32)
    posterior, above = np.empty(k, dtype=np.float32), np.empty(k, dtype=np.int32)
    right, right_above, n_right_above = np.empty(k, dtype=np.float32), np.empty(k, dtype=np.int32), 0
    for j in range(last - 1, first - 1, -1):
        if j < last - 1:  # backward to site j from site j + 1
            _emit(state_alleles, query[j + 1], j + 1 - first, error, emit)
            total = np.float32(0.0)
            for s in range(k):
                emit[s] *= backward[s]
                total += emit[s]
            stay, jump, scale = np.float32(1.0 - jump_rate[j]), np.float32(jump_rate[j] / k * total), np.float32(0.0)
            for s in range(k):
                backward[s] = stay * emit[s] + jump
                scale += backward[s]
            for s in range(k):
                backward[s] /= scale
        total = np.float32(0.0)
        for s in range(k):
            posterior[s] = forward[j - first, s] * backward[s]
            total += posterior[s]
        for s in range(k):
            posterior[s] /= total
        if core_first <= j < core_last and query[j] < 0:
            alt = 0.0
            for s in range(k):
                alt += posterior[s] * state_alleles[j - first, s]
            typed_column[j - core_first] = alt
        if not len(out_column):  # typed sites only
            continue
        here = (posterior, above, _above(posterior, above))
        if core_first <= j < core_last:  # after the last typed site: its posterior alone
            _impute_gap(untyped, groups, j + 1, states, slot, here,
                        (right, right_above, n_right_above) if j < last - 1 else here, out_column, scratch)
        if j == core_first == 0:  # before the first typed site: its posterior alone
            _impute_gap(untyped, groups, 0, states, slot, here, here, out_column, scratch)
        posterior, right = right, posterior  # site j is the next one's right: its arrays are kept, not copied
        above, right_above, n_right_above = right_above, above, here[2]


@nb.njit(cache=True, parallel=True)
def _impute_segment(queries, excluded, forward_index, backward_index, first, last, core_first, core_last,
                    jump_cm, neighbours, max_states, ne, haplotype_offset, error, untyped, groups, n_threads):
    """((len(records), Q), (core_last - core_first, Q)) P(alt) of Q query
    haplotypes (queries (t, Q) int8) at the untyped records of untyped[1]
    (none if it is empty) and at the typed sites of the core where a query
    has no call (NaN at the others). The typed output spans the core, not
    the contig: (Q, t) for every segment cost 0.5 GB and its filling for a
    batch of 1,000 samples on a contig of 60,000 typed sites."""
    alleles = forward_index[2]
    n_queries, n_haplotypes = queries.shape[1], alleles.shape[1]
    out = np.zeros((n_queries, len(untyped[1])), dtype=np.float32)
    typed_out = np.full((n_queries, core_last - core_first), np.nan, dtype=np.float32)
    # Li and Stephens: switching is rarer the more haplotypes the panel has to copy from
    jump_rate = -np.expm1(-0.04 * ne * jump_cm / (n_haplotypes + haplotype_offset))
    first_rep = groups[2]
    n_sequences = 1
    for i in range(len(first_rep) - 1):
        n_sequences = max(n_sequences, first_rep[i + 1] - first_rep[i])
    # groups small enough that a small cohort still keeps every thread busy
    size = max(1, min(SELECTION_GROUP, (n_queries + n_threads - 1) // n_threads))
    for group in nb.prange((n_queries + size - 1) // size):
        columns = np.arange(group * size, min(n_queries, (group + 1) * size))
        states_of, n_states = _select_states(forward_index, backward_index, queries, columns, first, last,
                                             neighbours, max_states, excluded[columns])
        for g in range(len(columns)):
            q = columns[g]
            states = states_of[g, :n_states[g]].copy()
            query = queries[:, q].copy()
            slot = np.full(n_haplotypes, -1, dtype=np.int32)
            slot[states] = np.arange(len(states), dtype=np.int32)
            scratch = (np.zeros(n_sequences, dtype=np.float32), np.zeros(n_sequences, dtype=np.float32),
                       np.empty(2 * len(states), dtype=np.int32))
            _impute_haplotype(alleles, query, states, first, last, core_first, core_last, jump_rate, error,
                              untyped, groups, slot, out[q], typed_out[q], scratch)
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
    """A contig's typed sites in the panel, indexed once for every segment
    and every target haplotype."""

    def __init__(self, panel, contig: int, typed_mask: np.ndarray, settings: CopyingSettings):
        rows = np.nonzero(panel.contig_index == contig)[0]
        self.contig, self.settings, self.packed = contig, settings, panel.packed
        self.typed_rows = rows[typed_mask[rows]]
        self.untyped_rows = rows[~typed_mask[rows]]
        self.alleles = np.ascontiguousarray(panel.haplotypes(self.typed_rows))  # (t, H)
        self.forward_index = (*pbwt_index(self.alleles), self.alleles)
        reversed_alleles = np.ascontiguousarray(self.alleles[::-1])
        self.backward_index = (*pbwt_index(reversed_alleles), reversed_alleles)
        cm = panel.centimorgans
        self.jump_cm = np.maximum(np.diff(cm[self.typed_rows]), 0.0)
        # gap of each untyped record: typed sites before it, less one (-1: before the first)
        gap = np.searchsorted(self.typed_rows, self.untyped_rows) - 1
        self.gap_bounds = np.searchsorted(gap, np.arange(-1, len(self.typed_rows) + 1))  # (t + 2,)
        left = cm[self.typed_rows[np.clip(gap, 0, None)]]
        right = cm[self.typed_rows[np.clip(gap + 1, None, len(self.typed_rows) - 1)]]
        span = right - left
        self.weights = np.where(span > 0, (cm[self.untyped_rows] - left) / np.where(span > 0, span, 1), 0.5)
        self.weights = np.clip(self.weights, 0, 1)

    def segments(self, with_untyped_only: bool = True) -> list[Segment]:
        """The contig's segments, in order; only those with untyped records by default."""
        t, size, margin = len(self.typed_rows), self.settings.segment_sites, self.settings.margin_sites
        segments = []
        for core_first in range(0, t, size):
            core_last = min(t, core_first + size)
            start, stop = self._untyped_span(core_first, core_last)
            if start < stop or not with_untyped_only:
                segments.append(Segment(self.contig, self.untyped_rows[start:stop], max(0, core_first - margin),
                                        min(t, core_last + margin), core_first, core_last))
        return segments

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
        s = self.settings
        start, stop = self._untyped_span(segment.core_first, segment.core_last)
        if not untyped:
            stop = start
        untyped_records, groups = self._untyped_tables(start, stop)
        return _impute_segment(np.ascontiguousarray(queries, dtype=np.int8), excluded.astype(np.int64),
                               self.forward_index, self.backward_index, segment.first, segment.last,
                               segment.core_first, segment.core_last, self.jump_cm, s.neighbours, s.max_states,
                               float(s.ne), s.haplotype_offset, s.error, untyped_records, groups,
                               nb.get_num_threads())

    def _untyped_tables(self, start: int, stop: int) -> tuple:
        """The untyped records start..stop - 1 as _impute_segment reads them,
        with their carriers and gap sequences. Built again for each batch of
        samples: kept from one batch to the next, they raised the peak memory
        of 10,020 targets on the 4,000-sample panel from 0.57 to 0.72 GB."""
        local_bounds = np.clip(self.gap_bounds - start, 0, stop - start).astype(np.int64)
        records = self.untyped_rows[start:stop].astype(np.int64)
        n_haplotypes = self.alleles.shape[1]
        carriers = minor_carriers(self.packed, records, n_haplotypes, SPARSE_LIMIT)
        groups = gap_sequences(self.packed, records, local_bounds, carriers[3], n_haplotypes)
        return (self.packed, records, self.weights[start:stop], *carriers, local_bounds), groups

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
