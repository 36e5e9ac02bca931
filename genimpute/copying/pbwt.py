"""Positional BWTs (Durbin 2014) of a segment's typed sites, left to right
and right to left, and the walks that find, for each target haplotype,
the panel haplotypes sharing its longest runs of alleles ending (or
starting) at a typed site: the sightings its composite states are
built from (genimpute.copying.states)."""

from __future__ import annotations

import numba as nb
import numpy as np


MAX_HAPLOTYPES = 1 << 24  # the most a PBWT order's 16 + 8 bits number (pbwt_index)


def pbwt_index(packed: np.ndarray, n_haplotypes: int, reverse: bool = False, every: int = 1) -> tuple[np.ndarray, ...]:
    """(order_low, order_high, allele_words, word_zeros) of a PBWT over
    the sites of packed (t, ceil(H / 8)) uint8: the alleles of H =
    n_haplotypes haplotypes at each site in np.packbits' order, as the
    panel keeps its records. Right to left if `reverse` (the index's site
    j is then packed's t - 1 - j). The order is kept only where the walks
    read it (_walk's sightings), at sites s = 0, every, 2 every, ... of
    packed: its row k (sighted_sites(t, every) rows of H) the haplotypes
    sorted by their alleles at site k every, then at the site before it,
    and so on back to the first (after it, and on to the last, if
    `reverse`), ties by number; read with _order_at: the low 16 bits of
    each in order_low (uint16), the rest packed in order_high (ceil(H b /
    8) uint8 a row), b = _high_bits(H) bits for each (b = 0 up to 65,536
    haplotypes). allele_words (t, H // 64 + 1)
    uint64: bit k of word w of row j the allele at the index's site j of
    the haplotype at place 64 w + k of the order before it; word_zeros (t,
    H // 64 + 1) int32: the 0 alleles at site j among the first 64 w
    places. _zeros_before counts from the two what a (t, H + 1) table of
    counts would hold. Each direction takes 2 / every bytes per site and
    haplotype for the order up to 65,536 haplotypes (32,768 samples), 2.25
    / every up to 131,072 and 2.5 / every up to 262,144 (TOPMed's 97,000
    samples), and 0.19 for the rest: the index is most of the engine's
    memory at large panels, and keeping the order at every site would take
    close to twice as much at every = 2 (see docs/results.md)."""
    index = _empty_index(len(packed), n_haplotypes, every)
    _fill_pbwt(packed, reverse, every, *index)
    return index


def pbwt_indexes(packed: np.ndarray, n_haplotypes: int, every: int = 1) -> tuple[tuple, tuple]:
    """(pbwt_index(packed, H, every=every), pbwt_index(packed, H, True,
    every)), built side by side on two threads where there are two: each
    is one walk over every site and haplotype, which does not split across
    threads as it stands, and one after the other they take seconds in a
    large panel. Built from the packed records, not their alleles as bytes,
    which would take eight times the memory."""
    forward, backward = (_empty_index(len(packed), n_haplotypes, every) for _ in range(2))
    _fill_both(packed, every, *forward, *backward)
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


