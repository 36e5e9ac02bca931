"""Writing imputed VCFs: bgzipped, tabix-indexed, moved into place only
when complete.

FORMAT GT:DS:GP on every biallelic record by default (GT and any of DS,
HDS and GP: FormatFields); INFO AF (estimated alt allele frequency), DR2
(estimated dosage r2) and IMP on imputed records, as Beagle writes them.
Sample columns are built from lookup tables of pre-formatted numbers, as
bytes, not one format call per value.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from genimpute.errors import InputError
from genimpute.io.bgzf import BgzfWriter
from genimpute.io.scratch import naming, publish, remove_stale_temporaries
from genimpute.io.tabix import TabixIndex

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


# FORMAT fields an imputed record may carry, by code, in the order they are written
GT, DS, HDS, GP = range(4)
FORMAT_NAMES = ("GT", "DS", "HDS", "GP")
FORMAT_LINES = {
    "GT": '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
    "DS": '##FORMAT=<ID=DS,Number=A,Type=Float,Description="Estimated alternate allele dosage">',
    "HDS": '##FORMAT=<ID=HDS,Number=.,Type=Float,Description="Estimated alternate allele dosage of each haplotype">',
    "GP": '##FORMAT=<ID=GP,Number=G,Type=Float,Description="Estimated genotype probabilities">',
}


@dataclass(frozen=True)
class FormatFields:
    """The FORMAT fields of imputed and typed records: GT and any of DS,
    HDS and GP, written in that order whatever order they are given in
    (records passed through from the target carry GT alone)."""

    names: tuple = ("GT", "DS", "GP")

    def __post_init__(self):
        unknown = [n for n in self.names if n not in FORMAT_NAMES]
        if unknown:
            raise InputError(f"--format: expected fields among {', '.join(FORMAT_NAMES)}; found {', '.join(unknown)}")
        if "GT" not in self.names or len(set(self.names)) != len(self.names):
            raise InputError(f"--format: expected GT and each field once; found {':'.join(self.names)}")
        object.__setattr__(self, "names", tuple(n for n in FORMAT_NAMES if n in self.names))

    @classmethod
    def parse(cls, text: str) -> FormatFields:
        """From 'GT:DS' or 'gt,ds,gp'."""
        return cls(tuple(name.strip().upper() for name in text.replace(",", ":").split(":")))

    def __str__(self) -> str:
        return ":".join(self.names)

    def flags(self) -> np.ndarray:
        """(4,) bool: which of FORMAT_NAMES, by code, are written."""
        return np.array([n in self.names for n in FORMAT_NAMES])

    def header_lines(self) -> list[str]:
        return [FORMAT_LINES[n] for n in self.names]


# GT strings: the diploid calls by 2 * allele1 + allele2, then the haploid by allele
_GT = _byte_table(["0|0", "0|1", "1|0", "1|1", "0", "1"])
_HAPLOID = 4  # the first haploid row of _GT
# i / 1000 for i in 0..2000: dosages, probabilities and haplotype dosages alike
_NUMBERS = _byte_table(_decimals(2 * _RESOLUTION))


def _lengths(table: np.ndarray) -> np.ndarray:
    return (table != 0).sum(axis=1)


_GT_LENGTHS, _NUMBER_LENGTHS = _lengths(_GT), _lengths(_NUMBERS)


@nb.njit(cache=True)
def _put(out, at, table, lengths, i):
    """Copy row i of a byte table to out[at:]; return where it ends."""
    for c in range(lengths[i]):
        out[at + c] = table[i, c]
    return at + lengths[i]


@nb.njit(cache=True, inline="always")
def _call_rows(a, b, haploid):
    """(GT, DS, GP0, GP1, GP2) rows of the tables for one call from its
    haplotypes' alt probabilities a, b, in float64 whatever their type;
    haploid: from a alone, GP2 unused."""
    a, b = _unit(a), _unit(b)
    if haploid:
        return _HAPLOID + (1 if a >= 0.5 else 0), _row(a), _row(1.0 - a), _row(a), 0
    gp0, gp2 = (1.0 - a) * (1.0 - b), a * b
    gp1 = min(max(1.0 - gp0 - gp2, 0.0), 1.0)
    return 2 * (1 if a >= 0.5 else 0) + (1 if b >= 0.5 else 0), _row(a + b), _row(gp0), _row(gp1), _row(gp2)


@nb.njit(cache=True)
def _unit(p):
    """p in float64, clipped to [0, 1], where the tables end."""
    return min(max(np.float64(p), 0.0), 1.0)


@nb.njit(cache=True)
def _row(x):
    """The row of x in a table of multiples of 1 / _RESOLUTION (ties to even, as np.rint)."""
    return np.int64(np.rint(x * _RESOLUTION))


@nb.njit(cache=True, inline="always")
def _call_length(ds_on, hds_on, gp_on, a, b, haploid, gt_lengths, number_lengths):
    """Bytes of one call's fields (flags of DS, HDS, GP after GT), colon-separated."""
    gt, ds, gp0, gp1, gp2 = _call_rows(a, b, haploid)
    n = gt_lengths[gt]
    if ds_on:
        n += 1 + number_lengths[ds]
    if hds_on:
        n += 1 + number_lengths[_row(_unit(a))] + (0 if haploid else 1 + number_lengths[_row(_unit(b))])
    if gp_on:
        n += 1 + number_lengths[gp0] + 1 + number_lengths[gp1] + (0 if haploid else 1 + number_lengths[gp2])
    return n


