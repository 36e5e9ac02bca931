"""Bit-packed rows (np.packbits of a record's haplotypes) kept two ways:
whole, or as the positions of the row's rarer bit value where listing them
takes fewer bytes than the row. Most records of a large panel are rare
(at 100,000 samples over 1 Mb the median record has 10 carriers among
200,000 haplotypes, a 25,000-byte row), so most rows become short lists.

A row is listed by its bit positions over all of its 8 * W bits, padding
included: a row whose rarer value is 0 lists its padding bits too, so it
comes back bit for bit without knowing how many haplotypes the row holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from genimpute.errors import CheckpointError
from genimpute.io.delta_positions import DeltaPositions
from genimpute.io.file_rows import RowSpool, packed_blocks, read_spans, row_numbers

POSITION = np.dtype(np.uint32)  # a listed bit's position in its row: rows of up to 2^32 bits

ONES_IN_BYTE = np.array([bin(value).count("1") for value in range(256)], dtype=np.int64)
# the bits (0-7, np.packbits' order: the highest bit first) a byte's 1s are at,
# ascending, in the first ONES_IN_BYTE[value] places: a loop over those of a
# byte, not over its 8 bits, and no branch to mispredict on each
SET_BITS = np.array([[b for b in range(8) if value >> (7 - b) & 1] + [0] * (8 - bin(value).count("1"))
                     for value in range(256)], dtype=np.int64)


@nb.njit(cache=True)
def ones_in_rows(block):
    """(n,) int64 the 1 bits of each row of the uint8 block (n, W), counted
    in place: looked up as an array, a block took another of its size."""
    ones = np.zeros(len(block), dtype=np.int64)
    for r in range(len(block)):
        for value in block[r]:
            ones[r] += ONES_IN_BYTE[value]
    return ones


def ones_by_row(rows, block_bytes: int = 64 << 20) -> np.ndarray:
    """(M,) int64 the 1 bits of each row of rows (M, W), an array or
    FileRows, counted a block of rows at a time."""
    counts = [ones_in_rows(block) for block in packed_blocks(rows, block_bytes)]
    return np.concatenate(counts) if counts else np.empty(0, dtype=np.int64)


def listed_rows(ones: np.ndarray, width: int) -> np.ndarray:
    """Which rows of `width` bytes with these counts of 1 bits are kept as
    lists: those whose rarer value's positions take fewer bytes than the row."""
    return np.minimum(ones, 8 * width - ones) * POSITION.itemsize < width


@dataclass
class RowParts:
    """Some rows of a SparseRows, as kept: whole_at[i] is row i's row in
    `whole`, or -1 when it is listed, as positions[starts[i]:starts[i + 1]]
    of its 1 bits (ones_listed[i]) or of its 0 bits."""

    whole: np.ndarray  # (k, W) uint8
    whole_at: np.ndarray  # (n,) int64
    starts: np.ndarray  # (n + 1,) int64
    positions: np.ndarray  # (P,) uint32, ascending within a row
    ones_listed: np.ndarray  # (n,) bool


def row_parts(rows_of, rows: np.ndarray) -> RowParts:
    """The parts of rows `rows` of `rows_of`: a SparseRows's as it keeps
    them, any other 2-D array's (or FileRows's) whole."""
    if isinstance(rows_of, SparseRows):
        return rows_of.parts(rows)
    n = len(rows)
    return RowParts(rows_of[rows], np.arange(n, dtype=np.int64), np.zeros(n + 1, dtype=np.int64),
                    np.empty(0, dtype=POSITION), np.zeros(n, dtype=bool))


def parts_in_blocks(rows_of, rows: np.ndarray, block_bytes: int):
    """row_parts of `rows`, of about block_bytes of whole rows at a time."""
    step = max(1, block_bytes // max(1, rows_of.shape[1]))
    for start in range(0, len(rows), step):
        yield row_parts(rows_of, rows[start:start + step])


class SparseRows:
    """(M, W) uint8 bit rows, each whole (a row of `whole`) or listed (a
    span of `positions`); read by indexing (a slice, an integer, an integer
    array or a mask) as the whole rows, like FileRows. `whole` is an array,
    FileRows or CodedRows (a compact panel's, genimpute.io.coded_rows);
    `positions` (P, 1) an array or FileRows, or DeltaPositions (a compact
    panel's, genimpute.io.delta_positions)."""

    ndim = 2
    dtype = np.dtype(np.uint8)

    def __init__(self, whole, positions, whole_at: np.ndarray, starts: np.ndarray, ones_listed: np.ndarray):
        self.whole, self.positions = whole, positions
        self.whole_at, self.starts, self.ones_listed = whole_at, starts, ones_listed
        self.shape = (len(whole_at), int(whole.shape[1]))
        if len(starts) != len(whole_at) + 1 or len(ones_listed) != len(whole_at):
            raise ValueError(f"expected {len(whole_at) + 1} starts and {len(whole_at)} flags; "
                             f"found {len(starts)} and {len(ones_listed)}")
        if int(starts[-1]) != len(positions) or np.count_nonzero(whole_at >= 0) != len(whole):
            raise ValueError(f"expected {int(starts[-1])} positions and {np.count_nonzero(whole_at >= 0)} whole "
                             f"rows; found {len(positions)} and {len(whole)}")
        if starts[0] != 0 or np.any(np.diff(starts) < 0) or np.any(whole_at[whole_at >= 0] != np.arange(len(whole))):
            raise ValueError("expected starts ascending from 0 and the whole rows numbered in order; found them "
                             "otherwise")

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, (int, np.integer)):
            return self[np.array([rows])][0]
        parts = self.parts(rows)
        out = np.empty((len(parts.whole_at), self.shape[1]), dtype=np.uint8)
        kept_whole = parts.whole_at >= 0
        out[kept_whole] = parts.whole  # in the rows' order
        if _fill_listed(out, np.flatnonzero(~kept_whole), parts.starts, parts.positions, parts.ones_listed):
            raise CheckpointError(f"{getattr(self.positions, 'path', 'listed rows')}: expected bit positions below "
                                  f"{8 * self.shape[1]}; found some beyond (corrupted)")
        return out

    def parts(self, rows: np.ndarray) -> RowParts:
        """RowParts of these rows (integers, or a slice or mask), their
        whole rows and positions read in the rows' order."""
        rows = row_numbers(rows, len(self))
        at = self.whole_at[rows]
        whole = self.whole[at[at >= 0]]
        whole_at = np.full(len(rows), -1, dtype=np.int64)
        whole_at[at >= 0] = np.arange(len(whole))
        first, stop = self.starts[rows], self.starts[rows + 1]
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(stop - first, out=starts[1:])
        positions = self.positions.spans(rows) if isinstance(self.positions, DeltaPositions) else \
            read_spans(self.positions, first, stop)
        return RowParts(whole, whole_at, starts, positions, self.ones_listed[rows])

    def in_memory(self) -> "SparseRows":
        """These rows with their whole rows and positions read into memory."""
        positions = self.positions.decoded() if isinstance(self.positions, DeltaPositions) else self.positions[:]
        return SparseRows(self.whole[:], positions, self.whole_at, self.starts, self.ones_listed)

    def ones(self) -> np.ndarray:
        """(M,) int64 the 1 bits of each row, padding included."""
        counts = np.empty(len(self), dtype=np.int64)
        kept_whole = self.whole_at >= 0
        counts[kept_whole] = ones_by_row(self.whole)
        listed = np.diff(self.starts)[~kept_whole]
        counts[~kept_whole] = np.where(self.ones_listed[~kept_whole], listed, 8 * self.shape[1] - listed)
        return counts


