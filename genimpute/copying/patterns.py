"""Panel haplotypes grouped, gap by gap, by the minor alleles they carry
among the gap's untyped records (a gap: the records between two typed
sites). The composite states of a target haplotype are its PBWT
neighbours, alike near the target and so alike over a gap: summing their
posteriors by pattern before adding them to the records the pattern
carries does the records' work once a pattern, not once a state.

A haplotype's pattern in a gap is found by a 64-bit hash of the set of
records whose minor allele it carries there (the exclusive or of a fixed
random key of each), so two sets are taken as one only if their keys'
exclusive ors agree: a chance of 2^-63 for each pair of patterns of a gap.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from genimpute.copying.pbwt import count_ones

GAPS_AT_ONCE = 64  # gaps whose hashes are held at a time (fewer where H x them would pass HASH_BYTES)
HASH_BYTES = 32 << 20
STRIP = 256  # haplotypes hashed by one task
_CARRIED = np.uint64(1) << np.uint64(63)  # the hash bit of a haplotype that carries a minor allele in the gap
SMALL_IDS = np.uint16  # pattern_of's type while every gap's patterns fit it, as they nearly always do


@nb.njit(cache=True, inline="always")
def _record_key(record):
    """A fixed random 63-bit key of a record number (splitmix64's mix)."""
    z = np.uint64(record) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (z ^ (z >> np.uint64(31))) >> np.uint64(1)


@nb.njit(cache=True)
def _carried(minor, h, first, stop, out):
    """Write to out the numbers of the records first .. stop - 1 whose
    minor allele haplotype h carries (minor: hap_starts, hap_records,
    common, hap_bits of genimpute.copying.untyped.minor_tables), the listed
    ones first; return how many."""
    hap_starts, hap_records, common, hap_bits = minor
    n = 0
    low, high = hap_starts[h], hap_starts[h + 1]
    i = low + np.searchsorted(hap_records[low:high], first)
    while i < high and hap_records[i] < stop:
        out[n] = hap_records[i]
        n += 1
        i += 1
    c_first, c_stop = np.searchsorted(common, first), np.searchsorted(common, stop)
    bits = hap_bits[h]
    for w in range(c_first >> 6, (c_stop + 63) >> 6):
        word = bits[w]
        if 64 * w < c_first:
            word &= ~((np.uint64(1) << np.uint64(c_first - 64 * w)) - np.uint64(1))
        if 64 * w + 64 > c_stop:
            word &= (np.uint64(1) << np.uint64(c_stop - 64 * w)) - np.uint64(1)
        while word:
            out[n] = common[64 * w + count_ones((word & (~word + np.uint64(1))) - np.uint64(1))]
            n += 1
            word &= word - np.uint64(1)
    return n


@nb.njit(cache=True, parallel=True)
def _hashes(minor, record_gap, gap_first, g0, g1, out):
    """out (g1 - g0, H) uint64, zeros: each haplotype's hash in gaps g0 ..
    g1 - 1 of the records whose minor allele it carries (0: none)."""
    n_haplotypes = out.shape[1]
    for strip in nb.prange((n_haplotypes + STRIP - 1) // STRIP):
        buffer = np.empty(gap_first[g1] - gap_first[g0], dtype=np.int64)
        for h in range(strip * STRIP, min(n_haplotypes, (strip + 1) * STRIP)):
            for i in range(_carried(minor, h, gap_first[g0], gap_first[g1], buffer)):
                r = buffer[i]
                g = record_gap[r] - g0
                out[g, h] = (out[g, h] ^ _record_key(r)) | _CARRIED


@nb.njit(cache=True, parallel=True)
def _numbered(hashes, ids, representatives, counts, n_tasks):
    """Number each gap's patterns (rows of hashes (G, H)) 1, 2, .. in the
    order of their first haplotype, into ids (G, H) (0: none carried) and
    that haplotype into representatives (G, H); counts (G,) each gap's.
    Each of n_tasks keeps one hash table for its gaps, emptied slot by slot."""
    n_gaps, n_haplotypes = hashes.shape
    capacity = 1
    while capacity < 2 * n_haplotypes:
        capacity *= 2
    mask = np.uint64(capacity - 1)
    for task in nb.prange(n_tasks):
        keys, numbers = np.zeros(capacity, dtype=np.uint64), np.zeros(capacity, dtype=np.int64)
        used = np.empty(n_haplotypes, dtype=np.int64)
        for g in range(task, n_gaps, n_tasks):
            n = 0
            for h in range(n_haplotypes):
                value = hashes[g, h]
                ids[g, h] = 0
                if value == 0:
                    continue
                slot = value & mask
                while keys[slot] != 0 and keys[slot] != value:
                    slot = (slot + np.uint64(1)) & mask
                if keys[slot] == 0:
                    keys[slot], used[n], n = value, slot, n + 1
                    numbers[slot] = n
                    representatives[g, n - 1] = h
                ids[g, h] = numbers[slot]
            counts[g] = n
            for i in range(n):
                keys[used[i]] = 0


@nb.njit(cache=True, parallel=True)
def _pattern_records(minor, gap_first, g0, counts, representatives, starts, out):
    """The records each pattern of gaps g0 .. carries (its first
    haplotype's): pattern k of gap g (numbered from 0 over the gaps) is slot
    firsts[g] + k (firsts: the running sum of counts + 1; slot k = 0, the
    gap's haplotypes that carry none, carries no record), its records
    out[starts[slot]:starts[slot + 1]]; with out empty, their counts into
    starts[slot + 1] instead."""
    firsts = np.zeros(len(counts) + 1, dtype=np.int64)
    firsts[1:] = np.cumsum(counts + 1)
    for g in nb.prange(len(counts)):
        first, stop = gap_first[g0 + g], gap_first[g0 + g + 1]
        buffer = np.empty(stop - first, dtype=np.int64)
        for k in range(1, counts[g] + 1):
            n = _carried(minor, representatives[g, k - 1], first, stop, buffer)
            slot = firsts[g] + k
            if len(out):
                out[starts[slot]:starts[slot] + n] = buffer[:n]
            else:
                starts[slot + 1] = n


def gap_patterns(minor: tuple, record_gap: np.ndarray, gap_first: np.ndarray) -> tuple:
    """(g_lo, pattern_of, pattern_first, pattern_starts, pattern_records)
    of the untyped records numbered 0 .. (record_gap: each one's gap,
    ascending; gap_first: the first record of each gap or after), which lie
    in gaps g_lo ..: pattern_of (H, gaps) SMALL_IDS (uint32 where a gap holds
    more patterns than those count) haplotype h's pattern in gap g_lo + j, 0 where
    it carries none of the gap's minor alleles, else numbered from 1;
    pattern k of gap g_lo + j is slot pattern_first[j] + k of the segment
    (slot pattern_first[j], pattern 0, carries no record), and carries the
    records pattern_records[pattern_starts[i]:pattern_starts[i + 1]] (int32)
    of slot i."""
    n_haplotypes = len(minor[0]) - 1
    g_lo = int(record_gap[0]) if len(record_gap) else 0
    n_gaps = int(record_gap[-1]) + 1 - g_lo if len(record_gap) else 0
    pattern_of = np.zeros((n_haplotypes, n_gaps), dtype=SMALL_IDS)
    counts, starts, records = np.zeros(n_gaps, dtype=np.int64), [np.zeros(1, dtype=np.int64)], []
    at_once = max(1, min(GAPS_AT_ONCE, HASH_BYTES // (8 * max(1, n_haplotypes))))
    for c0 in range(0, n_gaps, at_once):
        c1 = min(n_gaps, c0 + at_once)
        hashes = np.zeros((c1 - c0, n_haplotypes), dtype=np.uint64)
        _hashes(minor, record_gap, gap_first, g_lo + c0, g_lo + c1, hashes)
        ids, representatives = np.empty(hashes.shape, dtype=np.int32), np.empty(hashes.shape, dtype=np.int32)
        _numbered(hashes, ids, representatives, counts[c0:c1], min(c1 - c0, nb.get_num_threads()))
        del hashes
        if counts[c0:c1].max(initial=0) >= np.iinfo(pattern_of.dtype).max:
            pattern_of = pattern_of.astype(np.uint32)
        pattern_of[:, c0:c1] = ids.T
        chunk_starts = np.zeros((counts[c0:c1] + 1).sum() + 1, dtype=np.int64)
        _pattern_records(minor, gap_first, g_lo + c0, counts[c0:c1], representatives, chunk_starts,
                         np.empty(0, dtype=np.int32))
        chunk_starts = np.cumsum(chunk_starts)
        chunk_records = np.empty(chunk_starts[-1], dtype=np.int32)
        _pattern_records(minor, gap_first, g_lo + c0, counts[c0:c1], representatives, chunk_starts, chunk_records)
        starts.append(chunk_starts[1:] + starts[-1][-1])
        records.append(chunk_records)
    pattern_first = np.zeros(n_gaps + 1, dtype=np.int64)
    pattern_first[1:] = np.cumsum(counts + 1)
    pattern_records = np.concatenate(records) if records else np.zeros(0, dtype=np.int32)
    return g_lo, pattern_of, pattern_first, np.concatenate(starts), pattern_records
