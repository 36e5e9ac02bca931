"""Sample columns spooled to a temporary file, batch by batch, and read
back record by record: how a cohort of thousands of samples is written with
the memory of one batch (as Minimac4 spools its sample chunks).

Each batch's text of a window is compressed (zlib-ng level 1, in worker
threads) into an unnamed temporary file beside the output,
which the system deletes whatever way the process ends.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from zlib_ng import zlib_ng

from genimpute.io.scratch import naming
from genimpute.io.vcf_writer import ColumnText
from genimpute.runtime import usable_cores

LEVEL = 1  # the text is regular: level 1 already compresses it well, and much faster than 6


class ColumnSpool:
    """put() the chunks of a window batch by batch, each batch's chunks in
    the same order; joined() then gives each chunk with the batches' columns
    side by side, and empties the spool for the next window."""

    def __init__(self, directory: str | Path, threads: int | None = None):
        self.directory = directory
        self.file = tempfile.TemporaryFile(dir=directory, prefix=".genimpute-spool.")
        self.pool = ThreadPoolExecutor(max_workers=threads or min(2, usable_cores()))
        self.pending: deque = deque()  # (compressed text to come, record ends) of each chunk put
        self.parts: list[tuple[int, int, np.ndarray]] = []  # (offset, size, record ends) of each chunk, in put order

    def put(self, columns: ColumnText) -> None:
        self.pending.append((self.pool.submit(zlib_ng.compress, columns.text, LEVEL), columns.ends))
        while len(self.pending) > 8:  # bound the compressed chunks held in memory
            self._store(*self.pending.popleft())

    def _store(self, compressed, ends: np.ndarray) -> None:
        data = compressed.result()
        self.parts.append((self.file.tell(), len(data), ends))  # reads (os.pread) leave the position at the end
        with naming(f"{self.directory} (a temporary file of the output's columns)"):
            self.file.write(data)

    def joined(self, n_batches: int):
        """Yield each chunk's ColumnText with every batch's columns, in
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
            yield ColumnText.side_by_side([self._read(*parts[b * n_chunks + c]) for b in range(n_batches)])
        if not self.parts and not self.pending:  # nothing put meanwhile: the file starts again
            self.file.seek(0)
            self.file.truncate()

    def _read(self, offset: int, size: int, ends: np.ndarray) -> ColumnText:
        """A chunk's columns, read without a seek (each flushed the file's
        buffer) and with the record ends kept at put() (found again in the
        text, they were a third of the time of reading a 10,000-sample
        cohort's spool)."""
        data = zlib_ng.decompress(os.pread(self.file.fileno(), size, offset))
        return ColumnText(np.frombuffer(data, dtype=np.uint8), ends)

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
