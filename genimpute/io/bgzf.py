"""BGZF (the blocked gzip of htslib, which tabix indexes) written with its
blocks compressed in worker threads.

Compressing a cohort's output is a single-threaded zlib loop in htslib's
default writer, a noticeable part of a cohort job's time. Each BGZF
block is an independent gzip member, so blocks compress in parallel (the
compressor releases the GIL) and are written in order. The compressor is
zlib-ng: the same deflate format, several times faster than zlib at level
6 on imputed VCF text, for a slightly larger file (see docs/results.md).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from zlib_ng import zlib_ng

from genimpute.io.scratch import naming
from genimpute.runtime import usable_cores

BLOCK = 0xFF00  # uncompressed bytes per block, as htslib
LEVEL = 6  # zlib's default, as htslib's "wb"
# the empty block that ends every BGZF file (SAM/BAM specification, 4.1.2)
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def compress_block(data: bytes, level: int = LEVEL) -> bytes:
    """One BGZF block: a gzip member with the BC extra field giving its size."""
    deflate = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    header = struct.pack("<4BI2BH2BHH", 31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(body) + 25)
    return header + body + struct.pack("<II", zlib_ng.crc32(data), len(data))


class BgzfWriter:
    """Write bytes to `path` as BGZF, each block compressed at `level`;
    close() finishes the file with the EOF block."""

    def __init__(self, path: str | os.PathLike, threads: int | None = None, level: int = LEVEL,
                 shown_as: str | os.PathLike | None = None):
        self.path = shown_as or path  # the name a failed write is reported under: the user's, not a temporary's
        self.handle = open(path, "wb")
        self.threads = threads or min(4, usable_cores())
        self.level = level
        self.pool = ThreadPoolExecutor(max_workers=self.threads)
        self.pending: deque = deque()
        self.buffer = bytearray()
        self.position = 0  # uncompressed bytes written
        self.block_offsets: list[int] = []  # each block's compressed start, in order (for an index)
        self.compressed = 0

    def write(self, data: bytes) -> None:
        """Blocks of BLOCK bytes are compressed from views of `data`, after
        write returns (so bytes, never modified: a cohort's output is
        hundreds of MB, not worth a copy); only the tail short of a block
        waits, copied, for the next write."""
        view = memoryview(data)
        self.position += len(view)
        if self.buffer:
            head = BLOCK - len(self.buffer)
            self.buffer += view[:head]
            view = view[head:]
            if len(self.buffer) < BLOCK:
                return
            self._submit(bytes(self.buffer))
            self.buffer.clear()
        full = len(view) - len(view) % BLOCK
        for start in range(0, full, BLOCK):
            self._submit(view[start:start + BLOCK])
        self.buffer += view[full:]

    def _submit(self, block) -> None:
        self.pending.append(self.pool.submit(compress_block, block, self.level))
        while len(self.pending) > 4 * self.threads:  # bound the memory held by blocks in flight
            self._write_block(self.pending.popleft().result())

    def _write_block(self, block: bytes) -> None:
        self.block_offsets.append(self.compressed)
        self.compressed += len(block)
        with naming(self.path):
            self.handle.write(block)

    def close(self) -> None:
        try:
            if self.buffer:
                self._submit(bytes(self.buffer))
            while self.pending:
                self._write_block(self.pending.popleft().result())
            self._write_block(EOF_BLOCK)
        finally:
            self.pool.shutdown(cancel_futures=True)
            with naming(self.path):  # the buffered last blocks are written here
                self.handle.close()
