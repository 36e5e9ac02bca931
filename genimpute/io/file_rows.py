"""2-D arrays kept in files and read a few rows at a time: in an
uncompressed .npz (np.savez's layout; write_npz writes one with an array
streamed in blocks) or spooled to a file block by block. A panel's records
(genimpute.io.sparse_rows keeps them in two such arrays) need then never
be whole in memory, to convert or to impute: only a block of them, or the
rows of the segment being imputed.
"""

from __future__ import annotations

import os
import struct
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable

import numpy as np

from genimpute.errors import CheckpointError
from genimpute.io.scratch import naming

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # a zip member's local file header: name and extra lengths last
_MAX_READ = 1 << 30  # bytes per pread: Linux reads at most about 2 GB per call


def row_numbers(rows, n: int) -> np.ndarray:
    """Rows given as a slice, an integer array or a mask, as int64 row numbers."""
    if isinstance(rows, slice):
        return np.arange(*rows.indices(n), dtype=np.int64)
    rows = np.asarray(rows)
    rows = np.flatnonzero(rows) if rows.dtype == bool else rows.astype(np.int64).ravel()
    if len(rows) and (rows.min() < -n or rows.max() >= n):
        raise IndexError(f"rows {rows.min()}..{rows.max()} out of range for {n} rows")
    return np.where(rows < 0, rows + n, rows)


def read_spans(rows_of, first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """rows_of[first[i]:stop[i]] for each i, joined and flattened (rows_of:
    an array or FileRows of one column): spans that follow one another are
    read as one run, and a FileRows's runs with one open of its file."""
    nonempty = stop > first
    first, stop = first[nonempty], stop[nonempty]
    if not len(first):
        return np.empty(0, dtype=rows_of.dtype)
    breaks = np.flatnonzero(first[1:] != stop[:-1]) + 1
    run_first, run_stop = first[np.r_[0, breaks]], stop[np.r_[breaks - 1, len(stop) - 1]]
    if isinstance(rows_of, FileRows):
        return rows_of.runs(run_first.tolist(), (run_stop - run_first).tolist()).reshape(-1)
    return np.concatenate([rows_of[a:b] for a, b in zip(run_first.tolist(), run_stop.tolist())]).reshape(-1)


def packed_blocks(packed, block_bytes: int = 64 << 20, rows: np.ndarray | None = None):
    """The rows of packed (M, W), an array, FileRows or SparseRows (every
    one, or those numbered in `rows`, in its order), a block of about
    block_bytes at a time."""
    step = max(1, block_bytes // max(1, packed.shape[1] * packed.dtype.itemsize))
    for start in range(0, len(packed) if rows is None else len(rows), step):
        yield packed[start:start + step] if rows is None else packed[rows[start:start + step]]


class FileRows:
    """The rows of a C-ordered 2-D array at `offset` in a file, read when
    indexed (by a slice, an integer, an integer array or a mask) as an
    ndarray copy. The file must not change while in use."""

    def __init__(self, path: str | Path, offset: int, shape: tuple, dtype, fd: int | None = None):
        """`fd`: read from this open file descriptor (of the file `path`
        names in messages), not from the file opened at `path`."""
        self.path, self.offset, self.fd = Path(path), offset, fd
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        self.row_bytes = self.shape[1] * self.dtype.itemsize
        self.stamp = _stamp(self.path if fd is None else fd)
        if self.offset + self.shape[0] * self.row_bytes > self.stamp[0]:
            raise ValueError(f"{self.path}: expected {self.shape[0] * self.row_bytes} bytes of rows from byte "
                             f"{offset}; found the file ends at {self.stamp[0]} (truncated)")

    ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, (int, np.integer)):
            return self[np.array([rows])][0]
        if isinstance(rows, slice) and rows.indices(len(self))[2] == 1:  # one run, read without numbering its rows
            start, stop, _ = rows.indices(len(self))
            out = np.empty((max(0, stop - start), self.shape[1]), dtype=self.dtype)
            if out.size:
                self._read_runs([start], [len(out)], out)
            return out
        rows = np.arange(*rows.indices(len(self))) if isinstance(rows, slice) else np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64).ravel()
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"rows {rows.min()}..{rows.max()} out of range for {len(self)} rows")
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        if not out.size:
            return out
        if np.all(rows[1:] > rows[:-1]):
            self._read_sorted(rows, out)
            return out
        order = np.argsort(rows, kind="stable")
        in_order = np.empty_like(out)
        self._read_sorted(rows[order], in_order)
        out[order] = in_order
        return out

    def runs(self, firsts: list, lengths: list) -> np.ndarray:
        """The runs of lengths[i] rows from row firsts[i], one after another, read with one open of the file."""
        if any(f < 0 or f + n > len(self) for f, n in zip(firsts, lengths)):
            raise IndexError(f"runs out of range for {len(self)} rows")
        out = np.empty((sum(lengths), self.shape[1]), dtype=self.dtype)
        if out.size:
            self._read_runs(firsts, lengths, out)
        return out

    def _read_sorted(self, rows: np.ndarray, out: np.ndarray) -> None:
        """Read ascending `rows` into out, each run of consecutive rows in one read."""
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        starts, ends = np.r_[0, breaks], np.r_[breaks, len(rows)]
        self._read_runs(rows[starts].tolist(), (ends - starts).tolist(), out)

    def _read_runs(self, firsts: list, lengths: list, out: np.ndarray) -> None:
        """Read the runs of lengths[i] rows from row firsts[i] into out, one after another."""
        fd = os.open(self.path, os.O_RDONLY) if self.fd is None else self.fd
        try:
            if _stamp(fd) != self.stamp:
                raise CheckpointError(f"{self.path}: the file changed while in use; expected it unchanged")
            view = memoryview(out.reshape(-1).view(np.uint8))
            at = 0
            for first, n in zip(firsts, lengths):
                self._pread_into(fd, view[at * self.row_bytes:(at + n) * self.row_bytes],
                                 self.offset + first * self.row_bytes)
                at += n
        finally:
            if self.fd is None:
                os.close(fd)

    def _pread_into(self, fd: int, view: memoryview, offset: int) -> None:
        done = 0
        while done < len(view):
            n = os.preadv(fd, [view[done:done + _MAX_READ]], offset + done)
            if n == 0:
                raise CheckpointError(f"{self.path}: ended {len(view) - done} bytes early; expected it unchanged")
            done += n


