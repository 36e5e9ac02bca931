"""SNP-array marker lists: `CHROM POS` or `CHROM POS REF ALT` per line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from genimpute.errors import InputError
from genimpute.io.contigs import normalise_contig


@dataclass(frozen=True)
class ArraySites:
    """Positions typed by an array. Sites listed with alleles only match panel
    records with those alleles; sites without alleles match the panel's SNPs."""

    positions: frozenset  # {(contig_key, pos)}
    alleles: frozenset  # {(contig_key, pos, ref, alt)} for lines that gave alleles

    def __post_init__(self):
        object.__setattr__(self, "_positions_with_alleles", frozenset((c, p) for c, p, _, _ in self.alleles))

    def __len__(self) -> int:
        return len(self.positions)

    def types(self, contig_key: str, pos: int, ref: str, alt: str) -> bool:
        """Whether the array types the record CONTIG:POS:REF:ALT: a site
        listed with alleles types the record with those alleles; a bare
        position types the SNPs there."""
        site = (contig_key, pos)
        if site in self._positions_with_alleles:
            return (contig_key, pos, ref.upper(), alt.upper()) in self.alleles
        return site in self.positions and len(ref) == 1 and len(alt) == 1


def read_array_list(path: str | Path) -> ArraySites:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"array list {path}: no such file")
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"array list {path}: expected plain text (decompress it first); found binary data") from exc
    positions, alleles = set(), set()
    for lineno, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) not in (2, 4):
            raise InputError(
                f"array list {path} line {lineno}: expected 'CHROM POS' or "
                f"'CHROM POS REF ALT'; found {len(fields)} fields: {line[:80]!r}"
            )
        contig = normalise_contig(fields[0])
        try:
            pos = int(fields[1])
        except ValueError:
            pos = 0
        if pos < 1:
            raise InputError(
                f"array list {path} line {lineno}: expected a positive integer "
                f"position; found {fields[1]!r}"
            )
        positions.add((contig, pos))
        if len(fields) == 4:
            alleles.add((contig, pos, fields[2].upper(), fields[3].upper()))
    if not positions:
        raise InputError(f"array list {path}: expected at least one site; found none")
    return ArraySites(frozenset(positions), frozenset(alleles))
