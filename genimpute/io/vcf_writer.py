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

import numba as nb
import numpy as np

from genimpute.errors import InputError
from genimpute.io.bgzf import BgzfWriter

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


def _lengths(table: np.ndarray) -> np.ndarray:
    return (table != 0).sum(axis=1)


_GT_LENGTHS, _HAPLOID_GT_LENGTHS, _DS_LENGTHS, _PROB_LENGTHS = map(_lengths, (_GT, _HAPLOID_GT, _DS, _PROB))


@nb.njit(cache=True)
def _copy_entry(out, at, table, lengths, i):
    for c in range(lengths[i]):
        out[at + c] = table[i, c]
    return at + lengths[i]


@nb.njit(cache=True)
def _sample_columns(gt, ds, gp0, gp1, gp2, haploid, gt_table, gt_lengths, haploid_table, haploid_lengths,
                    ds_table, ds_lengths, prob_table, prob_lengths):
    """(text, ends): every record's sample columns GT:DS:GP as ASCII bytes,
    record v ending at ends[v], from each call's row in the tables of
    pre-formatted values (indices (V, S) each; haploid (V, S) bool: GT from
    haploid_table and two probabilities)."""
    n_records, n_samples = gt.shape
    width = gt_table.shape[1] + ds_table.shape[1] + 3 * prob_table.shape[1] + 5
    out = np.empty(n_records * n_samples * width, dtype=np.uint8)
    ends = np.empty(n_records, dtype=np.int64)
    at = 0
    for v in range(n_records):
        for s in range(n_samples):
            if s:
                out[at] = 9  # tab
                at += 1
            if haploid[v, s]:
                at = _copy_entry(out, at, haploid_table, haploid_lengths, gt[v, s])
            else:
                at = _copy_entry(out, at, gt_table, gt_lengths, gt[v, s])
            out[at] = 58  # colon
            at = _copy_entry(out, at + 1, ds_table, ds_lengths, ds[v, s])
            out[at] = 58
            at = _copy_entry(out, at + 1, prob_table, prob_lengths, gp0[v, s])
            out[at] = 44  # comma
            at = _copy_entry(out, at + 1, prob_table, prob_lengths, gp1[v, s])
            if not haploid[v, s]:
                out[at] = 44
                at = _copy_entry(out, at + 1, prob_table, prob_lengths, gp2[v, s])
        ends[v] = at
    return out[:at], ends


def genotype_columns(p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None = None) -> list[str]:
    """Per record, its sample columns GT:DS:GP joined by tabs, from
    per-haplotype alt probabilities (V, S); where `haploid` (V, S) is set, a
    haploid call from p1 alone (GT 0 or 1, DS = p1, GP = (1 - p1, p1)) and
    p2 is ignored.

    Each value is a row of a table of pre-formatted numbers (three
    decimals), copied into one byte buffer in compiled code, with no Python
    string operation per call."""
    if not p1.size:
        return [""] * len(p1)
    p1, p2 = np.clip(p1, 0, 1), np.clip(p2, 0, 1)  # out-of-range values would wrap the lookup tables
    gp0 = (1 - p1) * (1 - p2)
    gp2 = p1 * p2
    gp1 = np.clip(1 - gp0 - gp2, 0, 1)
    gt, ds = 2 * (p1 >= 0.5) + (p2 >= 0.5), p1 + p2
    if haploid is None:
        haploid = np.zeros(p1.shape, dtype=bool)
    else:  # GT, DS and GP = (1 - p1, p1) from p1 alone
        gt, ds = np.where(haploid, p1 >= 0.5, gt), np.where(haploid, p1, ds)
        gp0, gp1 = np.where(haploid, 1 - p1, gp0), np.where(haploid, p1, gp1)
    text, ends = _sample_columns(gt.astype(np.int64), *map(_fraction_index, (ds, gp0, gp1, gp2)),
                                 np.ascontiguousarray(haploid), _GT, _GT_LENGTHS, _HAPLOID_GT, _HAPLOID_GT_LENGTHS,
                                 _DS, _DS_LENGTHS, _PROB, _PROB_LENGTHS)
    text = text.tobytes().decode("ascii")
    ends = ends.tolist()
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
        self.handle = BgzfWriter(self.tmp)
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
