"""Bit rows (np.packbits of records' haplotypes) kept in blocks of
consecutive rows by their distinct columns, as Beagle's bref3 keeps a
block of records by the distinct allele sequences of its haplotypes.

In a block of up to BLOCK_ROWS records, each haplotype's alleles are a
column of bits; haplotypes in LD share columns, so a block keeps each
distinct column once (SEQUENCE_BYTES bytes, np.packbits' order: the
block's row r is bit 7 - r % 8 of byte r // 8) and, for each of the
rows' 8 W bit positions (padding included, so rows come back bit for
bit), the number of its column (uint16). The common records a compact
panel keeps whole (genimpute.io.sparse_rows) take a fraction of their
bit-packed size kept so (see docs/results.md). A block with more distinct columns than
a uint16 numbers is split in halves until each fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from genimpute.io.file_rows import RowSpool, row_numbers

BLOCK_ROWS = 128
SEQUENCE_BYTES = BLOCK_ROWS // 8
MAX_SEQUENCES = 1 << 16  # columns a uint16 numbers


@dataclass
class CodedBlock:
    """One block's rows: `index` (8 W,) uint16 each bit position's column
    among `sequences` (n, SEQUENCE_BYTES) uint8."""

    rows: int
    index: np.ndarray
    sequences: np.ndarray


def code_block(block: np.ndarray, max_sequences: int = MAX_SEQUENCES) -> list[CodedBlock]:
    """block (b <= BLOCK_ROWS, W) uint8 packed rows as one CodedBlock, or
    several of consecutive rows where one would hold more than
    max_sequences distinct columns."""
    if len(block) > BLOCK_ROWS:
        raise ValueError(f"expected at most {BLOCK_ROWS} rows a block; found {len(block)}")
    columns = np.zeros((8 * block.shape[1], SEQUENCE_BYTES), dtype=np.uint8)
    packed = np.packbits(np.unpackbits(block, axis=1), axis=0).T  # (8 W, ceil(b / 8)): each position's bits
    columns[:, :packed.shape[1]] = packed
    distinct, index = np.unique(columns.view(np.dtype((np.void, SEQUENCE_BYTES)))[:, 0], return_inverse=True)
    if len(distinct) > max_sequences:
        half = len(block) // 2
        return code_block(block[:half], max_sequences) + code_block(block[half:], max_sequences)
    sequences = np.frombuffer(distinct.tobytes(), dtype=np.uint8).reshape(-1, SEQUENCE_BYTES)
    return [CodedBlock(len(block), index.astype(np.uint16).ravel(), sequences)]


class CodedRows:
    """(M, W) uint8 bit rows kept as coded blocks: block b holds rows
    block_starts[b] .. block_starts[b + 1] - 1, its bit positions' column
    numbers index[b] (8 W,) uint16 and its columns
    sequences[sequence_starts[b]:sequence_starts[b + 1]]. Read by indexing
    (a slice, an integer, an integer array or a mask) as the rows
    themselves, like an array or FileRows; `index` and `sequences` are
    arrays or FileRows."""

    ndim = 2
    dtype = np.dtype(np.uint8)

    def __init__(self, index, sequences, block_starts: np.ndarray, sequence_starts: np.ndarray):
        self.index, self.sequences = index, sequences
        self.block_starts, self.sequence_starts = block_starts, sequence_starts
        if index.shape[1] % 8 or len(block_starts) != len(index) + 1 or len(sequence_starts) != len(index) + 1:
            raise ValueError(f"expected {len(index) + 1} block and sequence starts for {len(index)} blocks of a "
                             f"whole number of bytes; found {len(block_starts)}, {len(sequence_starts)} and "
                             f"{index.shape[1]} bits")
        if int(sequence_starts[-1]) != len(sequences) or np.any(np.diff(block_starts) <= 0) or \
                np.any(np.diff(block_starts) > BLOCK_ROWS) or np.any(np.diff(sequence_starts) <= 0):
            raise ValueError("expected blocks of 1 to BLOCK_ROWS rows, each with sequences, ending at the last "
                             "sequence; found them otherwise")
        self.shape = (int(block_starts[-1]), index.shape[1] // 8)
        self._last: tuple = (None, None)  # (block, its rows) of the last block decoded

    @classmethod
    def code(cls, rows, index_spool: RowSpool, sequence_spool: RowSpool) -> CodedRows:
        """rows (M, W), an array or FileRows or any rows read by slices,
        coded a block at a time into the two spools (uint16 and uint8), so
        that coding a panel takes the memory of a block; read back from them
        while they are open."""
        index_spool.append(np.empty((0, 8 * rows.shape[1]), dtype=np.uint16))  # the widths, with no block
        sequence_spool.append(np.empty((0, SEQUENCE_BYTES), dtype=np.uint8))
        block_rows, sequence_counts = [0], [0]
        for start in range(0, len(rows), BLOCK_ROWS):
            for coded in code_block(np.ascontiguousarray(rows[start:start + BLOCK_ROWS])):
                index_spool.append(coded.index[None, :])
                sequence_spool.append(coded.sequences)
                block_rows.append(coded.rows)
                sequence_counts.append(len(coded.sequences))
        return cls(index_spool.rows(), sequence_spool.rows(), np.cumsum(block_rows, dtype=np.int64),
                   np.cumsum(sequence_counts, dtype=np.int64))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, (int, np.integer)):
            return self[np.array([rows])][0]
        rows = row_numbers(rows, len(self))
        out = np.empty((len(rows), self.shape[1]), dtype=np.uint8)
        block_of = np.searchsorted(self.block_starts, rows, side="right") - 1
        for b in np.unique(block_of).tolist():
            wanted = np.flatnonzero(block_of == b)
            out[wanted] = self._block(b)[rows[wanted] - self.block_starts[b]]
        return out

    def _block(self, b: int) -> np.ndarray:
        """Block b's rows, decoded; the last block decoded is kept, as the
        engine reads a segment's rows in order, a chunk at a time, and a
        chunk's end falls within a block."""
        if self._last[0] != b:
            self._last = b, _decode_block(
                np.asarray(self.index[b:b + 1])[0],
                np.asarray(self.sequences[int(self.sequence_starts[b]):int(self.sequence_starts[b + 1])]),
                int(self.block_starts[b + 1] - self.block_starts[b]))
        return self._last[1]