def _stamp(file: int | Path) -> tuple[int, int]:
    """(size, modification time) of a file descriptor or path."""
    status = os.fstat(file) if isinstance(file, int) else os.stat(file)
    return status.st_size, status.st_mtime_ns


def npz_rows(path: str | Path, name: str) -> FileRows:
    """The rows of array `name` of an uncompressed .npz file (np.savez's, or write_npz's)."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{name}: expected an uncompressed member (np.savez); found compression type "
                         f"{info.compress_type}")
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        fields = _LOCAL_HEADER.unpack(handle.read(_LOCAL_HEADER.size))
        if fields[0] != b"PK\x03\x04":
            raise ValueError(f"{name}: expected a zip local file header; found {fields[0]!r}")
        handle.seek(info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1])
        version = np.lib.format.read_magic(handle)
        shape, fortran_order, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                       else np.lib.format.read_array_header_2_0)(handle)
        offset = handle.tell()
    if len(shape) != 2 or fortran_order or dtype.hasobject:
        raise ValueError(f"{name}: expected a C-ordered 2-D array; found shape {shape}, dtype {dtype}, "
                         f"fortran_order={fortran_order}")
    return FileRows(path, offset, shape, dtype)


class RowSpool:
    """Blocks of rows appended to an unnamed temporary file in `directory`
    (which the system deletes whatever way the process ends), read back as
    FileRows (rows()) until the spool is closed. How a panel is converted
    with the memory of one block of records, where gathering them took
    twice the packed panel."""

    def __init__(self, directory: str | Path, dtype=np.uint8):
        self.directory, self.dtype = Path(directory), np.dtype(dtype)
        self.file = tempfile.TemporaryFile(dir=self.directory, prefix=".genimpute-rows.")
        self.n_rows, self.width = 0, None  # the width: the first block's

    def __enter__(self) -> "RowSpool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Delete the spooled rows: FileRows read from them fail from then on."""
        self.file.close()

    def __len__(self) -> int:
        return self.n_rows

    def append(self, block: np.ndarray) -> None:
        self.width = block.shape[1] if self.width is None else self.width
        if block.shape[1:] != (self.width,):
            raise ValueError(f"expected rows of {self.width}; found {block.shape[1:]}")
        with naming(f"{self.directory} (a temporary file of the panel's records)"):
            self.file.write(memoryview(np.ascontiguousarray(block, dtype=self.dtype).reshape(-1).view(np.uint8)))
        self.n_rows += len(block)

    def reset(self) -> None:
        """Drop every row appended."""
        self.file.seek(0)
        self.file.truncate()
        self.n_rows, self.width = 0, None

    def rows(self) -> FileRows:
        self.file.flush()
        return FileRows(self.directory / "(spooled rows)", 0, (self.n_rows, self.width or 0), self.dtype,
                        fd=self.file.fileno())


def write_npz(handle, arrays: dict, streamed: dict) -> None:
    """Write an uncompressed .npz to the binary `handle`, as np.savez would:
    `arrays` {name: array}, then `streamed` {name: (shape, dtype, blocks)},
    each array's rows written block after block (an iterable of arrays
    whose rows total shape[0])."""
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
        for name, (shape, dtype, blocks) in streamed.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                _write_rows(member, tuple(shape), np.dtype(dtype), blocks, name)


def _write_rows(member, shape: tuple, dtype: np.dtype, blocks: Iterable, name: str) -> None:
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(member, header)  # as np.save writes a 2-D array's
    written = 0
    for block in blocks:
        block = np.ascontiguousarray(block, dtype=dtype)
        if block.shape[1:] != shape[1:]:
            raise ValueError(f"{name}: expected blocks of rows of shape {shape[1:]}; found {block.shape[1:]}")
        member.write(memoryview(block).cast("B"))
        written += len(block)
    if written != shape[0]:
        raise ValueError(f"{name}: expected {shape[0]} rows; found {written}")
