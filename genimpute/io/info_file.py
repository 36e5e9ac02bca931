"""The info file written beside an imputed output (OUT.info.gz): one line
per record, in the tab-separated layout Minimac4 and the Michigan
Imputation Server write, which existing QC scripts filter on.

Columns: SNP (the record's ID, or CHROM:POS:REF:ALT where it has none),
REF(0), ALT(1), ALT_Frq (estimated ALT frequency), MAF (the lesser of
ALT_Frq and 1 - ALT_Frq), AvgCall (the mean over haplotypes of the
probability of the allele each more likely carries), Rsq (genimpute's
DR2), Genotyped (Imputed; Genotyped: a panel record the target types;
Typed_Only: a target record the panel lacks, passed through), LooRsq
(a Genotyped record that `impute --validate` hid: the squared correlation
of the dosages imputed without it with the observed genotypes, over the
called diploid genotypes, as Minimac4's leave-one-out r2 is). Numbers have
five decimals, as Minimac4 prints them; a value that does not apply or is
unknown is "-", as AvgCall and Rsq of Typed_Only records are in Minimac4's
file.

Two last columns, Sums and LooSums, that Minimac4's file lacks (QC scripts
read columns by name and keep working): the record's DosageSums
(genimpute.io.vcf_writer) as six comma-separated integers, alt,
alt_squared, haplotypes, certain_alt, certain_alt_squared and likelier,
probabilities in units of 2^-40; and where --validate hid the record, the
sums of its LooRsq (LOO_SUMS, the dosage terms in units of LOO_UNIT), else
"-". They add up exactly across batches of samples, so `genimpute merge`
recomputes ALT_Frq, AvgCall, Rsq, LooRsq and INFO AF and DR2 of the whole
cohort from them (LooRsq that of the batches that hid the record, which
batches run with the same --validate settings all do).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
from zlib_ng import gzip_ng

from genimpute.errors import InputError
from genimpute.io.bgen_writer import OutputFiles
from genimpute.io.scratch import naming
from genimpute.metrics import r2_from_sums

COLUMNS = ["SNP", "REF(0)", "ALT(1)", "ALT_Frq", "MAF", "AvgCall", "Rsq", "Genotyped", "LooRsq", "Sums", "LooSums"]
HEADER = "\t".join(COLUMNS)
KINDS = ("Imputed", "Genotyped", "Typed_Only")
LEVEL = 6
# a hidden record's sums: called genotypes, dosage, observed allele count, dosage^2, count^2, dosage x count
LOO_SUMS = ("genotypes", "dosage", "observed", "dosage_squared", "observed_squared", "product")
LOO_UNIT = 2.0 ** 40  # the dosage terms are summed as integer multiples of 2^-40: exact in int64 to a million samples
# a record whose numbers are all known and that --validate did not hide
_KNOWN_LINE = "%s\t%s\t%s\t%.5f\t%.5f\t%.5f\t%.5f\t%s\t-\t%d,%d,%d,%d,%d,%d\t-"


def _gzip(raw) -> gzip_ng.GzipFile:
    """A gzip stream into the open file `raw` without a name or time in its
    header: the same records give the same bytes whatever the temporary
    file was called, and whenever written."""
    return gzip_ng.GzipFile(filename="", mode="wb", compresslevel=LEVEL, fileobj=raw, mtime=0)


def _number(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.5f}"


def snp_names(contig: str, positions: list, ids: list[str], refs: list[str], alts: list[str]) -> list[str]:
    """Each record's SNP: its ID, or CHROM:POS:REF:ALT where the ID is "."."""
    return [i if i != "." else f"{contig}:{p}:{r}:{a}" for p, i, r, a in zip(positions, ids, refs, alts)]


def loo_r2(hidden) -> np.ndarray:
    """(V,) LooRsq from each record's LOO_SUMS (V, 6) integers; NaN where
    none was hidden or the observed genotypes do not vary."""
    hidden = np.asarray(hidden, dtype=np.int64).reshape(-1, 6)
    scaled = hidden.astype(np.float64) / np.array([1, LOO_UNIT, 1, LOO_UNIT, 1, LOO_UNIT])
    return r2_from_sums(scaled) if len(hidden) else np.zeros(0)


