"""Untyped records from the posteriors at the typed sites: which records'
minor allele each panel haplotype carries (a list of the rare ones, a
bit for each common one), and each record's P(alt), interpolated between
the typed sites either side and summed over the states that carry its
minor allele."""

from __future__ import annotations

import numba as nb
import numpy as np

from genimpute.copying.hmm import FAST
from genimpute.copying.pbwt import count_ones
from genimpute.copying.states import as_words, bits_by_haplotype
from genimpute.io.sparse_rows import ONES_IN_BYTE, SET_BITS, parts_in_blocks


MAXIMA_BLOCK = 16  # typed sites per block of the table of posterior maxima that decides the skip
# a record whose minor allele at least this share of the haplotypes carries is kept as a bit per haplotype, a
# rarer one in its carriers' lists: an entry of a list takes 32 bits
COMMON_MINOR = 1 / 32


def minor_tables(rows_of, records: np.ndarray, alt_freq: np.ndarray, n_haplotypes: int, block_bytes: int,
                 n_strips: int) -> tuple:
    """(hap_starts, hap_records, alt_major, common, hap_bits): which
    minor alleles each haplotype carries, of the panel's packed rows
    `records` (rows_of: the panel's records, genimpute.io.sparse_rows, read
    block_bytes of whole rows at a time; alt_freq: theirs), numbered 0 ..
    in that order. The rare ones' carriers are listed by haplotype
    (minor_alleles); the common ones (`common`, ascending) are bits, of
    hap_bits (H, ceil(len(common) / 64)) uint64, common record c bit c % 64
    of word c // 64 (bits_by_haplotype, inverted where REF is the minor
    allele). alt_major: the records whose minor allele is REF.

    In a large panel most of the minor alleles a haplotype carries are of
    the few common records: listed, those would take most of the entries,
    at 32 bits each; as bits (1 a record), the tables take far less memory,
    and time to build them (see docs/results.md)."""
    # alt_freq is the alt count / H in float32: exactly 0.5, or at least 1 / (2H) from it, which float32 keeps
    # apart below 16 million haplotypes; so the minor allele needs no count of its own
    minor_is_alt = alt_freq <= 0.5
    is_common = np.minimum(alt_freq, 1 - alt_freq) >= COMMON_MINOR
    common, rare = np.flatnonzero(is_common), np.flatnonzero(~is_common)
    hap_starts, hap_records = minor_alleles(lambda: parts_in_blocks(rows_of, records[rare], block_bytes),
                                            n_haplotypes, minor_is_alt[rare], rare.astype(np.int32), n_strips)
    step = 64 * max(1, block_bytes // max(1, 64 * rows_of.shape[1]))  # common records a block: whole words of 64
    hap_bits = bits_by_haplotype((rows_of[records[common[lo:lo + step]]] for lo in range(0, len(common), step)),
                                 n_haplotypes, len(common), ~minor_is_alt[common])
    return hap_starts, hap_records, np.flatnonzero(~minor_is_alt), common, hap_bits


@nb.njit(cache=True, parallel=True, nogil=True)
def _scan_minor(whole, words, whole_at, starts, positions, numbers, n_haplotypes, minor_is_alt, cursor, hap_records,
                n_strips):
    """Advance cursor[h] once for each record r whose minor allele
    haplotype h carries, records ascending, first writing its number
    numbers[r] to hap_records[cursor[h]] unless hap_records is empty (a count).
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
                        _note_carrier(cursor, hap_records, h, numbers[r])
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
                            _note_carrier(cursor, hap_records, h, numbers[r])


@nb.njit(cache=True)
def _note_carrier(cursor, hap_records, h, record):
    if len(hap_records):
        hap_records[cursor[h]] = record
    cursor[h] += 1


def minor_alleles(blocks, n_haplotypes, minor_is_alt, numbers, n_strips):
    """(hap_starts (H + 1,), hap_records) of records (blocks(): their
    RowParts (genimpute.io.sparse_rows), block after block; minor_is_alt:
    which allele of each is the minor one; numbers: ascending, each one's
    number in the lists): the numbers of the records whose minor allele
    haplotype h carries, hap_records[hap_starts[h]:hap_starts[h + 1]], ascending.

    A haplotype carries the minor allele of a few dozen rare records per
    Mb whatever the panel's size (the sum of their frequencies), so summing
    a query's states over their own lists reads a few dozen entries per
    state and Mb, where reading every record grows with the panel's records
    (the larger the panel, the more records, most of them rare).
    The records are read twice, a block at a time (to count, then to
    fill): even bit-packed, a large panel's segment of untyped records
    would take much memory held whole. The lists are built in
    n_strips threads (_scan_minor)."""
    counts = np.zeros(n_haplotypes, dtype=np.int64)
    for first, parts in _numbered(blocks()):
        _scan_minor(*_scanned(parts, minor_is_alt[first:first + len(parts.whole_at)]), numbers[first:],
                    n_haplotypes, minor_is_alt[first:], counts, np.empty(0, dtype=np.int32), n_strips)
    hap_starts = np.zeros(n_haplotypes + 1, dtype=np.int64)
    hap_starts[1:] = np.cumsum(counts)
    hap_records = np.empty(hap_starts[n_haplotypes], dtype=np.int32)
    cursor = hap_starts[:-1].copy()
    for first, parts in _numbered(blocks()):
        _scan_minor(*_scanned(parts, minor_is_alt[first:first + len(parts.whole_at)]), numbers[first:],
                    n_haplotypes, minor_is_alt[first:], cursor, hap_records, n_strips)
    return hap_starts, hap_records


def _scanned(parts, minor_is_alt: np.ndarray) -> tuple:
    """_scan_minor's view of RowParts: (whole rows padded to words, the
    same as uint64, whole_at, starts, positions), once each listed record
    is found to list its minor allele's carriers, as SparseRows lists a
    rare record's (a row listed by its other allele would need them all)."""
    listed = parts.whole_at < 0
    if np.any(parts.ones_listed[listed] != minor_is_alt[listed]):
        raise ValueError("expected each listed record to list its minor allele's carriers; found one that lists "
                         "its major allele's")
    return *as_words(parts.whole), parts.whole_at, parts.starts, parts.positions


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
def _add_sides(out_column, r, record_gap, weights, column, start, end, last):
    """Add to record r's P(minor) the state's posterior at each typed site
    either side of it (_sides) that lies in [start, end), weighted
    (column: the state's posteriors at typed sites start ..)."""
    left, right = _sides(record_gap[r], last)
    if start <= left < end:
        out_column[r] += (1 - weights[r]) * column[left - start]
    if start <= right < end:
        out_column[r] += weights[r] * column[right - start]


