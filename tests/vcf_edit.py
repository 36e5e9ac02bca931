"""Edit the committed target slice record by record, to make odd inputs
(swapped or strand-flipped alleles, missing or haploid calls, shifted builds)
from real data."""

import gzip
from pathlib import Path

import numpy as np
from paths import TARGET_PHASED

COMPLEMENT = str.maketrans("ACGT", "TGCA")


def read_lines(path: Path = TARGET_PHASED) -> tuple[list[str], list[list[str]]]:
    """(header lines, records split into fields)."""
    with gzip.open(path, "rt") as handle:
        lines = handle.read().splitlines()
    return [x for x in lines if x.startswith("#")], [x.split("\t") for x in lines if not x.startswith("#")]


def write(path: Path, header: list[str], records: list[list[str]]) -> Path:
    path.write_text("\n".join(header + ["\t".join(r) for r in records]) + "\n")
    return path


def on_two_contigs(source: Path, path: Path) -> Path:
    """The VCF at source with its records again on contig 21."""
    header, records = read_lines(source)
    return write(path, header, records + [["21", *r[1:]] for r in records])


def is_palindromic(record: list[str]) -> bool:
    return record[3].translate(COMPLEMENT) == record[4]


def swap(record: list[str]) -> list[str]:
    """REF and ALT exchanged, genotypes recoded: the same genotypes."""
    calls = [c.translate(str.maketrans("01", "10")) for c in record[9:]]
    return record[:3] + [record[4], record[3]] + record[5:9] + calls


def flip(record: list[str]) -> list[str]:
    """Both alleles on the other strand: the same genotypes."""
    return record[:3] + [record[3].translate(COMPLEMENT), record[4].translate(COMPLEMENT)] + record[5:]


def hide_calls(records: list[list[str]], share: float, seed: int) -> set[tuple[str, int]]:
    """Set about `share` of the calls to `.|.`, in place; (POS, column) of each."""
    rng = np.random.default_rng(seed)
    hidden = set()
    for record in records:
        for s in range(9, len(record)):
            if rng.random() < share:
                record[s] = ".|."
                hidden.add((record[1], s))
    return hidden
