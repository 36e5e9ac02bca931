"""A target haplotype's composite copying states, as Beagle 5 builds its
composite reference haplotypes, from its sightings
(genimpute.copying.pbwt); and their alleles at the typed sites, gathered
from the panel's bits into the (sites, states) table of bytes the
forward-backward reads (genimpute.copying.hmm)."""

from __future__ import annotations

import numba as nb
import numpy as np

from genimpute.io.coded_rows import byte_swapped, transpose64


def _packed_by_haplotype(packed: np.ndarray, n_haplotypes: int) -> np.ndarray:
    """The alleles of packed (t, ceil(H / 8)) records (as pbwt_index reads
    them) as (H, ceil(t / 64)) uint64, site j bit j % 64 of word j // 64:
    the table the states' alleles are gathered from (_state_alleles)."""
    return bits_by_haplotype([packed], n_haplotypes, len(packed), np.zeros(len(packed), dtype=bool))


def bits_by_haplotype(blocks, n_haplotypes: int, n_rows: int, inverted: np.ndarray) -> np.ndarray:
    """(H, ceil(n_rows / 64)) uint64: bit r % 64 of word r // 64 of row h
    haplotype h's bit in packed row r, inverted where inverted[r] (blocks:
    the rows (k, ceil(H / 8)) uint8 in order, k a multiple of 64 but in
    the last)."""
    out = np.zeros((n_haplotypes, (n_rows + 63) // 64), dtype=np.uint64)
    first = 0
    for block in blocks:
        _fill_by_haplotype(as_words(block)[1], inverted[first:first + len(block)], first // 64, out)
        first += len(block)
    return out


def as_words(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(block's packed rows zero-padded to whole uint64 words, C-contiguous;
    the same memory as uint64)."""
    if block.shape[1] % 8:
        block = np.pad(block, ((0, 0), (0, -block.shape[1] % 8)))
    block = np.ascontiguousarray(block)
    return block, block.view(np.uint64)


@nb.njit(cache=True, parallel=True, nogil=True)
def _fill_by_haplotype(words, inverted, first_word, out):
    """Set out[h, first_word + r // 64] bit r % 64 to haplotype h's bit in
    row r of words (packed rows as uint64, zero-padded), inverted where
    inverted[r]: 64 rows by 64 haplotypes at a time, transposed
    (transpose64). A bit at a time from each row (a tiled byte table, then
    its transpose) took several times as long in large panels."""
    n_rows, n_haplotypes = len(words), out.shape[0]
    for w in nb.prange(words.shape[1]):
        tile = np.empty(64, dtype=np.uint64)
        for g in range((n_rows + 63) // 64):
            for i in range(64):  # row i at tile[63 - i], so transposed each haplotype's word has row i at bit i
                r = 64 * g + i
                word = np.uint64(0)
                if r < n_rows:
                    word = byte_swapped(words[r, w])  # haplotype 64 w at bit 63, as np.packbits orders them
                    if inverted[r]:
                        word = ~word
                tile[63 - i] = word
            transpose64(tile)
            for j in range(64):
                if 64 * w + j < n_haplotypes:  # past the last: padding, set where inverted
                    out[64 * w + j, first_word + g] = tile[j]


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
    runs took most of this stage's time: a segment's bytes overflow the L3
    cache where its bits, an eighth of them, fit (see docs/results.md)."""
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