@nb.njit(cache=True, inline="always")
def transpose64(a):
    """The 64 x 64 bit matrix a (word i its row i, bit 63 - j its column j)
    transposed in place, in six rounds that swap ever smaller blocks'
    off-diagonal quarters (Warren, Hacker's Delight, 7-3)."""
    j, mask = 32, np.uint64(0x00000000FFFFFFFF)
    while j != 0:
        k = 0
        while k < 64:
            t = (a[k] ^ (a[k + j] >> np.uint64(j))) & mask
            a[k] ^= t
            a[k + j] ^= t << np.uint64(j)
            k = (k + j + 1) & ~j
        j >>= 1
        mask ^= mask << np.uint64(j)


@nb.njit(cache=True, inline="always")
def byte_swapped(x):
    """x with its 8 bytes in reverse order: np.packbits' first byte its highest."""
    x = ((x & np.uint64(0x00FF00FF00FF00FF)) << np.uint64(8)) | ((x >> np.uint64(8)) & np.uint64(0x00FF00FF00FF00FF))
    x = ((x & np.uint64(0x0000FFFF0000FFFF)) << np.uint64(16)) | ((x >> np.uint64(16)) & np.uint64(0x0000FFFF0000FFFF))
    return (x << np.uint64(32)) | (x >> np.uint64(32))


@nb.njit(cache=True)
def _decode_block(index, sequences, n_rows):
    """(n_rows, W) uint8 rows of a block: bit position h's bit of row r is
    bit r of its column sequences[index[h]]. 64 positions by 64 rows at a
    time: their columns' bits as 64 words (each half column one 8-byte
    load), transposed into the rows', each row's 64 bits one 8-byte store
    (a loop over each column's set bits, scattering a byte write for each,
    took several times as long)."""
    width = len(index) // 8
    padded = (width + 7) // 8  # words of 64 positions
    out = np.zeros((n_rows, 8 * padded), dtype=np.uint8)
    out_words = out.view(np.uint64)  # little-endian: byte-swapped on the way in and out
    columns = sequences.view(np.uint64)  # (n, 2): rows 0-63, 64-127
    words = np.empty(64, dtype=np.uint64)
    for group in range(padded):
        first = 64 * group
        positions = min(64, len(index) - first)
        for half in range((n_rows + 63) // 64):
            for k in range(positions):
                words[k] = byte_swapped(columns[index[first + k], half])
            for k in range(positions, 64):
                words[k] = np.uint64(0)
            transpose64(words)
            for r in range(64 * half, min(n_rows, 64 * half + 64)):
                out_words[r, group] = byte_swapped(words[r - 64 * half])
    return out[:, :width]