@nb.njit(cache=True)
def _fill_listed(out, rows, starts, positions, ones_listed):
    """Write each listed row rows[k] of out from its positions: its 1 bits,
    or its 0 bits. Whether a position lay beyond its row (then skipped)."""
    beyond = False
    for r in rows:
        set_ones = ones_listed[r]
        out[r, :] = 0 if set_ones else 255
        for p in positions[starts[r]:starts[r + 1]]:
            if p >> 3 >= out.shape[1]:
                beyond = True
            elif set_ones:
                out[r, p >> 3] |= np.uint8(128 >> (p & 7))
            else:
                out[r, p >> 3] &= np.uint8(255 ^ (128 >> (p & 7)))
    return beyond


@nb.njit(cache=True)
def _list_positions(block, rows, ones_listed, starts, out):
    """Write the positions of the 1 bits (ones_listed[k]) or 0 bits of row
    rows[k] of block to out[starts[k]:starts[k + 1]]."""
    for k in range(len(rows)):
        flip = 0 if ones_listed[k] else 255
        at = starts[k]
        for byte in range(block.shape[1]):
            value = block[rows[k], byte] ^ flip
            for i in range(ONES_IN_BYTE[value]):
                out[at + i] = byte * 8 + SET_BITS[value, i]
            at += ONES_IN_BYTE[value]


class SparseSpool:
    """Blocks of bit rows appended, each row kept whole or listed, in
    unnamed temporary files in `directory` (RowSpool's), read back as
    SparseRows (rows()) until the spool is closed. Where a panel's packed
    records go as they are read (genimpute.io.vcf_reader.read_panel)."""

    def __init__(self, directory: str | Path):
        self.whole = RowSpool(directory)
        try:
            self.positions = RowSpool(directory, dtype=POSITION)
        except OSError:
            self.whole.close()
            raise
        self.reset()

    def __enter__(self) -> "SparseSpool":
        return self

    def __exit__(self, *exc) -> None:
        self.whole.close()
        self.positions.close()

    def __len__(self) -> int:
        return self.n_rows

    def reset(self) -> None:
        """Drop every row appended."""
        self.whole.reset()
        self.positions.reset()
        self.whole_at, self.lengths, self.ones_listed, self.n_rows = [], [], [], 0

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=np.uint8)
        ones = ones_in_rows(block)
        listed = listed_rows(ones, block.shape[1])
        ones_listed = listed & (2 * ones <= 8 * block.shape[1])
        lengths = np.where(listed, np.where(ones_listed, ones, 8 * block.shape[1] - ones), 0)
        whole_at = np.full(len(block), -1, dtype=np.int64)
        whole_at[~listed] = len(self.whole) + np.arange(np.count_nonzero(~listed))
        rows = np.flatnonzero(listed)
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths[rows], out=starts[1:])
        positions = np.empty(starts[-1], dtype=POSITION)
        _list_positions(block, rows, ones_listed[rows], starts, positions)
        self.whole.append(block[~listed])
        self.positions.append(positions.reshape(-1, 1))
        self.whole_at.append(whole_at)
        self.lengths.append(lengths)
        self.ones_listed.append(ones_listed)
        self.n_rows += len(block)

    def rows(self) -> SparseRows:
        lengths = np.concatenate(self.lengths) if self.lengths else np.empty(0, dtype=np.int64)
        starts = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        whole_at = np.concatenate(self.whole_at) if self.whole_at else np.empty(0, dtype=np.int64)
        ones_listed = np.concatenate(self.ones_listed) if self.ones_listed else np.empty(0, dtype=bool)
        return SparseRows(self.whole.rows(), self.positions.rows(), whole_at, starts, ones_listed)
