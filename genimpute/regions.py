"""Genomic regions (CHR, CHR:START-END, CHR:START-) and the chunk lists that
split a panel's contigs into regions for scattered imputation.

Chunks of one contig tile it without gaps or overlaps, from position 1 to
the end (the first chunk reaches back to 1, the last is open-ended), so every
record lands in exactly one chunk whatever its position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig

_REGION = re.compile(r"^(?P<contig>[^:\s]+)(?::(?P<start>[\d,]+)-(?P<end>[\d,]*))?$")
_SIZE = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>|bp|kb|mb)$", re.IGNORECASE)
_UNIT = {"": 1, "bp": 1, "kb": 1_000, "mb": 1_000_000}


@dataclass(frozen=True)
class Region:
    contig: str  # as written by the user or the panel
    start: int = 1  # 1-based, inclusive
    end: int | None = None  # inclusive; None: to the end of the contig

    @property
    def key(self) -> str:
        return normalise_contig(self.contig)

    def contains(self, contig_key: str, pos: int) -> bool:
        return contig_key == self.key and self.start <= pos and (self.end is None or pos <= self.end)

    def contains_each(self, contig_keys: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(n,) bool: contains() of each record, by its contig key and 1-based position."""
        positions = np.asarray(positions)
        inside = (np.asarray(contig_keys) == self.key) & (positions >= self.start)
        return inside if self.end is None else inside & (positions <= self.end)

    def __str__(self) -> str:
        return f"{self.contig}:{self.start}-{'' if self.end is None else self.end}"


def parse_region(text: str) -> Region:
    match = _REGION.match(text.strip())
    if not match:
        raise InputError(f"region: expected CHR, CHR:START-END or CHR:START-; found {text!r}")
    if match["start"] is None:
        return Region(match["contig"])
    start = int(match["start"].replace(",", ""))
    end = int(match["end"].replace(",", "")) if match["end"] else None
    if start < 1 or (end is not None and end < start):
        raise InputError(f"region: expected 1 <= START <= END; found {text!r}")
    return Region(match["contig"], start, end)


def parse_size(text: str, what: str) -> int:
    """Base pairs from '5Mb', '250kb', '1000' (case-insensitive)."""
    match = _SIZE.match(text.strip())
    if not match or float(match["number"]) * _UNIT[match["unit"].lower()] < 1:
        raise InputError(f"{what}: expected a size such as 5Mb, 250kb or 100000; found {text!r}")
    return int(float(match["number"]) * _UNIT[match["unit"].lower()])


def plan_chunks(spans: dict, size: int) -> list[Region]:
    """Chunks of `size` bp per contig ({name: (first, last) record position},
    in file order), starting at the first record; the first chunk reaches
    back to position 1 and the last is open-ended."""
    chunks = []
    for contig, (first, last) in spans.items():
        start, end = 1, first + size - 1
        while end < last:
            chunks.append(Region(contig, start, end))
            start, end = end + 1, end + size
        chunks.append(Region(contig, start, None))
    return chunks