@nb.njit(cache=True, fastmath=FAST)
def _add_both(out_column, r, record_gap, weights, column, start, last):
    """Add to record r's P(minor) the state's posterior at both typed sites either side of it, weighted."""
    left, right = _sides(record_gap[r], last)
    out_column[r] += (1 - weights[r]) * column[left - start] + weights[r] * column[right - start]


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


@nb.njit(cache=True, fastmath=FAST)
def _kept_run(maxima, posterior, slot, b, first, stop, floor, column, kept_posterior):
    """(start, end, the block after it, whether a block was passed over) of
    the next run of blocks from block b in which state `slot` is kept
    (maxima (_block_maxima) at least `floor`), as rows [start, end) of its
    rows [first, stop); start == end where none is left. The run's
    posteriors are copied to column[:end - start] and added to
    kept_posterior: its records read them again, from a few cache lines
    rather than one a typed site."""
    passed = False
    while b * MAXIMA_BLOCK < stop and maxima[b, slot] < floor:
        passed = True
        b += 1
    if b * MAXIMA_BLOCK >= stop:
        return stop, stop, b, passed
    run_end = b + 1
    while run_end * MAXIMA_BLOCK < stop and maxima[run_end, slot] >= floor:
        run_end += 1
    start, end = max(first, b * MAXIMA_BLOCK), min(stop, run_end * MAXIMA_BLOCK)
    for j in range(start, end):
        column[j - start] = posterior[j, slot]
        kept_posterior[j] += column[j - start]
    return start, end, run_end, passed


