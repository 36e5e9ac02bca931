"""The copying engine: a Li and Stephens hidden Markov model run once per
target haplotype along all the typed sites of a segment (2,000 by default,
4,000 from 48,000 haplotypes: CopyingSettings.core_sites), over states
chosen for that haplotype by positional BWTs of the panel (Durbin 2014),
as IMPUTE5 finds its copying states, and kept in composite states, as
Beagle 5 keeps its reference haplotypes.

Why not per window: a window's context is chosen on its few hundred typed
sites, and in a panel of thousands of samples many haplotypes match a
target there equally well, so which of them carry a rare allele is a coin
toss. The haplotypes that share the target's longest segments tell the
carriers apart, and those are the ones the PBWT finds: at every typed
site, the `neighbours` haplotypes either side of the target in the PBWT
order share the longest runs of alleles with it ending there (left-to-right
index) or starting there (right-to-left index), read out at every
second typed site (CopyingSettings.sight_every: the neighbours of
neighbouring sites are mostly the same, and reading them out was most of
the walks' time). Each of `max_states`
composite states copies one of them at a time: a haplotype found where it
holds no state takes the state whose haplotype was found longest ago, from
halfway between the two sightings. So every stretch of the segment has the
haplotypes matching the target there; one set of the `max_states` found
most often over the whole segment left some stretches with few of those
when more were found (held-out figures in BENCHMARKS.md). A large panel
gets more states (CopyingSettings.passes): the more haplotypes match a
target equally well, the more states it takes to tell them apart. From
4,000 haplotypes, twice as many: on held-out samples over eight simulation
seeds they lowered the error from MAF 0.001 by 1-3% at 3,700 panel
samples and 3-6% in the rare bins at 15,700, and cost the rarest bins at
700 (as they did on real panels of 250 to 991 samples with sparse arrays,
stop 48). From 48,000 haplotypes, twice the neighbours and twice the
states again: 1-3% less error in six of seven MAF bins at 31,700 panel
samples (six seeds), for twice the engine's time. With
`wide_states` a second pass, over more states from more neighbours,
follows (doubled from 4,000 haplotypes, as the first), and P(alt) is the
mean of the two passes': not the default, as 800 states from 32
neighbours beside 400 from 16 cost 2.9 times the time for gains on
held-out samples of a 16,000-sample panel that no target cell of the
scale series showed (BENCHMARKS.md, stop 35). One
forward-backward over the segment weighs each state by the whole path,
where per-window passes recomputed overlapping stretches for every window.

Switches between states happen with probability 1 - exp(-d / L) over d
cM, L = H / (0.04 ne) + s / site_switch, H the panel's haplotypes and s the
mean cM between the contig's typed sites: Li and Stephens' rate falls as
the panel grows, which one fixed rate per cM did not, and the second term
bounds it at site_switch switches per typed site on average, where a small
panel's rate would grow as 1 / H and sparse sites tell its haplotypes apart
less (held-out figures in BENCHMARKS.md). Untyped records take the states' alleles weighted
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
from genimpute.io.sparse_rows import ONES_IN_BYTE, SET_BITS, parts_in_blocks
from genimpute.runtime import release_freed_memory

# queries whose states are chosen together (_walk), at most; their sightings take 128 x sites x 4 neighbours
# int32 per thread (131 MB at 4,000 sites and 16 neighbours), and a group is made smaller where they would
# take more than SIGHTINGS_BYTES (64 at 4,000 sites and 32 neighbours, as from 48,000 haplotypes)
SELECTION_GROUP = 128
SIGHTINGS_BYTES = 1 << 27
# The sweeps' sums over states may be reordered (vectorised): half the
# forward-backward's time, P(alt) within 0.002 (mean 3e-8) of the strict
# order on the 1,000-sample, 1,000-target job. Not the NaN/inf assumptions:
# NaN marks the typed sites a query does call.
FAST = {"reassoc", "contract", "arcp"}
PACKED_BLOCK = 32 << 20  # bytes of packed panel records read at a time to list the untyped records' minor alleles
MAXIMA_BLOCK = 16  # typed sites per block of the table of posterior maxima that decides the skip
MAX_HAPLOTYPES = 1 << 24  # the most a PBWT order's 16 + 8 bits number (pbwt_index)


def pbwt_index(packed: np.ndarray, n_haplotypes: int, reverse: bool = False) -> tuple[np.ndarray, ...]:
    """(order_low, order_high, allele_words, word_zeros) of a PBWT over
    the sites of packed (t, ceil(H / 8)) uint8: the alleles of H =
    n_haplotypes haplotypes at each site in np.packbits' order, as the
    panel keeps its records. Right to left if `reverse` (the index's site
    j is then packed's t - 1 - j). The order (t+1, H): order[j] the
    haplotypes sorted by their reversed alleles before site j, read with
    _order_at: the low 16 bits of order[j, i] in order_low
    (t+1, H) uint16, the rest packed in order_high (t+1, ceil(H b / 8))
    uint8, b = _high_bits(H) bits for each (b = 0 up to 65,536
    haplotypes). allele_words (t, H // 64 + 1) uint64: bit k of word w of
    row j the allele at site j of order[j, 64 w + k]; word_zeros (t, H //
    64 + 1) int32: the 0 alleles at site j among order[j, :64 w]. _zeros_before
    counts from the two what a (t, H + 1) table of counts would hold. Each
    direction takes 2.2 bytes per site and haplotype up to 65,536
    haplotypes (32,768 samples), 2.3 up to 131,072 and 2.4 up to 262,144
    (TOPMed's 97,000 samples), where a 32-bit order would take 4.2: the
    index is most of the engine's memory at large panels."""
    index = _empty_index(len(packed), n_haplotypes)
    _fill_pbwt(packed, reverse, *index)
    return index


def pbwt_indexes(packed: np.ndarray, n_haplotypes: int) -> tuple[tuple, tuple]:
    """(pbwt_index(packed, H), pbwt_index(packed, H, reverse=True)), built
    side by side on two threads where there are two: each is one walk over
    every site and haplotype, which does not split across threads as it
    stands (at 16,000 samples over 10 Mb, the two took 3.3 s one after the
    other). Built from the packed records, not their alleles as bytes,
    which would take 1.2 GB more for a 6,000-site segment at 100,000 samples."""
    forward, backward = _empty_index(len(packed), n_haplotypes), _empty_index(len(packed), n_haplotypes)
    _fill_both(packed, *forward, *backward)
    return forward, backward


def _high_bits(n: int) -> int:
    """_order_high_bits(n), for at most MAX_HAPLOTYPES haplotypes."""
    if n > MAX_HAPLOTYPES:
        raise ValueError(f"PBWT index: expected at most {MAX_HAPLOTYPES:,} haplotypes; found {n:,}")
    return _order_high_bits(n)


@nb.njit(cache=True)
def _order_high_bits(n):
    """Bits above the low 16 that number n haplotypes: 0, 1, 2, 4 or 8 (a
    whole number of them in a byte)."""
    bits = 0
    while n > 1 << (16 + bits):
        bits = 2 * bits if bits else 1
    return bits


def _empty_index(t: int, n: int) -> tuple[np.ndarray, ...]:
    # word_zeros int32 at every size (a 32nd of a byte per site and haplotype more than uint16 below 65,535
    # haplotypes): one type for every panel, so numba compiles the walks once, not again for the first large panel
    words = n // 64 + 1
    return (np.empty((t + 1, n), dtype=np.uint16), np.zeros((t + 1, (n * _high_bits(n) + 7) // 8), dtype=np.uint8),
            np.zeros((t, words), dtype=np.uint64), np.zeros((t, words), dtype=np.int32))


@nb.njit(cache=True)
def _order_at(order_low, order_high, bits, j, i):
    """order[j, i] of a pbwt_index (bits: _order_high_bits(H)): its low 16 bits,
    and the high ones from bits b i .. b i + b - 1 of row j of order_high."""
    h = np.int64(order_low[j, i])
    if bits == 0:
        return h
    at = i * bits
    return h | (np.int64(order_high[j, at >> 3] >> (at & 7)) & ((1 << bits) - 1)) << 16


@nb.njit(cache=True)
def _set_order_row(order_low, order_high, j, row):
    """Write row (H,) as order[j] of a pbwt_index (order_high's row j zeros)."""
    bits = _order_high_bits(len(row))
    for i in range(len(row)):
        order_low[j, i] = row[i] & 0xFFFF
        if bits:
            at = i * bits
            order_high[j, at >> 3] |= np.uint8((row[i] >> 16) << (at & 7))


@nb.njit(cache=True)
def _allele(packed_row, h):
    """The allele of haplotype h in a record packed in np.packbits' order (the highest bit first)."""
    return (packed_row[h >> 3] >> (7 - (h & 7))) & 1


@nb.njit(cache=True, parallel=True)
def _fill_both(packed, order_low, order_high, allele_words, word_zeros,
               reverse_low, reverse_high, reverse_words, reverse_zeros):
    for direction in nb.prange(2):
        if direction == 0:
            _fill_pbwt(packed, False, order_low, order_high, allele_words, word_zeros)
        else:
            _fill_pbwt(packed, True, reverse_low, reverse_high, reverse_words, reverse_zeros)


@nb.njit(cache=True)
def _fill_pbwt(packed, reverse, order_low, order_high, allele_words, word_zeros):
    """pbwt_index's arrays (order_high, allele_words all 0), filled in. The
    partition reads and writes two rows of whole numbers, each then stored
    split, and takes each allele from the row of allele_words just written
    (in place order), not from the packed record again."""
    t, n = len(packed), order_low.shape[1]
    current, following = np.arange(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    _set_order_row(order_low, order_high, 0, current)
    for j in range(t):
        row = packed[t - 1 - j if reverse else j]
        zeros = 0
        for i in range(n):
            if i & 63 == 0:
                word_zeros[j, i >> 6] = zeros
            if _allele(row, current[i]) == 0:
                zeros += 1
            else:
                allele_words[j, i >> 6] |= np.uint64(1) << np.uint64(i & 63)
        if n & 63 == 0:
            word_zeros[j, n >> 6] = zeros
        low, high = 0, zeros
        for i in range(n):
            h = current[i]
            if (allele_words[j, i >> 6] >> np.uint64(i & 63)) & np.uint64(1) == 0:
                following[low] = h
                low += 1
            else:
                following[high] = h
                high += 1
        current, following = following, current
        _set_order_row(order_low, order_high, j + 1, current)


@nb.njit(cache=True, parallel=True)
def _transposed(alleles):
    """alleles (t, H) as (H, t), in tiles that stay in cache: numpy's
    transposing copy took a second for a segment of 4,000 sites and 32,000
    haplotypes, most of it cache misses."""
    t, n = alleles.shape
    out = np.empty((n, t), dtype=alleles.dtype)
    tile = 64
    for first_h in nb.prange((n + tile - 1) // tile):
        h0 = first_h * tile
        for j0 in range(0, t, tile):
            for h in range(h0, min(n, h0 + tile)):
                for j in range(j0, min(t, j0 + tile)):
                    out[h, j] = alleles[j, h]
    return out


def _packed_by_haplotype(packed: np.ndarray, n_haplotypes: int) -> np.ndarray:
    """The alleles of packed (t, ceil(H / 8)) records (as pbwt_index reads
    them) as (H, ceil(t / 64)) uint64, site j bit j % 64 of word j // 64:
    the table the states' alleles are gathered from (_state_alleles)."""
    return _transposed(_packed_sites(packed, n_haplotypes)).view(np.uint64)


@nb.njit(cache=True, parallel=True)
def _packed_sites(packed, n):
    """(8 ceil(t / 64), n) uint8: the alleles of packed (t, ceil(n / 8))
    records with sites 8 r .. 8 r + 7 in the bits of row r, site j bit j %
    8 (the rows past the last site 0)."""
    t = len(packed)
    out = np.zeros((8 * ((t + 63) // 64), n), dtype=np.uint8)
    for row in nb.prange((t + 7) // 8):
        for j in range(8 * row, min(t, 8 * row + 8)):
            bit = np.uint8(j & 7)
            for h in range(n):
                out[row, h] |= np.uint8(_allele(packed[j], h)) << bit
    return out


@nb.njit(cache=True)
def _ones(word):
    """The 1 bits of a uint64 (a SWAR count, which LLVM compiles to one popcount)."""
    word = word - ((word >> np.uint64(1)) & np.uint64(0x5555555555555555))
    word = (word & np.uint64(0x3333333333333333)) + ((word >> np.uint64(2)) & np.uint64(0x3333333333333333))
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((word * np.uint64(0x0101010101010101)) >> np.uint64(56))


@nb.njit(cache=True)
def _zeros_before(allele_words, word_zeros, j, i):
    """The 0 alleles at site j among order[j, :i] of a pbwt_index (0 <= i <= H)."""
    w, k = i >> 6, i & 63
    below = allele_words[j, w] & ((np.uint64(1) << np.uint64(k)) - np.uint64(1))
    return np.int64(word_zeros[j, w]) + k - _ones(below)


@nb.njit(cache=True)
def _walk(index, queries, columns, first, last, reverse, neighbours, every, excluded, sightings, offset):
    """For each query g of queries[:, columns] (t, Q), write to
    sightings[g, site // every, offset:offset + 2 neighbours] the haplotypes
    within `neighbours` of its place in the PBWT order at each typed site of
    [first, last) that is a multiple of `every` (-1 where fewer); excluded[g]
    (a sample index, or -1) is never written. The queries walk together,
    site by site, through every site: each row of the index is read once
    for all of them (one at a time, every row was a cache miss for each),
    and in the order of their places, so that the row of
    the order is read forwards: visited in their own order, groups of 128
    took 0.29 ms per haplotype against 0.22-0.24 at 16,000 samples (1 Mb),
    and 2.11 against 1.69 on a 4,000-site segment (BENCHMARKS.md, stop
    53). index: pbwt_index's arrays, of the sites right to left if
    `reverse` (its site j is the queries' t - 1 - j)."""
    order_low, order_high, allele_words, word_zeros = index
    n, t, n_queries = order_low.shape[1], queries.shape[0], len(columns)
    bits = _order_high_bits(n)
    place = np.zeros(n_queries, dtype=np.int64)
    alleles = np.empty(n_queries, dtype=np.int64)
    # the queries by place, kept sorted as the PBWT keeps the panel's haplotypes: a stable partition on the
    # allele each query takes
    by_place, partitioned = np.arange(n_queries), np.empty(n_queries, dtype=np.int64)
    for j in range(first, last):
        site = t - 1 - j if reverse else j
        zeros = _zeros_before(allele_words, word_zeros, j, n)
        for g in range(n_queries):
            allele = np.int64(queries[site, columns[g]])
            if allele < 0:  # a missing call follows the neighbour just above
                above = min(place[g], n - 1)
                allele = np.int64((allele_words[j, above >> 6] >> np.uint64(above & 63)) & np.uint64(1))
            below = _zeros_before(allele_words, word_zeros, j, place[g])
            place[g] = below if allele == 0 else zeros + place[g] - below
            alleles[g] = allele
        _stable_partition(by_place, alleles, partitioned)
        by_place, partitioned = partitioned, by_place
        if site % every:
            continue
        for g in by_place:
            out = sightings[g, site // every, offset:offset + 2 * neighbours]
            written = 0
            for i in range(max(0, place[g] - neighbours), min(n, place[g] + neighbours)):
                h = _order_at(order_low, order_high, bits, j + 1, i)
                if h // 2 != excluded[g]:
                    out[written] = h
                    written += 1
            out[written:] = -1


@nb.njit(cache=True)
def _stable_partition(items, keys, out):
    """items with key 0 (keys[item]), then those with key 1, each in their order, into out."""
    k = 0
    for key in range(2):
        for item in items:
            if keys[item] == key:
                out[k] = item
                k += 1


@nb.njit(cache=True)
def _sightings(forward_index, backward_index, queries, columns, neighbours, every, excluded):
    """(G, sighted_sites(t, every), 4 neighbours) the haplotypes sharing the
    longest runs of alleles with each query of queries[:, columns] (t, Q)
    ending at every `every`-th typed site from the first (a PBWT of the
    sites left to right), then those starting there (right to left); -1
    pads."""
    t = queries.shape[0]
    sightings = np.empty((len(columns), sighted_sites(t, every), 4 * neighbours), dtype=np.int32)
    _walk(forward_index, queries, columns, 0, t, False, neighbours, every, excluded, sightings, 0)
    _walk(backward_index, queries, columns, 0, t, True, neighbours, every, excluded, sightings, 2 * neighbours)
    return sightings


@nb.njit(cache=True)
def sighted_sites(n_sites, every):
    """How many of n_sites typed sites take sightings, every `every`-th from the first."""
    return (n_sites + every - 1) // every


@nb.njit(cache=True)
def _heap_push(heap, size, key):
    """Push key onto the min-heap heap[:size]; the new size."""
    i = size
    heap[i] = key
    while i > 0 and heap[(i - 1) // 2] > heap[i]:
        parent = (i - 1) // 2
        heap[i], heap[parent] = heap[parent], heap[i]
        i = parent
    return size + 1


@nb.njit(cache=True)
def _heap_pop(heap, size):
    """(smallest key of the min-heap heap[:size], the new size)."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        smallest, left, right = i, 2 * i + 1, 2 * i + 2
        if left < size and heap[left] < heap[smallest]:
            smallest = left
        if right < size and heap[right] < heap[smallest]:
            smallest = right
        if smallest == i:
            return top, size
        heap[i], heap[smallest] = heap[smallest], heap[i]
        i = smallest


@nb.njit(cache=True)
def _stalest_slot(heap, size, slot_seen, n_slots):
    """(the slot whose haplotype was sighted longest ago, ties to the lower
    slot; the heap's new size). The heap holds keys seen * n_slots + slot,
    some stale (the slot sighted again since): those are pushed back with
    the slot's last sighting."""
    while True:
        key, size = _heap_pop(heap, size)
        slot, seen = key % n_slots, key // n_slots
        if seen == slot_seen[slot]:
            return slot, size
        size = _heap_push(heap, size, slot_seen[slot] * n_slots + slot)


@nb.njit(cache=True)
def _composite_states(sightings, every, t, max_states, slot_of, segments, heap):
    """(segments (4, S): slot, first site, end site (exclusive), haplotype;
    the number of slots) of a query's composite copying states, as Beagle 5
    builds its composite reference haplotypes: each of at most `max_states`
    slots copies one panel haplotype at a time, and a haplotype sighted
    (sightings (sighted_sites(t, every), w) at every `every`-th of t typed
    sites, -1 padded) when in no slot takes the slot sighted
    longest ago, from halfway between that slot's last sighting and this
    one. So every stretch of the segment has the haplotypes matching the
    query there, where one set for the whole segment kept those matching
    most often. Scratch, reused from query to query: slot_of (H,) int32
    all -1, left so; segments (4, >= sightings.size + max_states) and heap
    (>= sightings.size) int64."""
    n_slots = max_states
    slot_hap = np.full(n_slots, -1, dtype=np.int64)
    slot_seen = np.zeros(n_slots, dtype=np.int64)
    slot_segment = np.zeros(n_slots, dtype=np.int64)
    used, n_segments, size = 0, 0, 0
    for row in range(sightings.shape[0]):
        j = row * every
        for h in sightings[row]:
            if h < 0:
                continue
            slot = slot_of[h]
            if slot >= 0 and slot_hap[slot] == h:
                slot_seen[slot] = j
                continue
            if used < n_slots:
                slot, start = used, 0
                used += 1
            else:
                slot, size = _stalest_slot(heap, size, slot_seen, n_slots)
                start = (slot_seen[slot] + 1 + j) // 2
                segments[2, slot_segment[slot]] = start
            segments[0, n_segments], segments[1, n_segments], segments[3, n_segments] = slot, start, h
            slot_segment[slot], slot_hap[slot], slot_seen[slot], slot_of[h] = n_segments, h, j, slot
            n_segments += 1
            size = _heap_push(heap, size, j * n_slots + slot)
    for slot in range(used):
        segments[2, slot_segment[slot]] = t
    for e in range(n_segments):
        slot_of[segments[3, e]] = -1
    return segments[:, :n_segments], used


@nb.njit(cache=True)
def _state_alleles(haplotype_words, segments, n_states, last):
    """(last, K) the composite states' alleles at typed sites [0, last),
    gathered once for the forward and the backward sweeps from
    haplotype_words (H, words) (_packed_by_haplotype). Each segment is
    copied whole, word by word, into a state-major table of bits, which
    _bits_to_bytes spreads into the (sites, states) table of bytes the
    sweeps read. From a (H, sites) table of bytes, reading the segments'
    runs took most of this stage's time on a 4,000-site segment of 16,000
    samples (2.6 of 3.2 ms per haplotype): 128 MB, four times the L3
    cache, against 16 MB of bits (BENCHMARKS.md, stop 53)."""
    rows, words = (n_states + 7) // 8 * 8, (last + 63) // 64  # the padding is never read
    by_state = np.empty((rows, words), dtype=np.uint64)
    for e in range(segments.shape[1]):
        slot, start, end, h = segments[0, e], segments[1, e], segments[2, e], segments[3, e]
        for w in range(start >> 6, (end + 63) >> 6):
            mask = _ALL_BITS
            if w == start >> 6:
                mask &= _ALL_BITS << np.uint64(start & 63)
            if w == end >> 6:
                mask &= ~(_ALL_BITS << np.uint64(end & 63))
            by_state[slot, w] = (by_state[slot, w] & ~mask) | (haplotype_words[h, w] & mask)
    by_site = np.empty((64 * words, rows), dtype=np.uint8)
    _bits_to_bytes(by_state, by_site.view(np.uint64))
    if rows == n_states:  # the padded sites drop off as a contiguous view
        return by_site[:last]
    return by_site[:last, :n_states].copy()


@nb.njit(cache=True, inline="always")
def _swap_bytes(a, b, shift, mask):
    """Words a and b with the bits of a that `mask` << `shift` covers
    exchanged for those of b that `mask` covers."""
    t = ((a >> shift) ^ b) & mask
    return a ^ (t << shift), b ^ t


@nb.njit(cache=True, inline="always")
def _swap_pairs(a, b, c, d, e, f, g, h, shift, mask):
    """_swap_bytes of (a, b), (c, d), (e, f) and (g, h)."""
    a, b = _swap_bytes(a, b, shift, mask)
    c, d = _swap_bytes(c, d, shift, mask)
    e, f = _swap_bytes(e, f, shift, mask)
    g, h = _swap_bytes(g, h, shift, mask)
    return a, b, c, d, e, f, g, h


@nb.njit(cache=True, inline="always")
def _swap_within(x, shift, mask):
    """x with the bits that `mask` covers exchanged for those `shift` above them."""
    t = ((x >> shift) ^ x) & mask
    return x ^ t ^ (t << shift)


@nb.njit(cache=True, inline="always")
def _transpose_bits(x):
    """The 8 x 8 bit matrix x (bit 8 r + c its row r, column c)
    transposed, in three rounds that swap 2 x 2, then 4 x 4, then 8 x 8
    blocks' off-diagonal quarters (Warren, Hacker's Delight, 7-3)."""
    x = _swap_within(x, _SEVEN, _BITS_2X2)
    x = _swap_within(x, _FOURTEEN, _BITS_4X4)
    return _swap_within(x, _TWENTY_EIGHT, _BITS_8X8)


_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)
_EVEN_BYTES, _EVEN_PAIRS, _LOW_HALF = np.uint64(0x00FF00FF00FF00FF), np.uint64(0x0000FFFF0000FFFF), \
    np.uint64(0x00000000FFFFFFFF)
_BITS_2X2, _BITS_4X4, _BITS_8X8 = np.uint64(0x00AA00AA00AA00AA), np.uint64(0x0000CCCC0000CCCC), \
    np.uint64(0x00000000F0F0F0F0)
_BYTE, _PAIR, _HALF = np.uint64(8), np.uint64(16), np.uint64(32)
_SEVEN, _FOURTEEN, _TWENTY_EIGHT = np.uint64(7), np.uint64(14), np.uint64(28)
# byte b of _SPREAD[v] is bit b of v: 8 bits, one per state, as the 8 bytes of the sweeps' table
_SPREAD = np.array([sum(((v >> b) & 1) << (8 * b) for b in range(8)) for v in range(256)], dtype=np.uint64)


@nb.njit(cache=True)
def _bits_to_bytes(by_state, out):
    """out (64 W, R / 8), a uint64 view of the (sites, states) bytes, from
    by_state (R, W) bits (site j bit j % 64 of word j // 64), R a multiple
    of 8. Each 8 states x 64 sites block is read as 8 words, its bytes
    transposed in three rounds that swap bytes, then pairs, then halves
    between words 1, 2 and 4 apart, so that word i holds the 8 states'
    sites 8 i .. 8 i + 7; each of those is a bit transpose away from a
    byte per site, which _SPREAD makes a word. Little-endian byte order, as
    on every machine numba runs on."""
    for w in range(by_state.shape[1]):
        for g in range(by_state.shape[0] // 8):
            r = 8 * g
            w0, w1, w2, w3 = by_state[r, w], by_state[r + 1, w], by_state[r + 2, w], by_state[r + 3, w]
            w4, w5, w6, w7 = by_state[r + 4, w], by_state[r + 5, w], by_state[r + 6, w], by_state[r + 7, w]
            w0, w1, w2, w3, w4, w5, w6, w7 = _swap_pairs(w0, w1, w2, w3, w4, w5, w6, w7, _BYTE, _EVEN_BYTES)
            w0, w2, w1, w3, w4, w6, w5, w7 = _swap_pairs(w0, w2, w1, w3, w4, w6, w5, w7, _PAIR, _EVEN_PAIRS)
            w0, w4, w1, w5, w2, w6, w3, w7 = _swap_pairs(w0, w4, w1, w5, w2, w6, w3, w7, _HALF, _LOW_HALF)
            site = 64 * w
            for x in (w0, w1, w2, w3, w4, w5, w6, w7):
                x = _transpose_bits(x)
                for k in range(8):
                    out[site + k, g] = _SPREAD[(x >> np.uint64(8 * k)) & np.uint64(255)]
                site += 8


@nb.njit(cache=True)
def _emission(call, error):
    """(P(call | a state copying the same allele), P(call | one copying the
    other)): both 1 with no call."""
    if call < 0:
        return np.float32(1.0), np.float32(1.0)
    return np.float32(1.0 - error), np.float32(error)


@nb.njit(cache=True, fastmath=FAST)
def _forward(state_alleles, query, jump_rate, error, lo, hi):
    """(hi - lo, K) forward probabilities at typed sites lo .. hi - 1, each
    row in proportion to the normalised ones (the sweep starts at site 0
    and stops there). Each site's step is one loop over the states: it
    divides the last row by its sum as it reads it, in the stay
    probability: with loops of their own to normalise and copy each row,
    and the backward sweep's likewise, the forward-backward took 0.62 ms
    per haplotype against 0.17 (16,000 samples, 800 states)."""
    k = state_alleles.shape[1]
    out = np.empty((hi - lo, k), dtype=np.float32)
    scratch = np.zeros((2, k), dtype=np.float32)  # the rows before lo
    previous, total = scratch[1], np.float32(1.0)
    for i in range(hi):
        match, mismatch = _emission(query[i], error)
        call, alleles = query[i], state_alleles[i]
        stay, jump = (np.float32(0.0), np.float32(1.0 / k)) if i == 0 else \
            (np.float32((1.0 - jump_rate[i - 1]) / total), np.float32(jump_rate[i - 1] / k))
        current = out[i - lo] if i >= lo else scratch[i & 1]
        total = np.float32(0.0)
        for s in range(k):
            current[s] = (stay * previous[s] + jump) * (match if alleles[s] == call else mismatch)
            total += current[s]
        previous = current
    return out



@nb.njit(cache=True, parallel=True)
def _scan_minor(whole, words, whole_at, starts, positions, first, n_haplotypes, minor_is_alt, cursor, hap_records,
                n_strips):
    """Advance cursor[h] once for each record r (numbered from `first`)
    whose minor allele haplotype h carries, records ascending, first writing
    r to hap_records[cursor[h]] unless hap_records is empty (a count).
    A record is whole, row whole_at[r] of whole (its packed row, zero-padded
    to whole words; words: the same memory as uint64, each checked whole
    first, as most words of a rare record hold none of its carriers), or
    listed (whole_at[r] < 0) as the carriers of its minor allele,
    positions[starts[r]:starts[r + 1]] (genimpute.io.sparse_rows; a REF
    list holds the row's padding too, at n_haplotypes or past it, which
    no strip takes). Each of n_strips threads takes its own strip of
    haplotypes and fills their lists: the lists are disjoint, so the output
    is the same for any n_strips, and the writes, scattered over every
    haplotype's list, are most of the time."""
    n_words = words.shape[1]
    width = (n_words + n_strips - 1) // n_strips
    for strip in nb.prange(n_strips):
        low, high = strip * width * 64, min(n_haplotypes, (strip + 1) * width * 64)
        for r in range(len(whole_at)):
            if whole_at[r] < 0:
                for h in positions[starts[r]:starts[r + 1]]:
                    if low <= h < high:  # at or past n_haplotypes: padding
                        _note_carrier(cursor, hap_records, h, first + r)
                continue
            row = whole_at[r]
            flip = 0 if minor_is_alt[r] else 255
            none_carry = np.uint64(0) if minor_is_alt[r] else ~np.uint64(0)
            for w in range(strip * width, min(n_words, (strip + 1) * width)):
                if words[row, w] == none_carry:
                    continue
                for byte in range(8 * w, 8 * w + 8):
                    value = whole[row, byte] ^ flip
                    for k in range(ONES_IN_BYTE[value]):
                        h = byte * 8 + SET_BITS[value, k]
                        if h < n_haplotypes:  # past the last haplotype: padding
                            _note_carrier(cursor, hap_records, h, first + r)


@nb.njit(cache=True)
def _note_carrier(cursor, hap_records, h, record):
    if len(hap_records):
        hap_records[cursor[h]] = record
    cursor[h] += 1


def minor_alleles(blocks, n_haplotypes, minor_is_alt, n_strips):
    """(hap_starts (H + 1,), hap_records, alt_major) of records (blocks():
    their RowParts (genimpute.io.sparse_rows), block after block;
    minor_is_alt: which allele of each is the minor one): the records whose
    minor allele haplotype h carries, hap_records[hap_starts[h]:hap_starts[h + 1]]
    ascending, and the records whose minor allele is REF (numbered in that order).

    A haplotype carries the minor allele of a few hundred records per Mb
    whatever the panel's size (the sum of their frequencies), so summing a
    query's states over their own lists reads a few hundred entries per
    state and Mb, where reading every record grows with the panel's records
    (2.3 times as many at 16,000 samples as at 1,000, most of them rare).
    The records are read twice, a block at a time (to count, then to
    fill): bit-packed, a segment's untyped records take 0.3 GB at 16,000
    samples and would take several GB at 100,000. The lists are built in
    n_strips threads (_scan_minor)."""
    counts = np.zeros(n_haplotypes, dtype=np.int64)
    for first, parts in _numbered(blocks()):
        _scan_minor(*_scanned(parts, minor_is_alt[first:first + len(parts.whole_at)]), first, n_haplotypes,
                    minor_is_alt[first:], counts, np.empty(0, dtype=np.int32), n_strips)
    hap_starts = np.zeros(n_haplotypes + 1, dtype=np.int64)
    hap_starts[1:] = np.cumsum(counts)
    hap_records = np.empty(hap_starts[n_haplotypes], dtype=np.int32)
    cursor = hap_starts[:-1].copy()
    for first, parts in _numbered(blocks()):
        _scan_minor(*_scanned(parts, minor_is_alt[first:first + len(parts.whole_at)]), first, n_haplotypes,
                    minor_is_alt[first:], cursor, hap_records, n_strips)
    return hap_starts, hap_records, np.flatnonzero(~minor_is_alt)


def _scanned(parts, minor_is_alt: np.ndarray) -> tuple:
    """_scan_minor's view of RowParts: (whole rows padded to words, the
    same as uint64, whole_at, starts, positions), once each listed record
    is found to list its minor allele's carriers, as SparseRows lists a
    rare record's (a row listed by its other allele would need them all)."""
    listed = parts.whole_at < 0
    if np.any(parts.ones_listed[listed] != minor_is_alt[listed]):
        raise ValueError("expected each listed record to list its minor allele's carriers; found one that lists "
                         "its major allele's")
    return *_as_words(parts.whole), parts.whole_at, parts.starts, parts.positions


def _as_words(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(block's packed rows zero-padded to whole uint64 words, C-contiguous;
    the same memory as uint64)."""
    if block.shape[1] % 8:
        block = np.pad(block, ((0, 0), (0, -block.shape[1] % 8)))
    block = np.ascontiguousarray(block)
    return block, block.view(np.uint64)


def _numbered(blocks):
    """(the number of rows before it, parts) of each block's RowParts."""
    first = 0
    for parts in blocks:
        yield first, parts
        first += len(parts.whole_at)


@nb.njit(cache=True)
def _sides(gap, last):
    """The typed sites whose posteriors gap `gap` interpolates between:
    those either side of it, or its one neighbour before the first typed
    site, after the last, and after the forward-backward's last (`last` - 1)."""
    return max(gap - 1, 0), min(gap, last - 1)


@nb.njit(cache=True, fastmath=FAST)
def _add_sides(out_column, r, record_gap, weights, posterior, lo, slot, start, end, last):
    """Add to record r's P(minor) the state's posterior at each typed site
    either side of it (_sides) that lies in [start, end), weighted
    (posterior's rows: typed sites lo ..)."""
    left, right = _sides(record_gap[r], last)
    if start <= left < end:
        out_column[r] += (1 - weights[r]) * posterior[left - lo, slot]
    if start <= right < end:
        out_column[r] += weights[r] * posterior[right - lo, slot]


@nb.njit(cache=True, fastmath=FAST)
def _block_maxima(posterior):
    """(ceil(sites / MAXIMA_BLOCK), K) each state's largest posterior in
    each block of MAXIMA_BLOCK typed sites."""
    n, k = posterior.shape
    out = np.zeros(((n + MAXIMA_BLOCK - 1) // MAXIMA_BLOCK, k), dtype=np.float32)
    for i in range(n):
        row = out[i // MAXIMA_BLOCK]
        for s in range(k):
            row[s] = max(row[s], posterior[i, s])
    return out


@nb.njit(cache=True)
def _negligible(maxima, slot, first, last, floor):
    """Whether the state's posterior stays below `floor` in the blocks of
    MAXIMA_BLOCK rows that hold rows [first, last] of the posteriors (none,
    if last < first): a block's rows beyond them can keep it, never skip it."""
    if last < first:
        return True
    for b in range(first // MAXIMA_BLOCK, last // MAXIMA_BLOCK + 1):
        if maxima[b, slot] >= floor:
            return False
    return True


@nb.njit(cache=True, fastmath=FAST)
def _impute_untyped(untyped, segments, posterior, lo, last, floor, out_column):
    """Write each untyped record's P(alt) to out_column (zeros): the
    posteriors (rows: typed sites lo .., as far as the records read) at the
    typed sites either side (_sides), interpolated by the record's weight (0
    at the left site, 1 at the right), summed over the states that carry
    its minor allele (minor_alleles) at that site (a composite state may
    copy another haplotype at each), and taken from 1 where that allele is
    REF. A state's segment is skipped where its posterior stays below
    `floor` (CopyingSettings.posterior_floor) from the typed site before
    the segment to the one after it, of those the posteriors hold (all the
    sites its records read, and two more), and each record's sum is divided
    by the posterior of the states it kept (_kept_posterior): the
    skipped states are taken to carry the minor allele as often as the kept
    ones do."""
    weights, record_gap, gap_first, hap_starts, hap_records, alt_major = untyped[1:]
    maxima = _block_maxima(posterior)
    kept = np.empty(segments.shape[1], dtype=np.bool_)
    for e in range(segments.shape[1]):
        slot, start, end, h = segments[0, e], segments[1, e], segments[2, e], segments[3, e]
        kept[e] = not _negligible(maxima, slot, max(start - 1, lo) - lo, min(end, lo + len(posterior) - 1) - lo,
                                  floor)
        if not kept[e]:
            continue
        low, high = hap_starts[h], hap_starts[h + 1]
        i = low + np.searchsorted(hap_records[low:high], gap_first[start])
        # gap `start`, where the left site may be another state's: its records one by one
        while i < high and hap_records[i] < gap_first[start + 1]:
            _add_sides(out_column, hap_records[i], record_gap, weights, posterior, lo, slot, start, end, last)
            i += 1
        # gaps start + 1 .. end - 1, both sites in the segment: the bulk, with no tests
        while i < high and hap_records[i] < gap_first[end]:
            r = hap_records[i]
            left, right = _sides(record_gap[r], last)
            out_column[r] += (1 - weights[r]) * posterior[left - lo, slot] + weights[r] * posterior[right - lo, slot]
            i += 1
        # gap `end`, where the right site may be another state's
        while i < high and hap_records[i] < gap_first[end + 1]:
            _add_sides(out_column, hap_records[i], record_gap, weights, posterior, lo, slot, start, end, last)
            i += 1
    if not kept.all():
        kept_posterior = _kept_posterior(segments, kept, posterior, lo)
        for r in range(len(out_column)):
            left, right = _sides(record_gap[r], last)
            kept_share = (1 - weights[r]) * kept_posterior[left - lo] + weights[r] * kept_posterior[right - lo]
            if kept_share > 0:
                out_column[r] /= kept_share
    for i in range(len(alt_major)):  # the sums were of REF: the states sum to 1 at each site
        out_column[alt_major[i]] = 1 - out_column[alt_major[i]]


@nb.njit(cache=True, fastmath=FAST)
def _kept_posterior(segments, kept, posterior, lo):
    """(rows,) the posterior at each row of `posterior` (typed sites lo ..)
    of the states whose segment there is `kept`, walked down the kept
    segments' columns. They hold a small part of the posterior: at 16,000
    samples, 133,000 of a haplotype's cells on a 4,000-site segment of 10
    Mb, against 296,000 in the skipped segments of states kept elsewhere.
    Summing the skipped ones instead (those, and a masked pass over every
    row for the states skipped everywhere) took 0.8 of the records' 1.5 ms
    per haplotype there (BENCHMARKS.md, stop 53)."""
    rows = posterior.shape[0]
    out = np.zeros(rows, dtype=np.float32)
    for e in range(segments.shape[1]):
        if not kept[e]:
            continue
        slot = segments[0, e]
        for j in range(max(segments[1, e], lo), min(segments[2, e], lo + rows)):
            out[j - lo] += posterior[j - lo, slot]
    return out


@nb.njit(cache=True, fastmath=FAST)
def _posteriors(state_alleles, query, jump_rate, error, lo, hi):
    """(hi - lo, K) normalised posteriors at typed sites lo .. hi - 1 of a
    forward-backward over all the sites of state_alleles: the backward
    sweep turns the forward probabilities into them in place, in the loop
    that steps it (its own sum folded into the next step's stay
    probability, as _forward's). Those are the sites a segment's core
    reads; its margins only carry the sweeps to it, the forward one's from
    the left, the backward one's from the right, so neither sweeps the far
    margin (the margins are as long as the core at 16,000 samples)."""
    n, k = state_alleles.shape
    posterior = _forward(state_alleles, query, jump_rate, error, lo, hi)
    if hi <= lo:
        return posterior
    backward = np.ones(k, dtype=np.float32)
    for i in range(n - 1, lo - 1, -1):
        # the row is taken on every step, past hi too (unused there): taken in the branches that use it, the
        # sweep took three times as long
        row = posterior[min(i, hi - 1) - lo]
        total = np.float32(0.0)
        if i < n - 1:  # backward to site i from site i + 1
            match, mismatch = _emission(query[i + 1], error)
            call, alleles = query[i + 1], state_alleles[i + 1]
            weighed = np.float32(0.0)
            for s in range(k):
                backward[s] *= match if alleles[s] == call else mismatch
                weighed += backward[s]
            stay, jump = np.float32((1.0 - jump_rate[i]) / weighed), np.float32(jump_rate[i] / k)
            if i < hi:
                for s in range(k):
                    backward[s] = stay * backward[s] + jump
                    row[s] *= backward[s]
                    total += row[s]
            else:
                for s in range(k):
                    backward[s] = stay * backward[s] + jump
        elif i < hi:
            for s in range(k):
                total += row[s]
        if i < hi:
            scale = np.float32(1.0) / total
            for s in range(k):
                row[s] *= scale
    return posterior


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


@nb.njit(cache=True)
def switch_probabilities(jump_cm, switch_cm):
    """The probability of switching state between neighbouring typed sites
    jump_cm cM apart, the model switching once per switch_cm cM on average
    (CopyingSettings.switch_cm: as Li and Stephens', rarer the more
    haplotypes the panel has to copy from)."""
    return -np.expm1(-jump_cm / switch_cm)


def selection_group(n_queries: int, n_sites: int, neighbours: int, n_threads: int) -> int:
    """How many queries choose their states together: SELECTION_GROUP, fewer
    where their sightings (4 neighbours int32 per query and sighted site) would
    take more than SIGHTINGS_BYTES, and fewer where a small cohort would
    leave a thread without a group. No query's output depends on it."""
    fitting = SIGHTINGS_BYTES // max(1, 16 * neighbours * n_sites)
    return max(1, min(SELECTION_GROUP, fitting, (n_queries + n_threads - 1) // n_threads))


@nb.njit(cache=True, parallel=True)
def _impute_segment(queries, excluded, forward_index, backward_index, haplotype_words, core_first, core_last,
                    jump_cm, passes, every, switch_cm, error, floor, untyped, size):
    """((len(records), Q), (core_last - core_first, Q)) P(alt) of Q query
    haplotypes (queries (t, Q) int8, the segment's typed sites) at the
    untyped records of untyped[0] (none if it is empty) and at the typed
    sites of the core where a query has no call (NaN at the others): the
    mean over `passes` (P, 2) int64, each a forward-backward over the
    composite states from (neighbours, max states), the neighbours sighted
    at every `every`-th typed site. The typed output spans
    the core, not the contig: (Q, t) for every segment cost 0.5 GB and its
    filling for a batch of 1,000 samples on a contig of 60,000 typed sites.
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
        from sites it would still weigh: on 300 held-out samples of a 3 Mb,
        16,000-sample panel, 200 sites either side (0.5 cM; the model
        switches once per 2.7 cM there) left the error of MAF [0.001, 0.01)
        15-18% above that of one forward-backward over the whole region
        (BENCHMARKS.md)."""
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
        contig's index and alleles take 4.5 bytes per typed site and
        haplotype up to 32,768 samples, 4.75 up to 65,536 and 5.0 up to
        131,072 samples (5.8 GB for 40,000 sites of 16,000 samples), a
        segment's a few percent of that.
        The untyped tables are kept likewise: at 16,000 samples one
        segment's take 0.5-0.9 s to build, which every batch would repeat,
        and about 0.1 GB (a few hundred records per Mb for each haplotype)."""
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
        return *pbwt_indexes(packed, n), _packed_by_haplotype(packed, n)

    def _untyped_tables(self, start: int, stop: int, first: int) -> tuple:
        """The untyped records start..stop - 1 as _impute_segment reads them:
        (records, weights, each one's gap in the numbering of typed sites
        from `first`, the first record in each of those gaps or after,
        *minor_alleles)."""
        local_bounds = np.clip(self.gap_bounds - start, 0, stop - start).astype(np.int64)
        records = self.untyped_rows[start:stop].astype(np.int64)
        record_gap = np.repeat(np.arange(len(local_bounds) - 1), np.diff(local_bounds)) - first
        # the panel's alt frequency is its alt count / H in float32: exactly 0.5, or at least 1 / (2H) from it,
        # which float32 keeps apart below 16 million haplotypes; so the minor allele needs no count of its own
        minor_is_alt = self.panel.alt_freq[records] <= 0.5
        gap_first = np.searchsorted(record_gap, np.arange(len(self.typed_rows) - first + 2))
        return (records, self.weights[start:stop], record_gap, gap_first,
                *minor_alleles(lambda: parts_in_blocks(self.panel.packed, records, PACKED_BLOCK),
                               self.panel.n_haplotypes, minor_is_alt, nb.get_num_threads()))

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