@nb.njit(cache=True, inline="always")
def _put_call(out, at, ds_on, hds_on, gp_on, a, b, haploid, gt_table, gt_lengths, numbers, number_lengths):
    """One call's fields (flags of DS, HDS, GP after GT), colon-separated, at out[at:]; return where it ends."""
    gt, ds, gp0, gp1, gp2 = _call_rows(a, b, haploid)
    at = _put(out, at, gt_table, gt_lengths, gt)
    if ds_on:
        out[at] = 58  # colon
        at = _put(out, at + 1, numbers, number_lengths, ds)
    if hds_on:
        out[at] = 58
        at = _put(out, at + 1, numbers, number_lengths, _row(_unit(a)))
        if not haploid:
            out[at] = 44  # comma
            at = _put(out, at + 1, numbers, number_lengths, _row(_unit(b)))
    if gp_on:
        out[at] = 58
        at = _put(out, at + 1, numbers, number_lengths, gp0)
        out[at] = 44
        at = _put(out, at + 1, numbers, number_lengths, gp1)
        if not haploid:
            out[at] = 44
            at = _put(out, at + 1, numbers, number_lengths, gp2)
    return at


# each P(alt) of a diploid call below this prints as REF|REF whatever the fields: DS and HDS round to 0 and GP
# to (1, 0, 0) at three decimals, as the sum of the two is below 0.4 / _RESOLUTION
_SURELY_HOM_REF = 0.2 / _RESOLUTION


@nb.njit(cache=True, inline="always")
def _prints_hom_ref(ds_on, hds_on, gp_on, a, b, haploid):
    """Whether a call's fields (flags of DS, HDS, GP after GT) print as
    those of a diploid call certain of REF|REF, whose text is copied whole
    (hom_ref). Most calls do, many more than have both P(alt) exactly 0:
    deciding by the rounded values, not by exact zeros, saves much of the
    formatting, as copying each field's table row costs more than the
    rounding."""
    if haploid:
        return False
    if a < _SURELY_HOM_REF and b < _SURELY_HOM_REF:  # most calls: their rounding is then known without doing it
        return True
    gt, ds, gp0, gp1, gp2 = _call_rows(a, b, False)
    if gt != 0 or (ds_on and ds != 0) or (gp_on and (gp0 != _RESOLUTION or gp1 != 0 or gp2 != 0)):
        return False
    return not hds_on or (_row(_unit(a)) == 0 and _row(_unit(b)) == 0)


@nb.njit(cache=True)
def _record_length(p1, p2, haploid, v, fields, gt_lengths, number_lengths, hom_ref):
    """Bytes of record v's sample columns, its tabs and its newline."""
    n = max(p1.shape[1], 1)
    ds_on, hds_on, gp_on = fields[DS], fields[HDS], fields[GP]
    for s in range(p1.shape[1]):
        if _prints_hom_ref(ds_on, hds_on, gp_on, p1[v, s], p2[v, s], haploid[v, s]):
            n += len(hom_ref)
        else:
            n += _call_length(ds_on, hds_on, gp_on, p1[v, s], p2[v, s], haploid[v, s], gt_lengths, number_lengths)
    return n


