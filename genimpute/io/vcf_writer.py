"""Writing imputed VCFs: bgzipped, tabix-indexed, moved into place only
when complete.

FORMAT GT:DS:GP on every biallelic record; INFO AF (estimated alt allele
frequency), DR2 (estimated dosage r2) and IMP on imputed records, as Beagle
writes them. Sample columns are built from lookup tables of pre-formatted
numbers, as bytes, not one format call per value.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from genimpute.errors import InputError

_RESOLUTION = 1000  # three decimals


def _decimals(top: int) -> list[str]:
    """Strings for i / 1000 for i in 0..top, trailing zeros trimmed."""
    return [f"{i / _RESOLUTION:.3f}".rstrip("0").rstrip(".") for i in range(top + 1)]


def _byte_table(strings: list[str], width: int | None = None) -> np.ndarray:
    """(n, width) uint8: each string's ASCII bytes, padded with zero bytes,
    which no VCF text holds, so that padding is dropped by `!= 0`."""
    table = np.zeros((len(strings), width or max(map(len, strings))), dtype=np.uint8)
    for i, text in enumerate(strings):
        table[i, :len(text)] = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return table


_GT = _byte_table(["0|0", "0|1", "1|0", "1|1"])
_HAPLOID_GT = _byte_table(["0", "1"], width=_GT.shape[1])
_DS = _byte_table(_decimals(2 * _RESOLUTION))
_PROB = _byte_table(_decimals(_RESOLUTION))


def _fraction_index(x: np.ndarray) -> np.ndarray:
    return np.rint(x * _RESOLUTION).astype(np.int64)


def _character(char: str, shape: tuple) -> np.ndarray:
    return np.full((*shape, 1), ord(char), dtype=np.uint8)


def genotype_columns(p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None = None) -> list[str]:
    """Per record, its sample columns GT:DS:GP joined by tabs, from
    per-haplotype alt probabilities (V, S); where `haploid` (V, S) is set, a
    haploid call from p1 alone (GT 0 or 1, DS = p1, GP = (1 - p1, p1)) and
    p2 is ignored.

    Built as bytes: each field is a row of a table of padded, pre-formatted
    values, the fields of all V x S calls are laid side by side and the
    padding dropped in one pass, with no Python string operation per call."""
    if not p1.size:
        return [""] * len(p1)
    p1, p2 = np.clip(p1, 0, 1), np.clip(p2, 0, 1)  # out-of-range values would wrap the lookup tables
    shape = p1.shape
    gp0 = (1 - p1) * (1 - p2)
    gp2 = p1 * p2
    gp1 = 1 - gp0 - gp2
    fields = [_GT[2 * (p1 >= 0.5) + (p2 >= 0.5)], _character(":", shape), _DS[_fraction_index(p1 + p2)],
              _character(":", shape), _PROB[_fraction_index(gp0)], _character(",", shape),
              _PROB[_fraction_index(np.clip(gp1, 0, 1))], _character(",", shape), _PROB[_fraction_index(gp2)],
              _character("\t", shape)]
    if haploid is not None and haploid.any():
        p = p1[haploid]
        fields[0][haploid] = _HAPLOID_GT[(p >= 0.5).astype(np.int64)]
        fields[2][haploid] = _DS[_fraction_index(p)]
        fields[4][haploid] = _PROB[_fraction_index(1 - p)]
        fields[6][haploid] = _PROB[_fraction_index(p)]
        fields[7][haploid] = fields[8][haploid] = 0  # no third probability
    fields[-1][:, -1] = 0  # no tab after a record's last sample
    cells = np.concatenate(fields, axis=-1).reshape(shape[0], -1)
    kept = cells != 0  # (V, S x width): the padding dropped
    text = cells[kept].tobytes().decode("ascii")
    ends = np.cumsum(kept.sum(axis=1)).tolist()
    return [text[start:end] for start, end in zip([0, *ends[:-1]], ends)]


def dosage_r2(p: np.ndarray, present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(AF, DR2) per variant from haplotype alt probabilities (V, H), over
    the haplotypes `present` (V, H) marks (all by default; a haploid call
    has one).

    DR2 = variance of the haplotype dosages over haplotypes divided by
    AF * (1 - AF): the expected squared correlation between imputed and true
    allele dosage when the probabilities are calibrated (the estimator
    Minimac4 reports as R2). 0 for monomorphic estimates."""
    if present is None:
        af, var = p.mean(axis=1), p.var(axis=1)
    else:
        n = present.sum(axis=1)
        af = np.where(present, p, 0).sum(axis=1) / n
        var = np.where(present, (p - af[:, None]) ** 2, 0).sum(axis=1) / n
    denom = af * (1 - af)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(denom > 1e-12, var / denom, 0.0)
    return af, np.clip(r2, 0.0, 1.0)


