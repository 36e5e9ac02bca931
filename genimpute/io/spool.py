"""Sample columns spooled to a temporary file, batch by batch, and read
back record by record: how a cohort of thousands of samples is written with
the memory of one batch (as Minimac4 spools its sample chunks).

The columns are a VCF's text (genimpute.io.vcf_writer.ColumnText) or a
BGEN or PGEN output's arrays (genimpute.io.calls.Calls): any type with
spooled() (its bytes, and what restored(bytes, that) needs to rebuild
it) and side_by_side(parts). Each batch's columns of a window are
compressed (zlib-ng level 1, in worker threads) into an unnamed temporary
file beside the output, which the system deletes whatever way the process
ends.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zlib_ng import zlib_ng

from genimpute.io.scratch import naming
from genimpute.runtime import usable_cores

LEVEL = 1  # the columns are regular: level 1 already compresses them well, and much faster than 6


class ColumnSpool:
    """put() the chunks of a window batch by batch, each batch's chunks in
    the same order; joined() then gives each chunk with the batches' columns
    side by side, and empties the spool for the next window."""

    def __init__(self, directory: str | Path, threads: int | None = None):
        self.directory = directory
        self.file = tempfile.TemporaryFile(dir=directory, prefix=".genimpute-spool.")
        self.pool = ThreadPoolExecutor(max_workers=threads or min(2, usable_cores()))
        self.pending: deque = deque()  # (compressed bytes to come, type, restoring) of each chunk put
        self.parts: list[tuple[int, int, type, object]] = []  # (offset, size, type, restoring) of each, in put order

    def put(self, columns) -> None:
        data, restoring = columns.spooled()
        self.pending.append((self.pool.submit(zlib_ng.compress, data, LEVEL), type(columns), restoring))
        while len(self.pending) > 8:  # bound the compressed chunks held in memory
            self._store(*self.pending.popleft())

    def _store(self, compressed, kind: type, restoring) -> None:
        data = compressed.result()
        self.parts.append((self.file.tell(), len(data), kind, restoring))  # reads (os.pread) leave the position at the end
        with naming(f"{self.directory} (a temporary file of the output's columns)"):
            self.file.write(data)

    def joined(self, n_batches: int):
        """Yield each chunk's columns with every batch's side by side, in
        order. The spool is emptied at once: what is put from here on is the
        next window's, whether or not every chunk is read."""
        while self.pending:
            self._store(*self.pending.popleft())
        self.file.flush()
        parts, self.parts = self.parts, []
        n_chunks, rest = divmod(len(parts), n_batches)
        if rest:
            raise ValueError(f"expected a whole number of chunks per batch; found {len(parts)} for {n_batches}")
        for c in range(n_chunks):
            chunk = [self._read(*parts[b * n_chunks + c]) for b in range(n_batches)]
            yield type(chunk[0]).side_by_side(chunk)
        if not self.parts and not self.pending:  # nothing put meanwhile: the file starts again
            self.file.seek(0)
            self.file.truncate()

    def _read(self, offset: int, size: int, kind: type, restoring):
        """A chunk's columns, read without a seek (each flushed the file's
        buffer) and rebuilt with what put() kept (a VCF's record ends: found
        again in the text, they were a third of the time of reading a
        10,000-sample cohort's spool)."""
        return kind.restored(zlib_ng.decompress(os.pread(self.file.fileno(), size, offset)), restoring)

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