def _empty_index(t: int, n: int, every: int) -> tuple[np.ndarray, ...]:
    # word_zeros int32 at every size (a 32nd of a byte per site and haplotype more than uint16 below 65,535
    # haplotypes): one type for every panel, so numba compiles the walks once, not again for the first large panel
    words, rows = n // 64 + 1, sighted_sites(t, every)
    return (np.empty((rows, n), dtype=np.uint16), np.zeros((rows, (n * _high_bits(n) + 7) // 8), dtype=np.uint8),
            np.zeros((t, words), dtype=np.uint64), np.zeros((t, words), dtype=np.int32))


@nb.njit(cache=True)
def _order_at(order_low, order_high, bits, j, i):
    """Place i of row j of a pbwt_index's order (bits: _order_high_bits(H)): its
    low 16 bits, and the high ones from bits b i .. b i + b - 1 of row j of order_high."""
    h = np.int64(order_low[j, i])
    if bits == 0:
        return h
    at = i * bits
    return h | (np.int64(order_high[j, at >> 3] >> (at & 7)) & ((1 << bits) - 1)) << 16


@nb.njit(cache=True)
def _set_order_row(order_low, order_high, j, row):
    """Write row (H,) as row j of a pbwt_index's order (order_high's row j zeros)."""
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


@nb.njit(cache=True, parallel=True, nogil=True)
def _fill_both(packed, every, order_low, order_high, allele_words, word_zeros,
               reverse_low, reverse_high, reverse_words, reverse_zeros):
    for direction in nb.prange(2):
        if direction == 0:
            _fill_pbwt(packed, False, every, order_low, order_high, allele_words, word_zeros)
        else:
            _fill_pbwt(packed, True, every, reverse_low, reverse_high, reverse_words, reverse_zeros)


@nb.njit(cache=True)
def _fill_pbwt(packed, reverse, every, order_low, order_high, allele_words, word_zeros):
    """pbwt_index's arrays (order_high, allele_words all 0), filled in. One
    pass over the order before each site sets the alleles' bits and
    partitions it, the 0s' haplotypes into the next order and the 1s'
    aside until their place is known, in rows of int32: faster in large
    panels than a pass for the bits and another for the partition over
    rows of int64 (see docs/results.md)."""
    t, n = len(packed), order_low.shape[1]
    current, following, ones = (np.arange(n, dtype=np.int32), np.empty(n, dtype=np.int32),
                                np.empty(n, dtype=np.int32))
    for j in range(t):
        site = t - 1 - j if reverse else j
        row = packed[site]
        zeros = 0
        word = np.uint64(0)
        for i in range(n):
            if i & 63 == 0:
                word_zeros[j, i >> 6] = zeros
            h = current[i]
            if _allele(row, h) == 0:
                following[zeros] = h
                zeros += 1
            else:
                ones[i - zeros] = h
                word |= np.uint64(1) << np.uint64(i & 63)
            if i & 63 == 63:
                allele_words[j, i >> 6] = word
                word = np.uint64(0)
        if n & 63:
            allele_words[j, n >> 6] = word
        else:
            word_zeros[j, n >> 6] = zeros
        following[zeros:] = ones[:n - zeros]
        current, following = following, current
        if site % every == 0:
            _set_order_row(order_low, order_high, site // every, current)


@nb.njit(cache=True)
def count_ones(word):
    """The 1 bits of a uint64 (a SWAR count, which LLVM compiles to one popcount)."""
    word = word - ((word >> np.uint64(1)) & np.uint64(0x5555555555555555))
    word = (word & np.uint64(0x3333333333333333)) + ((word >> np.uint64(2)) & np.uint64(0x3333333333333333))
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((word * np.uint64(0x0101010101010101)) >> np.uint64(56))


@nb.njit(cache=True)
def _zeros_before(allele_words, word_zeros, j, i):
    """The 0 alleles at the index's site j among the first i places (0 <= i
    <= H) of the order before it, of a pbwt_index."""
    w, k = i >> 6, i & 63
    below = allele_words[j, w] & ((np.uint64(1) << np.uint64(k)) - np.uint64(1))
    return np.int64(word_zeros[j, w]) + k - count_ones(below)


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
    the order is read forwards: visited in their own order, the groups'
    walks were slower, more so on long segments (see docs/results.md).
    index: pbwt_index's arrays, of the sites right to left if
    `reverse` (its site j is the queries' t - 1 - j), its order kept at
    every `every`-th site."""
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
                h = _order_at(order_low, order_high, bits, site // every, i)
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
    if len(forward_index[0]) != sighted_sites(t, every) or len(backward_index[0]) != sighted_sites(t, every):
        raise ValueError("expected PBWT indexes whose order is kept at every `every`-th typed site, where the walks "
                         "read it; found it kept at other sites")
    sightings = np.empty((len(columns), sighted_sites(t, every), 4 * neighbours), dtype=np.int32)
    _walk(forward_index, queries, columns, 0, t, False, neighbours, every, excluded, sightings, 0)
    _walk(backward_index, queries, columns, 0, t, True, neighbours, every, excluded, sightings, 2 * neighbours)
    return sightings


@nb.njit(cache=True)
def sighted_sites(n_sites, every):
    """How many of n_sites typed sites take sightings, every `every`-th from the first."""
    return (n_sites + every - 1) // every