HEADER_LINES = [
    '##INFO=<ID=AF,Number=A,Type=Float,Description="Estimated alternate allele frequency">',
    '##INFO=<ID=DR2,Number=A,Type=Float,Description="Estimated dosage r-squared: variance of haplotype dosages / (AF*(1-AF))">',
    '##INFO=<ID=IMP,Number=0,Type=Flag,Description="Imputed marker">',
    '##INFO=<ID=IMPMISS,Number=1,Type=Integer,Description="Missing calls of this typed marker filled in by imputation">',
    '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
    '##FORMAT=<ID=DS,Number=A,Type=Float,Description="Estimated alternate allele dosage">',
    '##FORMAT=<ID=GP,Number=G,Type=Float,Description="Estimated genotype probabilities">',
]


class VcfWriter:
    """Context manager writing a bgzipped VCF to a hidden temporary file next
    to `path`; on a clean exit it is indexed and renamed to `path`, on an
    error it is deleted, so `path` never holds a partial file."""

    def __init__(self, path: str | Path, force: bool = False):
        self.path = Path(path)
        if not self.path.name.endswith(".vcf.gz"):
            raise InputError(f"output {self.path}: expected a name ending in .vcf.gz")
        if self.path.exists() and not force:
            raise InputError(f"output {self.path}: exists; pass --force to overwrite")
        if not self.path.parent.is_dir():
            raise InputError(f"output {self.path}: directory {self.path.parent} does not exist")
        self.tmp = self.path.with_name(f".tmp{os.getpid()}.{self.path.name}")
        self.records = 0

    def __enter__(self):
        import pysam

        self.handle = pysam.BGZFile(str(self.tmp), "wb")
        return self

    def write_header(self, samples: list, contigs: list, meta: dict) -> None:
        lines = ["##fileformat=VCFv4.2", f"##fileDate={time.strftime('%Y%m%d')}"]
        lines += [f"##{key}={value}" for key, value in meta.items()]
        lines += HEADER_LINES
        lines += [f"##contig=<ID={c}>" for c in contigs]
        lines.append("\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *samples]))
        self._write(lines)

    def write_records(self, fixed: list, info: list, fmt: str, samples: list) -> None:
        """fixed: per record [CHROM, POS, ID, REF, ALT]; samples: per record,
        its sample columns joined by tabs (as genotype_columns)."""
        self._write(["\t".join([*f, ".", "PASS", i, fmt, row]) for f, i, row in zip(fixed, info, samples)])
        self.records += len(fixed)

    def _write(self, lines: list) -> None:
        if lines:
            self.handle.write(("\n".join(lines) + "\n").encode())

    def __exit__(self, exc_type, exc, tb):
        import pysam

        self.handle.close()
        index = Path(f"{self.tmp}.tbi")
        try:
            if exc_type is None:
                pysam.tabix_index(str(self.tmp), preset="vcf", force=True)
                os.replace(self.tmp, self.path)
                os.replace(index, f"{self.path}.tbi")
        finally:
            for leftover in (self.tmp, index):
                if leftover.exists():
                    leftover.unlink()
        return False