@nb.njit(cache=True)
def _put_record(out, at, p1, p2, haploid, v, fields, gt_table, gt_lengths, numbers, number_lengths, hom_ref):
    """Record v's sample columns, tab-separated, and its newline at out[at:]."""
    ds_on, hds_on, gp_on = fields[DS], fields[HDS], fields[GP]
    for s in range(p1.shape[1]):
        if s:
            out[at] = 9  # tab
            at += 1
        if _prints_hom_ref(ds_on, hds_on, gp_on, p1[v, s], p2[v, s], haploid[v, s]):
            out[at:at + len(hom_ref)] = hom_ref
            at += len(hom_ref)
        else:
            at = _put_call(out, at, ds_on, hds_on, gp_on, p1[v, s], p2[v, s], haploid[v, s], gt_table, gt_lengths,
                           numbers, number_lengths)
    out[at] = 10  # newline


@nb.njit(cache=True, parallel=True, nogil=True)
def _sample_columns(p1, p2, haploid, fields, gt_table, gt_lengths, numbers, number_lengths):
    """(text, ends): every record's sample columns (`fields`: flags of the
    FORMAT fields by code) and a newline as ASCII bytes, record v ending at
    ends[v], from the alt probabilities p1, p2 (V, S) of each call's
    haplotypes (haploid (V, S) bool: from p1 alone). Records are measured,
    then written, in parallel: each has its place before any is written."""
    n_records = p1.shape[0]
    hom_ref = np.empty(64, dtype=np.uint8)  # longer than any one call's fields
    hom_ref = hom_ref[:_put_call(hom_ref, 0, fields[DS], fields[HDS], fields[GP], 0.0, 0.0, False, gt_table, gt_lengths,
                                 numbers, number_lengths)]
    lengths = np.empty(n_records, dtype=np.int64)
    for v in nb.prange(n_records):
        lengths[v] = _record_length(p1, p2, haploid, v, fields, gt_lengths, number_lengths, hom_ref)
    ends = np.cumsum(lengths)
    out = np.empty(ends[-1] if n_records else 0, dtype=np.uint8)
    for v in nb.prange(n_records):
        _put_record(out, ends[v] - lengths[v], p1, p2, haploid, v, fields, gt_table, gt_lengths, numbers,
                    number_lengths, hom_ref)
    return out, ends


@nb.njit(cache=True, parallel=True, nogil=True)
def _side_by_side(text, starts, lengths, ends):
    """Record v's pieces text[starts[b, v]:][:lengths[b, v]] of each part b
    copied in turn to end at ends[v], each part's newline but the last made
    a tab."""
    n_parts, n_records = starts.shape
    out = np.empty(ends[-1] if n_records else 0, dtype=np.uint8)
    for v in nb.prange(n_records):
        at = ends[v] - lengths[:, v].sum()
        for b in range(n_parts):
            out[at:at + lengths[b, v]] = text[starts[b, v]:starts[b, v] + lengths[b, v]]
            at += lengths[b, v]
            if b < n_parts - 1:
                out[at - 1] = 9  # tab
    return out


@dataclass(frozen=True)
class ColumnText:
    """The sample columns of consecutive records as one ASCII buffer:
    record v's columns, tab-separated and ending in a newline, are
    text[ends[v - 1]:ends[v]] (from 0 for the first)."""

    text: np.ndarray  # (bytes,) uint8
    ends: np.ndarray  # (V,) int64

    @classmethod
    def from_rows(cls, rows: list[str]) -> ColumnText:
        encoded = [f"{row}\n".encode("ascii") for row in rows]
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), np.cumsum([len(e) for e in encoded], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ends)

    def spooled(self) -> tuple[np.ndarray, np.ndarray]:
        """The text, and the record ends restored() takes back (genimpute.io.spool)."""
        return self.text, self.ends

    @classmethod
    def restored(cls, data: bytes, ends: np.ndarray) -> ColumnText:
        return cls(np.frombuffer(data, dtype=np.uint8), ends)

    def pieces(self) -> list[memoryview]:
        """Each record's columns and newline, as views of the buffer (no copy)."""
        view = memoryview(self.text)
        ends = self.ends.tolist()
        return [view[start:end] for start, end in zip([0, *ends[:-1]], ends)]

    def rows(self) -> list[str]:
        """Each record's columns as text, without the newline."""
        return [bytes(piece[:-1]).decode("ascii") for piece in self.pieces()]

    @classmethod
    def side_by_side(cls, parts: list[ColumnText]) -> ColumnText:
        """The same records' columns of consecutive batches of samples, as
        one: each record's columns of every part in turn, tab-separated."""
        if len(parts) == 1:
            return parts[0]
        lengths = np.stack([np.diff(p.ends, prepend=0) for p in parts])  # (parts, V)
        offsets = np.cumsum([0] + [len(p.text) for p in parts[:-1]])
        starts = offsets[:, None] + np.stack([p.ends for p in parts]) - lengths
        ends = np.cumsum(lengths.sum(axis=0))
        return cls(_side_by_side(np.concatenate([p.text for p in parts]), starts, lengths, ends), ends)


