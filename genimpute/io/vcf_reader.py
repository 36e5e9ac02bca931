"""Reading panel and target VCF/BCF files with cyvcf2.

Haplotype h of sample s is column 2*s + h. Panel haplotypes are bit-packed
per record as they are read, so a whole-chromosome panel fits in memory, at
an eighth of its unpacked size.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np
from zlib_ng import gzip_ng_threaded, zlib_ng

from genimpute.errors import InputError
from genimpute.io.contigs import is_autosome
from genimpute.io.integrity import check_complete
from genimpute.runtime import usable_cores

log = logging.getLogger(__name__)


@dataclass
class Records:
    """Site descriptions of a VCF, one entry per record, in file order."""

    contigs: list  # contig name as written in the file
    positions: np.ndarray  # int64
    ids: list
    refs: list
    alts: list  # ALT as written (comma-joined when multi-allelic)

    def __len__(self) -> int:
        return len(self.positions)


@dataclass
class PanelData:
    samples: list
    records: Records
    packed: np.ndarray  # (M, ceil(H/8)) uint8, np.packbits of each record's haplotypes (or the spool's SparseRows)
    n_haplotypes: int


class PackedBlocks:
    """Where read_panel puts the packed records, block after block: kept in
    memory (rows(): one array). genimpute.io.sparse_rows.SparseSpool, with the
    same methods, puts them in a file instead."""

    def __init__(self):
        self.blocks: list = []

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks)

    def append(self, block: np.ndarray) -> None:
        self.blocks.append(block)

    def reset(self) -> None:
        self.blocks = []

    def rows(self) -> np.ndarray:
        return np.concatenate(self.blocks)


@dataclass
class TargetData:
    samples: list
    records: Records
    alleles: np.ndarray  # (M, 2S) int8 allele index per haplotype, or MISSING / ABSENT
    phased: np.ndarray  # (M,) bool, every heterozygous call of the record is phased


@functools.cache
def _silence_htslib() -> None:
    """htslib prints its own lines on stderr for the faults this module turns
    into one InputError; switch its log off (cyvcf2 links htslib into its
    extension, where hts_set_log_level lives; a no-op elsewhere)."""
    import cyvcf2

    try:
        ctypes.CDLL(cyvcf2.cyvcf2.__file__).hts_set_log_level(0)  # HTS_LOG_OFF
    except (OSError, AttributeError):
        pass


def open_vcf(path: str | Path):
    import cyvcf2

    _silence_htslib()
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    check_complete(path)
    try:
        return cyvcf2.VCF(str(path), gts012=False, lazy=True, strict_gt=True)
    except Exception as exc:  # cyvcf2 raises OSError or a bare Exception on bad headers
        raise InputError(f"{path}: {_header_fault(path) or f'cannot be read as VCF/BCF ({exc})'}") from exc


def _header_fault(path: Path) -> str | None:
    """What is wrong with a text VCF's (bgzipped or plain) header line of
    columns that htslib only calls unparseable: a sample named twice; None
    when that is not it (or the file is not text VCF)."""
    import gzip

    try:
        with open(path, "rb") as raw:
            packed = raw.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rt") if packed else open(path)) as handle:
            for line in handle:
                if line.startswith("#CHROM"):
                    samples = line.rstrip("\n").split("\t")[9:]
                    seen = {}
                    for column, name in enumerate(samples, start=10):
                        if name in seen:
                            return (f"expected each sample named once in the header; found {name} in columns "
                                    f"{seen[name]} and {column}")
                        seen[name] = column
                    return None
                if not line.startswith("#"):
                    return None
    except (OSError, UnicodeDecodeError, EOFError):  # not text VCF: BCF, or not VCF at all
        return None
    return None


def _records(vcf, path):
    """Iterate records, turning htslib parse failures into an InputError that
    names the last record read."""
    it = iter(vcf)
    number, last = 0, "the header"
    while True:
        try:
            rec = next(it)
        except StopIteration:
            return
        except Exception as exc:  # cyvcf2 raises a bare Exception on a malformed line
            raise InputError(f"{path}: malformed record after {last} ({exc})") from exc
        number += 1
        last = f"record {number} ({rec.CHROM}:{rec.POS})"
        yield number, rec


def _where(path, contig, pos, number) -> str:
    return f"{path} record {number} ({contig}:{pos})"


# allele codes of target genotypes besides allele indices 0, 1, ...
MISSING = -1  # a missing call: `.` or `./.`
ABSENT = -2  # no such haplotype: the second one of a haploid call


def _genotypes(rec, path, number) -> np.ndarray:
    """(S, 3) int16: allele 1, allele 2 (ABSENT for a haploid call), phased
    flag; MISSING for missing alleles. Polyploid calls stop with the record named."""
    try:
        gts = rec.genotype.array()
    except Exception as exc:  # cyvcf2 raises a bare Exception for a record without GT values
        raise InputError(f"{_where(path, rec.CHROM, rec.POS, number)}: expected a GT value per sample ({exc})") from exc
    if gts.shape[1] == 2:  # every call of the record is haploid
        gts = np.stack([gts[:, 0], np.full(len(gts), ABSENT, gts.dtype), np.ones(len(gts), gts.dtype)], axis=1)
    elif gts.shape[1] != 3:
        raise InputError(f"{_where(path, rec.CHROM, rec.POS, number)}: expected haploid or diploid genotypes; "
                         f"found ploidy {gts.shape[1] - 1}")
    return gts


def _check_panel_record(gts: np.ndarray, samples: list, n_alt: int, where: str) -> None:
    """Stop with the record named unless its calls (S, 3), as _genotypes,
    are diploid, called, phased where heterozygous and within its alleles
    (REF and n_alt ALT), as a reference panel's must be."""
    if (gts[:, :2] == MISSING).any():  # first: a lone `.` reads as a missing haploid call
        sample = int(np.nonzero((gts[:, :2] == MISSING).any(axis=1))[0][0])
        raise InputError(f"{where}: expected called genotypes; found a missing call (sample #{sample + 1})")
    if (gts[:, :2] == ABSENT).any():
        raise InputError(f"{where}: expected diploid genotypes; found haploid calls")
    unphased_het = (gts[:, 2] == 0) & (gts[:, 0] != gts[:, 1])
    if unphased_het.any():
        sample = samples[int(np.nonzero(unphased_het)[0][0])]
        raise InputError(f"{where}: expected a phased panel; found an unphased heterozygous genotype in sample {sample}")
    if gts[:, :2].max() > n_alt:
        raise InputError(f"{where}: expected allele indices up to {n_alt} (REF and {n_alt} ALT); "
                         f"found {int(gts[:, :2].max())}")