def info_lines(snps: list[str], refs: list[str], alts: list[str], af, avg_call, rsq, kind: list[str],
               sums, hidden=None) -> list[str]:
    """One info line (no newline) per record; af, avg_call, rsq (V,)
    floats (NaN: unknown); kind: each record's Imputed, Genotyped or
    Typed_Only; sums (V, 6) integers, the record's DosageSums; hidden
    (V, 6) integers, LOO_SUMS, zeros (or None: all) where --validate did
    not hide the record. A Typed_Only record's AvgCall and Rsq print as "-"."""
    n_records = len(snps)
    sums = np.asarray(sums, dtype=np.int64).reshape(-1, 6)
    hidden = np.zeros((n_records, 6), np.int64) if hidden is None else np.asarray(hidden, np.int64).reshape(-1, 6)
    columns = [refs, alts, af, avg_call, rsq, kind, sums, hidden]
    if any(len(column) != n_records for column in columns):
        raise InputError(f"info file: expected {n_records} values in each column; "
                         f"found {', '.join(str(len(column)) for column in columns)}")
    unknown = sorted(set(kind) - set(KINDS))
    if unknown:
        raise InputError(f"info file: expected kinds among {', '.join(KINDS)}; found {unknown[0]}")
    af, avg_call, rsq = (np.asarray(column, dtype=np.float64) for column in (af, avg_call, rsq))
    was_hidden = hidden[:, 0] > 0
    # one format per record where every number is known, the common case; _number's per value otherwise
    known = (np.isfinite(af) & np.isfinite(avg_call) & np.isfinite(rsq) & (np.asarray(kind) != "Typed_Only")
             & ~was_hidden)
    loo = loo_r2(hidden).tolist() if was_hidden.any() else [math.nan] * n_records  # most runs hide none
    lines = []
    for i, (snp, ref, alt, freq, call, r2, what, record_sums, fast) in enumerate(zip(
            snps, refs, alts, af.tolist(), avg_call.tolist(), rsq.tolist(), kind, sums.tolist(), known.tolist())):
        if fast:
            lines.append(_KNOWN_LINE % (snp, ref, alt, freq, min(freq, 1.0 - freq), call, r2, what, *record_sums))
            continue
        typed_only = what == "Typed_Only"
        lines.append("\t".join([snp, ref, alt, _number(freq), _number(min(freq, 1.0 - freq)),
                                "-" if typed_only else _number(call), "-" if typed_only else _number(r2), what,
                                _number(loo[i]), ",".join(map(str, record_sums)),
                                ",".join(map(str, hidden[i].tolist())) if was_hidden[i] else "-"]))
    return lines


class InfoWriter:
    """Context manager writing an info file (gzip) to a hidden temporary
    file beside `path`; on a clean exit it is renamed to `path`, on an
    error deleted."""

    def __init__(self, path: str | Path, force: bool = False):
        self.path = Path(path)
        if not self.path.name.endswith(".info.gz"):
            raise InputError(f"info file {self.path}: expected a name ending in .info.gz")
        self.files = OutputFiles([self.path], force)
        self.records = 0

    def __enter__(self):
        self.raw = open(self.files.temporary(self.path), "wb")
        self.handle = _gzip(self.raw)
        self._write([HEADER])
        return self

    def write(self, snps: list[str], refs: list[str], alts: list[str], af, avg_call, rsq, kind: list[str],
              sums, hidden=None) -> None:
        """Append one line per record (info_lines' arguments)."""
        self._write(info_lines(snps, refs, alts, af, avg_call, rsq, kind, sums, hidden))
        self.records += len(snps)

    def _write(self, lines: list[str]) -> None:
        if lines:
            with naming(self.path):
                self.handle.write(("\n".join(lines) + "\n").encode())

    def __exit__(self, exc_type, exc, tb):
        try:
            try:
                with naming(self.path), self.raw:
                    self.handle.close()
            except OSError:  # a full disk fails the last block too: the first error is the one to report
                if exc_type is None:
                    raise
            if exc_type is None:
                self.files.publish()
        finally:
            self.files.discard()
        return False


def records(path: str | Path):
    """Each line of the info file `path` after its header, split at its
    tabs; one line refusing a file of another layout (an older one, without
    Sums)."""
    with gzip_ng.open(path, "rt") as handle:
        header = handle.readline().rstrip("\n")
        if header != HEADER:
            raise InputError(f"info file {path}: expected the header {HEADER!r}; found {header!r}")
        for line in handle:
            yield line.rstrip("\n").split("\t")


def concatenate(parts: list[Path], path: str | Path, force: bool) -> None:
    """Write `path`, the info file of the records of the info files `parts`
    in turn (one header), published only when complete."""
    path = Path(path)
    files = OutputFiles([path], force)
    try:
        with naming(path), open(files.temporary(path), "wb") as raw, _gzip(raw) as out:
            out.write(f"{HEADER}\n".encode())
            for part in parts:
                with gzip_ng.open(part, "rb") as handle:
                    handle.readline()
                    shutil.copyfileobj(handle, out)
        files.publish()
    finally:
        files.discard()