def genotype_columns(p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None = None,
                     fields: FormatFields = FormatFields()) -> ColumnText:
    """Every record's sample columns (`fields`, GT:DS:GP by default) from
    per-haplotype alt probabilities (V, S); where `haploid` (V, S) is set, a
    haploid call from p1 alone (GT 0 or 1, DS = p1, GP = (1 - p1, p1), HDS =
    p1) and p2 is ignored.

    Each value is a row of a table of pre-formatted numbers (three
    decimals), copied into one byte buffer in compiled code, with no Python
    string operation per call."""
    p1, p2 = np.asarray(p1), np.asarray(p2)  # strided views are read in place: a copy costs formatting time
    haploid = np.zeros(p1.shape, dtype=bool) if haploid is None else np.ascontiguousarray(haploid, dtype=bool)
    text, ends = _sample_columns(p1, p2, haploid, fields.flags(), _GT, _GT_LENGTHS, _NUMBERS, _NUMBER_LENGTHS)
    return ColumnText(text, ends)


_FIXED_ONE = 2.0 ** 40  # probabilities are summed as integer multiples of 2^-40

# DR2 counts a probability this close to 0 or 1 as 0 or 1. The copying engine
# spreads small probabilities over many haplotypes that do not carry a rare
# allele; they barely move the dosages' r2 but sink its estimate, which
# divides by AF (1 - AF). On held-out samples, real and simulated, counting
# them so brought DR2 closer to the true r2 and raised or kept its
# correlation with it (see docs/results.md).
DR2_CERTAIN = 0.02


@nb.njit(cache=True, parallel=True, nogil=True)
def _dosage_sums(p, present):
    """(alt, alt_squared, haplotypes, certain_alt, certain_alt_squared,
    likelier) (V,) of DosageSums from p, present (V, H)."""
    n_records, n_haplotypes = p.shape
    alt = np.zeros(n_records, dtype=np.int64)
    alt_squared = np.zeros(n_records, dtype=np.int64)
    count = np.zeros(n_records, dtype=np.int64)
    certain_alt = np.zeros(n_records, dtype=np.int64)
    certain_alt_squared = np.zeros(n_records, dtype=np.int64)
    likelier = np.zeros(n_records, dtype=np.int64)
    for v in nb.prange(n_records):
        # sums in locals, an absent haplotype read as 0 and counted by its flag rather than skipped by a
        # branch: the loop is vectorised (an if per haplotype or sums kept in the arrays were not)
        a = a2 = n = c1 = c2 = more = 0
        for h in range(n_haplotypes):
            x = min(max(np.float64(p[v, h]), 0.0), 1.0) if present[v, h] else 0.0
            counted = np.float64(present[v, h])
            # x counted as 0 or 1 near them, in arithmetic rather than branches, for the same reason
            c = x * (x >= DR2_CERTAIN)
            c += (1.0 - c) * (x > 1.0 - DR2_CERTAIN)
            a += np.int64(np.rint(x * _FIXED_ONE))
            a2 += np.int64(np.rint(x * x * _FIXED_ONE))
            n += np.int64(counted)
            c1 += np.int64(np.rint(c * _FIXED_ONE))
            c2 += np.int64(np.rint(c * c * _FIXED_ONE))
            more += np.int64(np.rint(counted * max(x, 1.0 - x) * _FIXED_ONE))
        alt[v], alt_squared[v], count[v], certain_alt[v], certain_alt_squared[v], likelier[v] = a, a2, n, c1, c2, more
    return alt, alt_squared, count, certain_alt, certain_alt_squared, likelier