class _PanelBlock:
    """Panel records' calls, checked and bit-packed a block at a time: numpy
    calls per record cost more than htslib's parsing of it. A block that
    holds a bad record is checked record by record, so the first bad one
    stops the read, named."""

    def __init__(self, path, samples: list):
        self.path, self.samples = path, samples
        self.size = max(64, min(4096, (32 << 20) // (6 * len(samples))))  # records; at most 32 MB of calls
        self.calls = np.empty((self.size, len(samples), 3), dtype=np.int16)
        self.n_alt, self.where = [], []  # per record: its ALT alleles, (CHROM, POS, record number)

    def add(self, gts: np.ndarray, n_alt: int, where: tuple) -> bool:
        """Add one record's calls (S, 3); True when the block is full."""
        self.calls[len(self.n_alt)] = gts
        self.n_alt.append(n_alt)
        self.where.append(where)
        return len(self.n_alt) == self.size

    def pack(self) -> np.ndarray:
        """(rows, 2S / 8) packed haplotypes, one row per ALT allele of each
        record (allele 1 = that ALT), and empty the block."""
        n = len(self.n_alt)
        calls, n_alt = self.calls[:n], np.array(self.n_alt)
        # the usual block (called, phased, biallelic) is passed on three reductions, two over the
        # contiguous calls: phase flags are 0 or 1, so they change neither min < 0 nor max > n_alt >= 1
        if calls.min() < 0 or calls.max() > n_alt.min() or calls[:, :, 2].min() < 1:
            for i in range(n):
                _check_panel_record(calls[i], self.samples, int(n_alt[i]), _where(self.path, *self.where[i]))
        haps = calls[:, :, :2].reshape(n, -1)  # (n, 2S)
        if (n_alt == 1).all():
            packed = np.packbits(haps == 1, axis=1)
        else:
            packed = np.stack([np.packbits(row == i) for row, k in zip(haps, n_alt) for i in range(1, k + 1)])
        self.n_alt, self.where = [], []
        return packed


class _SortCheck:
    """Records must be grouped by contig and sorted by position within it."""

    def __init__(self, path):
        self.path, self.seen, self.contig, self.pos = path, set(), None, -1

    def __call__(self, contig, pos, number):
        if contig != self.contig:
            if contig in self.seen:
                raise InputError(
                    f"{_where(self.path, contig, pos, number)}: expected records grouped by "
                    f"contig; found {contig} again after {self.contig}"
                )
            self.seen.add(contig)
            self.contig, self.pos = contig, -1
        elif pos < self.pos:
            raise InputError(
                f"{_where(self.path, contig, pos, number)}: expected records sorted by position; "
                f"found {pos} after {self.pos} (sort with `bcftools sort`)"
            )
        self.pos = pos


def read_panel(path: str | Path, packed=None) -> PanelData:
    """Read a phased reference panel into biallelic records: a multi-allelic
    record becomes one record per ALT at its position (allele 1 = that ALT,
    anything else 0), as `bcftools norm -m -any` splits it. Unphased
    heterozygous or missing calls are rejected. `packed`: where the packed
    records go (PackedBlocks by default, or a SparseSpool)."""
    packed = PackedBlocks() if packed is None else packed
    vcf = open_vcf(path)
    samples = list(vcf.samples)
    if not samples:
        raise InputError(f"{path}: expected samples with genotypes; found none")
    common = _read_common_panel(path, samples, packed)
    if common is not None:
        vcf.close()
        return common
    packed.reset()  # the records read before the first that is not of the common kind
    n_hap = 2 * len(samples)
    rec_fields = Records([], [], [], [], [])
    positions = []
    check_sorted = _SortCheck(path)
    skipped_monomorphic = split = 0
    block = _PanelBlock(path, samples)
    for number, rec in _records(vcf, path):
        check_sorted(rec.CHROM, rec.POS, number)
        if not rec.ALT:
            skipped_monomorphic += 1
            continue
        if block.add(_genotypes(rec, path, number), len(rec.ALT), (rec.CHROM, rec.POS, number)):
            packed.append(block.pack())
        split += len(rec.ALT) > 1
        for alt in rec.ALT:
            rec_fields.contigs.append(rec.CHROM)
            positions.append(rec.POS)
            rec_fields.ids.append(rec.ID or ".")
            rec_fields.refs.append(rec.REF)
            rec_fields.alts.append(alt)
    if block.n_alt:
        packed.append(block.pack())
    vcf.close()
    if skipped_monomorphic:
        log.warning("%s: skipped %d records without an ALT allele", path, skipped_monomorphic)
    if split:
        log.info("%s: split %d multi-allelic records into one record per ALT allele", path, split)
    if not len(packed):
        raise InputError(f"{path}: expected biallelic variant records; found none")
    rec_fields.positions = np.asarray(positions, dtype=np.int64)
    return PanelData(samples, rec_fields, packed.rows(), n_hap)


_TEXT_BLOCK = 32 << 20  # bytes of VCF text parsed at a time by _read_common_panel


def _read_common_panel(path: str | Path, samples: list, packed) -> PanelData | None:
    """The common reference panel, read from its text without htslib,
    faster: bgzipped (or plain) VCF, sorted, every record biallelic
    with FORMAT GT alone and every call a phased diploid 0|0, 0|1, 1|0 or
    1|1. None at the first record that is not so: read_panel's htslib path
    then reads the file, with its checks and messages."""
    with open(path, "rb") as raw:
        packed_file = raw.read(2) == b"\x1f\x8b"
    width = 4 * len(samples) - 1  # "a|b" and a tab per sample, no tab after the last
    fields = Records([], [], [], [], [])
    positions = []
    check_sorted = _SortCheck(path)
    try:
        with (_inflated(path) if packed_file else open(path, "rb")) as handle:
            for line in handle:
                if line.startswith(b"#CHROM"):
                    break
                if not line.startswith(b"#"):  # BCF's bytes, or no header: htslib's path says which
                    return None
            rest = b""
            while True:
                text = handle.read(_TEXT_BLOCK)
                chunk = rest + text
                end = chunk.rfind(b"\n") + 1 if text else len(chunk)  # whole lines; all that is left at the end
                rest = chunk[end:]
                block = _common_records(chunk, end, width, fields, positions, check_sorted)
                if block is None:
                    return None
                if len(block):
                    packed.append(block)
                if not text:
                    break
    # BCF, a truncated or corrupted file...: htslib's path reads it and says what is wrong
    except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib_ng.error):
        return None
    if not len(packed):
        return None
    fields.positions = np.asarray(positions, dtype=np.int64)
    return PanelData(samples, fields, packed.rows(), 2 * len(samples))


def _inflated(path: str | Path):
    """A gzipped file's text, inflated by zlib-ng (faster than Python's
    gzip on a large panel) in a thread of its own where the process has a second core, beside the parsing."""
    return gzip_ng_threaded.open(path, "rb", threads=1 if usable_cores() > 1 else 0)


def _common_records(text: bytes, end: int, width: int, fields: Records, positions: list,
                    check_sorted) -> np.ndarray | None:
    """Append the records of the lines of text[:end] (VCF text) to fields
    and positions; return their haplotypes packed (np.packbits), or None if
    one is not a common panel record (_read_common_panel). A line's calls
    are packed where they lie in `text`: split off the line and joined with
    the others', every call would be copied twice, a fifth of the time a
    16,000-sample panel takes to convert."""
    buffer = np.frombuffer(text, dtype=np.uint8, count=end)
    ends = np.flatnonzero(buffer == ord("\n"))
    if end and text[end - 1:end] != b"\n":  # the last line, with no newline after it
        ends = np.append(ends, end)
    calls = []
    start = 0
    for stop in ends.tolist():
        first_call, line_start, start = stop - width, start, stop + 1
        if stop == line_start:
            continue
        if first_call <= line_start or text[first_call - 1] != 9:  # a tab before the samples' calls
            return None
        columns = text[line_start:first_call - 1].split(b"\t")
        if len(columns) != 9 or columns[8] != b"GT" or b"," in columns[4] or columns[4] in (b".", b"") \
                or not columns[1].isdigit():
            return None
        contig, position = columns[0].decode(), int(columns[1])
        check_sorted(contig, position, len(positions) + 1)
        fields.contigs.append(contig)
        positions.append(position)
        fields.ids.append(columns[2].decode())
        fields.refs.append(columns[3].decode())
        fields.alts.append(columns[4].decode())
        calls.append(first_call)
    if not calls:
        return np.empty((0, 0), dtype=np.uint8)
    packed, common = _pack_calls(buffer, np.array(calls, dtype=np.int64), (width + 1) // 4)
    return packed if common else None


@nb.njit(cache=True, parallel=True)
def _pack_calls(text, starts, n_samples):
    """(packed (n, ceil(2S / 8)) as np.packbits of the haplotypes of the
    calls of S samples at text[starts[i]:] (n,), whether every one is "0|0",
    "0|1", "1|0" or "1|1", a tab between each two)."""
    n = len(starts)
    out = np.zeros((n, (2 * n_samples + 7) // 8), dtype=np.uint8)
    common = np.ones(n, dtype=np.bool_)
    for i in nb.prange(n):
        for s in range(n_samples):
            c = starts[i] + 4 * s
            first, second = text[c], text[c + 2]  # "0" or "1": 48 or 49
            common[i] &= (first == 48 or first == 49) and (second == 48 or second == 49) and text[c + 1] == 124 \
                and (s == n_samples - 1 or text[c + 3] == 9)  # "|" within a call, a tab after all but the last
            out[i, s >> 2] |= np.uint8(((first & 1) << (7 - 2 * (s & 3))) | ((second & 1) << (6 - 2 * (s & 3))))
    return out, common.all()


def read_target(path: str | Path) -> TargetData:
    """Read target genotypes at typed sites: every record, biallelic or not,
    so records absent from the panel can be passed through to the output.
    Missing calls and haploid calls (chrX of males) are kept as MISSING and
    ABSENT alleles."""
    vcf = open_vcf(path)
    samples = list(vcf.samples)
    if not samples:
        raise InputError(f"{path}: expected samples with genotypes; found none")
    common = _read_common_target(path, samples)
    if common is not None:
        vcf.close()
        return common
    rec_fields = Records([], [], [], [], [])
    positions, alleles, phased = [], [], []
    check_sorted = _SortCheck(path)
    for number, rec in _records(vcf, path):
        check_sorted(rec.CHROM, rec.POS, number)
        gts = _genotypes(rec, path, number)
        n_alleles = 1 + len(rec.ALT)
        if gts[:, :2].max() >= n_alleles:
            raise InputError(f"{_where(path, rec.CHROM, rec.POS, number)}: expected allele indices below {n_alleles} "
                             f"(REF and {len(rec.ALT)} ALT); found {int(gts[:, :2].max())}")
        rec_fields.contigs.append(rec.CHROM)
        positions.append(rec.POS)
        rec_fields.ids.append(rec.ID or ".")
        rec_fields.refs.append(rec.REF)
        rec_fields.alts.append(",".join(rec.ALT) if rec.ALT else ".")
        alleles.append(gts[:, :2].reshape(-1).astype(np.int8))
        # only a heterozygous call (two different called alleles) has a phase to lose
        het = (gts[:, 0] != gts[:, 1]) & (gts[:, 0] >= 0) & (gts[:, 1] >= 0)
        phased.append(bool((gts[:, 2] == 1)[het].all()))
    vcf.close()
    if not positions:
        raise InputError(f"{path}: expected target records; found none")
    rec_fields.positions = np.asarray(positions, dtype=np.int64)
    haps = np.stack(alleles)
    contigs = np.asarray(rec_fields.contigs)
    _lone_missing_as_diploid(haps, contigs)
    _stray_haploid_as_missing(haps, contigs, rec_fields.positions, samples, path)
    return TargetData(samples, rec_fields, haps, np.asarray(phased))


def _read_common_target(path: str | Path, samples: list) -> TargetData | None:
    """The common target (an array's biallelic records, FORMAT GT alone,
    every call a phased diploid 0|0, 0|1, 1|0 or 1|1), read from its text as
    _read_common_panel reads a panel: a record at a time through htslib,
    a cohort's calls took several times as long (see docs/results.md). None
    at the first record that is not so: read_target's htslib path then reads
    the file, with its checks and messages."""
    common = _read_common_panel(path, samples, PackedBlocks())
    if common is None:
        return None
    alleles = np.unpackbits(common.packed, axis=1, count=2 * len(samples)).view(np.int8)
    return TargetData(samples, common.records, alleles, np.ones(len(alleles), dtype=bool))


def _lone_missing_as_diploid(haps: np.ndarray, contigs: np.ndarray) -> None:
    """A call written as a single `.` is missing without saying its ploidy
    (cyvcf2 reads it as a missing haploid call). It is diploid, in place,
    unless the sample has called haploid genotypes on that contig."""
    first, second = haps[:, 0::2], haps[:, 1::2]  # views
    lone = (first == MISSING) & (second == ABSENT)
    if not lone.any():
        return
    for contig in np.unique(contigs[lone.any(axis=1)]):
        rows = contigs == contig
        haploid_sample = ((first[rows] >= 0) & (second[rows] == ABSENT)).any(axis=0)
        second[rows] = np.where(lone[rows] & ~haploid_sample, MISSING, second[rows])


def _stray_haploid_as_missing(haps: np.ndarray, contigs: np.ndarray, positions: np.ndarray, samples: list,
                              path) -> None:
    """On an autosome, a haploid call among a sample's diploid ones is an
    export's fault, not a ploidy: kept, it would make the records imputed
    around it haploid too (ploidy follows the nearest typed call, as a
    male's chrX needs), so it is read as missing, in place, with a warning.
    A sample haploid throughout an autosome stays haploid, said once."""
    first, second = haps[:, 0::2], haps[:, 1::2]  # views
    haploid = (second == ABSENT) & (first != ABSENT)
    stray, whole = [], []
    for contig in np.unique(contigs[haploid.any(axis=1)]):
        if not is_autosome(str(contig)):
            continue
        rows = np.flatnonzero(contigs == contig)
        diploid_called = (second[rows] >= 0).any(axis=0)
        cells = haploid[rows] & diploid_called
        whole += [(samples[s], contig) for s in np.flatnonzero(haploid[rows].any(axis=0) & ~diploid_called)]
        if cells.any():
            r, s = np.argwhere(cells)[0]
            stray.append((int(cells.sum()), samples[s], contig, positions[rows[r]]))
        first[rows] = np.where(cells, MISSING, first[rows])
        second[rows] = np.where(cells, MISSING, second[rows])
    if stray:
        log.warning("%s: %d haploid calls among diploid ones on autosomes read as missing (first: sample %s at "
                    "%s:%d)", path, sum(n for n, *_ in stray), *stray[0][1:])
    if whole:
        log.warning("%s: %d samples haploid throughout an autosome, imputed as haploid there (first: sample %s on "
                    "%s)", path, len(whole), *whole[0])


def contig_spans(path: str | Path) -> dict:
    """{contig: (first, last) record position}, contigs in file order;
    records must be grouped by contig and sorted, as everywhere else."""
    vcf = open_vcf(path)
    check, spans = _SortCheck(path), {}
    for number, rec in _records(vcf, path):
        check(rec.CHROM, rec.POS, number)
        spans[rec.CHROM] = (spans.get(rec.CHROM, (rec.POS,))[0], rec.POS)
    if not spans:
        raise InputError(f"{path}: expected at least one record; found none")
    return spans