@nb.njit(cache=True, fastmath=FAST)
def _impute_untyped(untyped, segments, posterior, lo, last, floor, out_column):
    """Write each untyped record's P(alt) to out_column (zeros): the
    posteriors (rows: typed sites lo .., as far as the records read) at the
    typed sites either side (_sides), interpolated by the record's weight (0
    at the left site, 1 at the right), summed over the states that carry
    its minor allele (minor_tables) at that site (a composite state may
    copy another haplotype at each), and taken from 1 where that allele is
    REF. A state is skipped in each block of MAXIMA_BLOCK rows where its
    posterior stays below `floor` (CopyingSettings.posterior_floor), and
    each record's sum is divided by the posterior of the states it kept at
    its sites: the skipped states are taken to carry the minor allele as
    often as the kept ones do.

    Skipped by block, not by the state's whole segment: a segment is long,
    and a state that matters somewhere in it carries little weight over
    most of it; kept whole, the states' segments held several times as
    many states at each site as the few that carry its posterior, and
    their records were most of the engine's time."""
    maxima = _block_maxima(posterior)
    column = np.empty(len(posterior), dtype=np.float32)
    kept_posterior = np.zeros(len(posterior), dtype=np.float32)
    skipped = False
    for e in range(segments.shape[1]):
        slot, h = segments[0, e], segments[3, e]
        first, stop = max(segments[1, e] - lo, 0), min(segments[2, e] - lo, len(posterior))  # its rows
        b = first // MAXIMA_BLOCK
        while b * MAXIMA_BLOCK < stop:
            start, end, b, passed = _kept_run(maxima, posterior, slot, b, first, stop, floor, column, kept_posterior)
            skipped |= passed
            if start < end:
                _add_state(untyped, column, h, start + lo, end + lo, last, out_column)
    record_gap, weights, alt_major = untyped[2], untyped[1], untyped[6]
    if skipped:
        for r in range(len(out_column)):
            left, right = _sides(record_gap[r], last)
            kept_share = (1 - weights[r]) * kept_posterior[left - lo] + weights[r] * kept_posterior[right - lo]
            if kept_share > 0:
                out_column[r] /= kept_share
    for i in range(len(alt_major)):  # the sums were of REF: the states sum to 1 at each site
        out_column[alt_major[i]] = 1 - out_column[alt_major[i]]


@nb.njit(cache=True, fastmath=FAST)
def _add_state(untyped, column, h, start, end, last, out_column):
    """Add the state's posterior (column[i] at typed site start + i),
    copying haplotype h over typed sites [start, end), to the records whose minor allele h carries
    in the gaps those sites bound: at gap `start` and gap `end` only the
    site either side that lies in the span (the other may be another
    state's), between them both."""
    weights, record_gap, gap_first, hap_starts, hap_records, _, common, common_first, hap_bits = untyped[1:]
    low, high = hap_starts[h], hap_starts[h + 1]
    i = low + np.searchsorted(hap_records[low:high], gap_first[start])
    while i < high and hap_records[i] < gap_first[start + 1]:
        _add_sides(out_column, hap_records[i], record_gap, weights, column, start, end, last)
        i += 1
    while i < high and hap_records[i] < gap_first[end]:  # the bulk, with no tests
        _add_both(out_column, hap_records[i], record_gap, weights, column, start, last)
        i += 1
    while i < high and hap_records[i] < gap_first[end + 1]:
        _add_sides(out_column, hap_records[i], record_gap, weights, column, start, end, last)
        i += 1
    bits = hap_bits[h]  # the common records, likewise
    _add_common(out_column, bits, common, common_first[start], common_first[start + 1], True, record_gap,
                weights, column, start, end, last)
    _add_common(out_column, bits, common, common_first[start + 1], common_first[end], False, record_gap,
                weights, column, start, end, last)
    _add_common(out_column, bits, common, common_first[end], common_first[end + 1], True, record_gap,
                weights, column, start, end, last)


@nb.njit(cache=True, fastmath=FAST)
def _add_common(out_column, bits, common, c_first, c_stop, sides, record_gap, weights, column, start, end,
                last):
    """As _impute_untyped adds a state's posterior to its records, to those
    of common records c_first .. c_stop - 1 (numbered among the common
    ones; records common[c]) whose bit is set in bits (a haplotype's row of
    hap_bits): each site either side in [start, end) where `sides`
    (_add_sides), else both."""
    for w in range(c_first >> 6, (c_stop + 63) >> 6):
        word = bits[w]
        if 64 * w < c_first:
            word &= ~((np.uint64(1) << np.uint64(c_first - 64 * w)) - np.uint64(1))
        if 64 * w + 64 > c_stop:
            word &= (np.uint64(1) << np.uint64(c_stop - 64 * w)) - np.uint64(1)
        while word:
            r = common[64 * w + count_ones((word & (~word + np.uint64(1))) - np.uint64(1))]  # the lowest set bit's
            if sides:
                _add_sides(out_column, r, record_gap, weights, column, start, end, last)
            else:
                _add_both(out_column, r, record_gap, weights, column, start, last)
            word &= word - np.uint64(1)
