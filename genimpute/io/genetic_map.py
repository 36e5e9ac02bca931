"""Genetic maps: cM positions along a contig, for the copying model's
recombination rate and for the phasers.

A map is PLINK's (`chrom id cM bp`, no header, as Beagle reads) or
shapeit4's (`pos chr cM`, a header line). Without a map, positions are taken
at a constant 1 cM per Mb, as Beagle and shapeit4 assume.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig

CM_PER_BP = 1e-6  # without a map: 1 cM per Mb


def _open_text(path: Path):
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rt") if magic == b"\x1f\x8b" else open(path)


_CONTIG_HEADERS = ("chr", "chrom", "chromosome", "contig")  # shapeit4's header says `chr`


def read_map(path: str | Path, contig: str) -> tuple[np.ndarray, np.ndarray]:
    """(bp, cM) of a genetic map's positions on `contig`, sorted: PLINK format
    (`chrom id cM bp`, no header) or shapeit4's (`pos chr cM`, a header line)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such genetic map file")
    key = normalise_contig(contig)
    bp, cm, contigs, data_lines = [], [], set(), 0
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            data_lines += 1
            if len(fields) == 4:
                chrom, position, cmorgan = fields[0], fields[3], fields[2]
            elif len(fields) == 3:
                position, chrom, cmorgan = fields
            else:
                raise InputError(f"{path} line {number}: expected a genetic map line, PLINK `chrom id cM bp` or "
                                 f"shapeit4 `pos chr cM`; found {len(fields)} columns")
            try:
                position, cmorgan = int(position), float(cmorgan)
            except ValueError:
                if data_lines == 1 and len(fields) == 3 and fields[1].lower() not in _CONTIG_HEADERS:
                    raise InputError(f"{path}: a HapMap/IMPUTE2 map (`position rate cM`, one chromosome per "
                                     "file) has no contig column; give a PLINK map (`chrom id cM bp`) or "
                                     "shapeit4's (`pos chr cM`)") from None
                if data_lines == 1:  # a header line, as shapeit4's maps have
                    continue
                raise InputError(f"{path} line {number}: expected a base-pair position and a cM value; "
                                 f"found {line.strip()!r}") from None
            contigs.add(chrom)
            if normalise_contig(chrom) == key:
                bp.append(position)
                cm.append(cmorgan)
    if not bp:
        found = ", ".join(sorted(contigs)[:10]) or "no positions"
        raise InputError(f"{path}: expected genetic map positions on contig {contig}; found {found}")
    order = np.argsort(bp, kind="stable")
    return np.asarray(bp, dtype=np.int64)[order], np.asarray(cm, dtype=np.float64)[order]


def centimorgans(positions: np.ndarray, map_bp: np.ndarray, map_cm: np.ndarray) -> np.ndarray:
    """(M,) cM of base-pair `positions` on a map's contig: linear between the
    map's positions, and at 1 cM per Mb beyond its ends."""
    positions = np.asarray(positions, dtype=np.float64)
    cm = np.interp(positions, map_bp, map_cm)
    before, after = positions < map_bp[0], positions > map_bp[-1]
    cm[before] = map_cm[0] - (map_bp[0] - positions[before]) * CM_PER_BP
    cm[after] = map_cm[-1] + (positions[after] - map_bp[-1]) * CM_PER_BP
    return cm