@dataclass(frozen=True)
class DosageSums:
    """Per record, what INFO's AF and DR2 and the info file's AvgCall need
    from the haplotypes: their alt probabilities p summed, p^2 summed, how
    many there are, the same two sums with p within DR2_CERTAIN of 0 or 1
    counted as 0 or 1, and max(p, 1 - p) summed.

    The sums are integers (p in units of 2^-40, exact in int64 up to a
    million haplotypes), so they add up to the same totals in any order or
    grouping: a cohort imputed in batches of samples gets the INFO of one
    imputed whole."""

    alt: np.ndarray  # (V,) int64
    alt_squared: np.ndarray  # (V,) int64
    haplotypes: np.ndarray  # (V,) int64
    certain_alt: np.ndarray  # (V,) int64, for DR2
    certain_alt_squared: np.ndarray  # (V,) int64, for DR2
    likelier: np.ndarray  # (V,) int64, for AvgCall

    @classmethod
    def of(cls, p: np.ndarray, present: np.ndarray | None = None) -> DosageSums:
        """p (V, H) alt probabilities; present (V, H) the haplotypes counted (all by default)."""
        p = np.ascontiguousarray(p)
        present = np.ones(p.shape, dtype=bool) if present is None else np.ascontiguousarray(present, dtype=bool)
        return cls(*_dosage_sums(p, present))

    def __add__(self, other: DosageSums) -> DosageSums:
        return DosageSums(self.alt + other.alt, self.alt_squared + other.alt_squared,
                          self.haplotypes + other.haplotypes, self.certain_alt + other.certain_alt,
                          self.certain_alt_squared + other.certain_alt_squared, self.likelier + other.likelier)

    def columns(self) -> np.ndarray:
        """(V, 6) int64: the six sums of each record, in the fields' order (the info file's Sums)."""
        return np.stack([self.alt, self.alt_squared, self.haplotypes, self.certain_alt, self.certain_alt_squared,
                         self.likelier], axis=1)

    @classmethod
    def from_columns(cls, sums: np.ndarray) -> DosageSums:
        """From (V, 6) integers, as columns() gives them."""
        return cls(*np.asarray(sums, dtype=np.int64).reshape(-1, 6).T.copy())

    def af(self) -> np.ndarray:
        """(V,) estimated alt allele frequency: the mean of p."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.alt / _FIXED_ONE / self.haplotypes

    def avg_call(self) -> np.ndarray:
        """(V,) AvgCall, as Minimac4's info file has it: the mean of
        max(p, 1 - p), the probability of the allele each haplotype more
        likely carries."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.likelier / _FIXED_ONE / self.haplotypes

    def r2(self) -> np.ndarray:
        """(V,) DR2: the variance of p over haplotypes divided by AF * (1 -
        AF), the expected squared correlation between imputed and true
        allele dosage when the probabilities are calibrated (the estimator
        Minimac4 reports as R2), p within DR2_CERTAIN of 0 or 1 counted
        as 0 or 1 (and AF their mean); 0 for monomorphic estimates."""
        with np.errstate(divide="ignore", invalid="ignore"):
            af = self.certain_alt / _FIXED_ONE / self.haplotypes
            var = self.certain_alt_squared / _FIXED_ONE / self.haplotypes - af * af
            denom = af * (1 - af)
            r2 = np.where(denom > 1e-12, var / denom, 0.0)
        return np.clip(r2, 0.0, 1.0)


FILE_FORMAT = "##fileformat=VCFv4.2"
COLUMNS = ["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT"]  # then one per sample


def info_values(af: np.ndarray, r2: np.ndarray, missing_calls: np.ndarray, typed: np.ndarray) -> list[str]:
    """INFO of panel records (V,): `AF` (and `IMPMISS`, the missing calls
    filled in, where there are some) at typed records, `AF;DR2;IMP` at
    imputed ones."""
    return [f"AF={a:.4g}" + (f";IMPMISS={n}" if n else "") if t else f"AF={a:.4g};DR2={d:.3f};IMP"
            for a, d, n, t in zip(af.tolist(), r2.tolist(), missing_calls.tolist(), typed.tolist())]


