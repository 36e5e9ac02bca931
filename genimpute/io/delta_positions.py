"""The bit positions of a compact panel's listed rows (genimpute.io.sparse_rows)
as the gaps between them, each a LEB128 varint (7 bits a byte, the high
bit set on all but a number's last byte): a row's first position, then
each one less the one before it, less 1.

Positions ascend within a row, so a row of m positions among H
haplotypes takes about log2(H / m) / 7 bytes a position where uint32 took
4, and the listed rows are most of a large compact panel's bytes.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from genimpute.errors import CheckpointError
from genimpute.io.file_rows import RowSpool, read_spans

ROWS_PER_BLOCK = 1 << 16  # listed rows coded at a time


class DeltaPositions:
    """The positions of n listed rows: row i's, counts[i] .. counts[i + 1]
    - 1 in the numbering of all positions, are coded in
    data[byte_starts[i]:byte_starts[i + 1]] ((B, 1) uint8, an array or
    FileRows)."""

    def __init__(self, data, byte_starts: np.ndarray, counts: np.ndarray):
        if len(byte_starts) != len(counts) or int(byte_starts[-1]) != len(data):
            raise ValueError(f"expected {len(counts)} byte starts ending at {len(data)}; found {len(byte_starts)} "
                             f"ending at {int(byte_starts[-1]) if len(byte_starts) else None}")
        self.data, self.byte_starts, self.counts = data, byte_starts, counts
        self.path = getattr(data, "path", "listed positions")  # named in errors

    def __len__(self) -> int:
        return int(self.counts[-1])

    @classmethod
    def code(cls, positions, counts: np.ndarray, spool: RowSpool) -> DeltaPositions:
        """The rows' positions (P,) or (P, 1) uint32, an array or FileRows,
        row i's at counts[i] .. counts[i + 1] - 1, coded a block of rows at
        a time into `spool` (uint8), so that coding a panel's takes the
        memory of a block; read back from it while it is open."""
        spool.append(np.empty((0, 1), dtype=np.uint8))  # the width, with no block
        byte_starts = [np.zeros(1, dtype=np.int64)]
        for first in range(0, len(counts) - 1, ROWS_PER_BLOCK):
            last = min(len(counts) - 1, first + ROWS_PER_BLOCK)
            block = np.asarray(positions[int(counts[first]):int(counts[last])]).reshape(-1)
            local = counts[first:last + 1] - counts[first]
            sizes = _coded_sizes(block, local)
            starts = np.zeros(len(sizes) + 1, dtype=np.int64)
            np.cumsum(sizes, out=starts[1:])
            coded = np.empty(starts[-1], dtype=np.uint8)
            _code_rows(block, local, starts, coded)
            spool.append(coded.reshape(-1, 1))
            byte_starts.append(byte_starts[-1][-1] + starts[1:])
        return cls(spool.rows(), np.concatenate(byte_starts), counts)

    def spans(self, rows: np.ndarray) -> np.ndarray:
        """(P,) uint32 the positions of rows (int64, each a listed or an
        empty row), joined in their order; consecutive rows are read as one
        run of bytes (read_spans)."""
        first, stop = self.byte_starts[rows], self.byte_starts[rows + 1]
        out = np.empty(int((self.counts[rows + 1] - self.counts[rows]).sum()), dtype=np.uint32)
        if not len(out):
            return out
        if _decode_rows(read_spans(self.data, first, stop), np.cumsum(stop - first), out) != len(out):
            raise CheckpointError(f"{self.path}: expected {len(out)} positions in the rows' "
                                  "bytes; found otherwise (corrupted)")
        return out

    def decoded(self) -> np.ndarray:
        """(P, 1) uint32 every row's positions."""
        return self.spans(np.arange(len(self.counts) - 1, dtype=np.int64)).reshape(-1, 1)


@nb.njit(cache=True)
def _coded_sizes(positions, counts):
    """(n,) bytes each row's coded gaps take."""
    sizes = np.zeros(len(counts) - 1, dtype=np.int64)
    for i in range(len(sizes)):
        previous = np.int64(-1)
        for k in range(counts[i], counts[i + 1]):
            gap = np.int64(positions[k]) - previous - 1
            previous = np.int64(positions[k])
            sizes[i] += 1
            while gap >= 128:
                gap >>= 7
                sizes[i] += 1
    return sizes


@nb.njit(cache=True)
def _code_rows(positions, counts, starts, out):
    """Each row's gaps as varints into out[starts[i]:starts[i + 1]]."""
    for i in range(len(counts) - 1):
        at, previous = starts[i], np.int64(-1)
        for k in range(counts[i], counts[i + 1]):
            gap = np.int64(positions[k]) - previous - 1
            previous = np.int64(positions[k])
            while gap >= 128:
                out[at] = np.uint8((gap & 127) | 128)
                gap >>= 7
                at += 1
            out[at] = np.uint8(gap)
            at += 1


@nb.njit(cache=True)
def _decode_rows(data, ends, out):
    """The positions of the rows whose bytes end at ends (in data, rows one
    after another) into out; returns how many were decoded (at most
    len(out): a count that differs means corrupted bytes)."""
    at, byte = 0, 0
    for i in range(len(ends)):
        previous = np.int64(-1)
        while byte < ends[i]:
            value, shift = np.int64(0), 0
            while byte < ends[i]:
                x = np.int64(data[byte])
                byte += 1
                value |= (x & 127) << shift
                shift += 7
                if x < 128:
                    break
            previous += 1 + value
            if at == len(out):
                return at + 1
            out[at] = np.uint32(previous)
            at += 1
    return at
