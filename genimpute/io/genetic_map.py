"""Genetic maps: cM positions along a contig, for the copying model's
recombination rate and for the phasers.

A map is PLINK's (`chrom id cM bp`, no header, as Beagle reads) or
shapeit4's (`pos chr cM`, a header line). Without a map, positions are taken
at a constant 1 cM per Mb, as Beagle and shapeit4 assume.
"""

from __future__ import annotations

import gzip
import logging
from array import array
from pathlib import Path

import numpy as np

from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig
from genimpute.io.integrity import check_complete

log = logging.getLogger(__name__)

CM_PER_BP = 1e-6  # without a map: 1 cM per Mb


def _open_text(path: Path):
    check_complete(path)
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rt") if magic == b"\x1f\x8b" else open(path)


_CONTIG_HEADERS = ("chr", "chrom", "chromosome", "contig")  # shapeit4's header says `chr`


class GeneticMap:
    """A genetic map read once, every contig of it: a run reads the file
    once, where reading it for each contig would parse a genome-wide map 22
    times."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such genetic map file")
        self.names: set = set()  # the contigs as the file writes them
        self._positions: dict = {}  # normalised contig -> (bp array('q'), cM array('d'))
        self._warned: set = set()
        with _open_text(self.path) as handle:
            self._parse(handle)

    def _parse(self, handle) -> None:
        data_lines = 0
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            data_lines += 1
            parsed = self._fields(fields, number, line, data_lines)
            if parsed is None:  # a header line, as shapeit4's maps have
                continue
            chrom, position, cmorgan = parsed
            self.names.add(chrom)
            bp, cm = self._positions.setdefault(normalise_contig(chrom), (array("q"), array("d")))
            bp.append(position)
            cm.append(cmorgan)

    def _fields(self, fields: list, number: int, line: str, data_lines: int):
        """(contig, bp, cM) of one line; None for shapeit4's header line."""
        if len(fields) == 4:
            chrom, position, cmorgan = fields[0], fields[3], fields[2]
        elif len(fields) == 3:
            position, chrom, cmorgan = fields
        else:
            raise InputError(f"{self.path} line {number}: expected a genetic map line, PLINK `chrom id cM bp` or "
                             f"shapeit4 `pos chr cM`; found {len(fields)} columns")
        try:
            return chrom, int(position), float(cmorgan)
        except ValueError:
            if data_lines == 1 and len(fields) == 3 and fields[1].lower() not in _CONTIG_HEADERS:
                raise InputError(f"{self.path}: a HapMap/IMPUTE2 map (`position rate cM`, one chromosome per "
                                 "file) has no contig column; give a PLINK map (`chrom id cM bp`) or "
                                 "shapeit4's (`pos chr cM`)") from None
            if data_lines == 1:
                return None
            raise InputError(f"{self.path} line {number}: expected a base-pair position and a cM value; "
                             f"found {line.strip()!r}") from None

    def on(self, contig: str) -> tuple[np.ndarray, np.ndarray]:
        """(bp, cM) of the map's positions on `contig`, sorted by position."""
        positions = self._positions.get(normalise_contig(contig))
        if positions is None:
            found = ", ".join(sorted(self.names)[:10]) or "no positions"
            raise InputError(f"{self.path}: expected genetic map positions on contig {contig}; found {found}")
        bp, cm = np.frombuffer(positions[0], dtype=np.int64), np.frombuffer(positions[1], dtype=np.float64)
        order = np.argsort(bp, kind="stable")
        bp, cm = bp[order], cm[order]
        if contig not in self._warned:
            self._warned.add(contig)
            _warn_backwards(self.path, contig, bp, cm)
        return bp, cm


def _warn_backwards(path: Path, contig: str, bp: np.ndarray, cm: np.ndarray) -> None:
    """A map whose cM fall where bp rise is damaged or on another build; the
    engines clip such steps to no recombination, which the user should know."""
    falls = np.flatnonzero(np.diff(cm) < 0)
    if len(falls):
        log.warning("%s: the cM fall at %d of %d positions on contig %s (first at %d bp); read as no "
                    "recombination there: is the map on the panel's build?", path, len(falls), len(bp), contig,
                    bp[falls[0] + 1])


def read_map(path: str | Path | GeneticMap, contig: str) -> tuple[np.ndarray, np.ndarray]:
    """(bp, cM) of a genetic map's positions on `contig`, sorted: PLINK format
    (`chrom id cM bp`, no header) or shapeit4's (`pos chr cM`, a header line).
    A GeneticMap already read is not read again."""
    return (path if isinstance(path, GeneticMap) else GeneticMap(path)).on(contig)


def centimorgans(positions: np.ndarray, map_bp: np.ndarray, map_cm: np.ndarray) -> np.ndarray:
    """(M,) cM of base-pair `positions` on a map's contig: linear between the
    map's positions, and at 1 cM per Mb beyond its ends."""
    positions = np.asarray(positions, dtype=np.float64)
    cm = np.interp(positions, map_bp, map_cm)
    before, after = positions < map_bp[0], positions > map_bp[-1]
    cm[before] = map_cm[0] - (map_bp[0] - positions[before]) * CM_PER_BP
    cm[after] = map_cm[-1] + (positions[after] - map_bp[-1]) * CM_PER_BP
    return cm