INFO_LINES = [
    '##INFO=<ID=AF,Number=A,Type=Float,Description="Estimated alternate allele frequency">',
    '##INFO=<ID=DR2,Number=A,Type=Float,Description="Estimated dosage r-squared: variance of haplotype dosages / '
    f'(AF*(1-AF)), dosages within {DR2_CERTAIN:g} of 0 or 1 counted as 0 or 1">',
    '##INFO=<ID=IMP,Number=0,Type=Flag,Description="Imputed marker">',
    '##INFO=<ID=IMPMISS,Number=1,Type=Integer,Description="Missing calls of this typed marker filled in by imputation">',
]


def _runs(values: list) -> list[tuple[int, int]]:
    """[first, last) of each run of equal consecutive values."""
    cuts = [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    return list(zip([0, *cuts], [*cuts, len(values)]))


def check_output_directory(path: str | Path) -> None:
    """Refuse an output path whose directory does not exist or cannot be written."""
    path = Path(path)
    if not path.parent.is_dir():
        raise InputError(f"output {path}: directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise InputError(f"output {path}: directory {path.parent} cannot be written (read-only?); "
                         "choose another with --out")


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
        check_output_directory(self.path)
        self.tmp = self.path.with_name(f".tmp{os.getpid()}.{self.path.name}")
        self.force = force
        self.records = 0
        remove_stale_temporaries(self.path)

    def __enter__(self):
        self.handle = BgzfWriter(self.tmp, shown_as=self.path)
        self.index = TabixIndex()
        return self

    def write_header(self, samples: list, contigs: list, meta: dict, fields: FormatFields = FormatFields()) -> None:
        lines = [FILE_FORMAT, f"##fileDate={time.strftime('%Y%m%d')}"]
        lines += [f"##{key}={value}" for key, value in meta.items()]
        lines += INFO_LINES + fields.header_lines()
        lines += [f"##contig=<ID={c}>" for c in contigs]
        lines.append("\t".join([*COLUMNS, *samples]))
        self.write_header_lines(lines)

    def write_records(self, fixed: list, info: list, fmt: str, columns: ColumnText) -> None:
        """fixed: per record [CHROM, POS, ID, REF, ALT]; columns: the records'
        sample columns (genotype_columns, ColumnText.from_rows)."""
        if not fixed:
            return
        prefixes = ["\t".join([*f, ".", "PASS", i, fmt, ""]).encode() for f, i in zip(fixed, info)]
        lengths = np.array([len(p) for p in prefixes]) + np.diff(columns.ends, prepend=0)
        ends = self.handle.position + np.cumsum(lengths)
        for first, last in _runs([f[0] for f in fixed]):
            self.index.add(fixed[first][0], np.array([int(f[1]) for f in fixed[first:last]]),
                           np.array([len(f[3]) for f in fixed[first:last]]), (ends - lengths)[first:last],
                           ends[first:last])
        self.handle.write(b"".join(piece for pair in zip(prefixes, columns.pieces()) for piece in pair))
        self.records += len(fixed)

    def write_header_lines(self, lines: list) -> None:
        """Write header lines as given, the #CHROM line last (write_header makes them)."""
        if lines:
            self.handle.write(("\n".join(lines) + "\n").encode())

    def __exit__(self, exc_type, exc, tb):
        index = Path(f"{self.tmp}.tbi")
        try:
            with naming(self.path):
                self._finish(exc_type, index)
        finally:
            for leftover in (self.tmp, index):
                if leftover.exists():
                    leftover.unlink()
        return False

    def _finish(self, exc_type, index: Path) -> None:
        """Close the file; after a clean run, index and publish it."""
        import pysam

        try:
            self.handle.close()
        except OSError:  # a full disk fails the last blocks too: the first error is the one to report
            if exc_type is None:
                raise
        if exc_type is None:
            if self.index.usable:
                self.index.write(index, self.handle.block_offsets)
            else:  # records out of order: tabix refuses the file, with its own message
                pysam.tabix_index(str(self.tmp), preset="vcf", force=True)
            publish(self.tmp, self.path, self.force)
            os.replace(index, f"{self.path}.tbi")  # the index of the output this run published
