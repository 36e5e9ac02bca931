"""A tabix index (.tbi) built while the VCF is written, from each record's
position and its place in the uncompressed text, instead of reading the
finished file back, which takes longer the larger the cohort.

The layout is the tabix format's (Li 2011; htslib's tbx.c and hts.c):
records binned by the UCSC scheme (16 kb to 512 Mb, 6 levels), chunks of
consecutive records in one bin, a linear index of the first record touching
each 16 kb window, and htslib's pseudo-bin of per-contig counts. Offsets
are BGZF virtual offsets: a block's compressed start << 16 | the offset in
its uncompressed block, every block but the last holding BLOCK bytes
(genimpute.io.bgzf).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from genimpute.io.bgzf import BLOCK, BgzfWriter

MIN_SHIFT, DEPTH = 14, 5  # 16 kb windows; bins of 16 kb, 128 kb, 1 Mb, 8 Mb, 64 Mb, 512 Mb
PSEUDO_BIN = ((1 << (3 * (DEPTH + 1))) - 1) // 7 + 1  # 37450: htslib's per-contig statistics
_VCF, _META = 2, ord("#")


def region_bins(beg: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(n,) the smallest UCSC bin holding each 0-based half-open [beg, end)."""
    last = np.maximum(end, beg + 1) - 1
    out = np.zeros(len(beg), dtype=np.int64)
    done = np.zeros(len(beg), dtype=bool)
    for level in range(DEPTH, 0, -1):  # the finest level whose bin holds both ends
        shift = MIN_SHIFT + 3 * (DEPTH - level)
        here = ~done & (beg >> shift == last >> shift)
        out[here] = ((1 << (3 * level)) - 1) // 7 + (beg[here] >> shift)
        done |= here
    return out


@dataclass
class _Contig:
    name: str
    chunks: dict = field(default_factory=dict)  # bin -> [[start, end], ...] uncompressed offsets
    windows: dict = field(default_factory=dict)  # 16 kb window -> first start touching it
    last_bin: int = -1
    last_position: int = 0
    first: int = -1  # the contig's first record start and last record end
    last: int = -1
    records: int = 0


class TabixIndex:
    """Collects records as they are written (add), then writes path.tbi
    (write) once the BGZF file's block offsets are known."""

    def __init__(self):
        self.contigs: dict[str, _Contig] = {}
        self.current: _Contig | None = None
        self.usable = True  # False once records are out of order: tabix refuses the file

    def add(self, contig: str, positions: np.ndarray, ref_lengths: np.ndarray, starts: np.ndarray,
            ends: np.ndarray) -> None:
        """Records of one contig, in order: 1-based positions, REF lengths,
        and [start, end) of each line in the uncompressed text."""
        if self.current is None or self.current.name != contig:
            self.usable &= contig not in self.contigs
            self.current = self.contigs[contig] = _Contig(contig)
        c = self.current
        self.usable &= bool(positions[0] >= c.last_position and (np.diff(positions) >= 0).all())
        c.last_position = int(positions[-1])
        beg = positions.astype(np.int64) - 1
        end = beg + np.maximum(ref_lengths.astype(np.int64), 1)
        bins = region_bins(beg, end)
        runs = np.flatnonzero(np.diff(bins)) + 1  # consecutive records of one bin make one chunk
        for first, last in zip([0, *runs], [*runs, len(bins)]):
            b = int(bins[first])
            if b == c.last_bin:
                c.chunks[b][-1][1] = int(ends[last - 1])
            else:
                c.chunks.setdefault(b, []).append([int(starts[first]), int(ends[last - 1])])
            c.last_bin = b
        for window_first, window_last, start in zip((beg >> MIN_SHIFT).tolist(), ((end - 1) >> MIN_SHIFT).tolist(),
                                                    starts.tolist()):
            for w in range(window_first, window_last + 1):
                c.windows.setdefault(w, start)
        if c.first < 0:
            c.first = int(starts[0])
        c.last = int(ends[-1])
        c.records += len(positions)

    def write(self, path, block_offsets: list[int]) -> None:
        """Write the index; block_offsets: each BGZF block's compressed start, in order."""
        blocks = np.asarray(block_offsets, dtype=np.uint64)

        def virtual(offset: int) -> int:
            return (int(blocks[offset // BLOCK]) << 16) | (offset % BLOCK)

        names = b"".join(name.encode() + b"\0" for name in self.contigs)
        out = [b"TBI\1", struct.pack("<8i", len(self.contigs), _VCF, 1, 2, 0, _META, 0, len(names)), names]
        for c in self.contigs.values():
            bins = sorted(c.chunks)
            out.append(struct.pack("<i", len(bins) + 1))
            for b in bins:
                out.append(struct.pack("<Ii", b, len(c.chunks[b])))
                out += [struct.pack("<QQ", virtual(start), virtual(end)) for start, end in c.chunks[b]]
            out.append(struct.pack("<IiQQQQ", PSEUDO_BIN, 2, virtual(c.first), virtual(c.last), c.records, 0))
            n_windows = max(c.windows) + 1
            linear, previous = [], 0
            for w in range(n_windows):  # a window no record touches takes the offset before it
                previous = virtual(c.windows[w]) if w in c.windows else previous
                linear.append(previous)
            out.append(struct.pack(f"<i{n_windows}Q", n_windows, *linear))
        writer = BgzfWriter(path)
        writer.write(b"".join(out))
        writer.close()
