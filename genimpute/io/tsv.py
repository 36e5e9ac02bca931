"""The TSV files `impute --report` writes (per record, per sample)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from genimpute.errors import InputError


@contextmanager
def report_rows(path: str | Path, header: list[str]) -> Iterator:
    """A csv writer of tab-separated rows into `path`, its header written;
    one clear error when the file cannot be written."""
    try:
        handle = open(path, "w", newline="")
    except OSError as exc:
        raise InputError(f"--audit {path}: cannot write it ({exc.strerror})") from exc
    with handle:
        out = csv.writer(handle, delimiter="\t", lineterminator="\n")
        out.writerow(header)
        yield out
