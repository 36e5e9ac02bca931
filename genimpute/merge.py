"""Joining imputed VCF outputs, or info files, into one (genimpute merge).

Sample batches of one cohort (the same records, no sample in common) are
joined side by side: each record once, the inputs' sample columns in turn,
INFO AF and DR2 and the info file's columns recomputed from the sum of the
inputs' Sums (genimpute.io.info_file), exactly those of one run over every
sample. Chunks of one cohort (the same samples, other records) are joined
one after another. Info files alone (those beside BCF, BGEN and PGEN
outputs, which are not merged) are taken for sample batches and joined the
same way: each record once, its columns from the summed Sums. Inputs are
read as text a block of records at a time, so memory stays bounded
whatever their size.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from zlib_ng import gzip_ng

from genimpute.errors import InputError
from genimpute.io import info_file, vcf_concat
from genimpute.io.info_file import InfoWriter
from genimpute.io.integrity import check_complete
from genimpute.io.output_names import info_path, output_files, output_format
from genimpute.io.vcf_writer import ColumnText, DosageSums, VcfWriter, info_values

_BLOCK = 2000  # records joined at a time
_FIXED = 9  # CHROM .. FORMAT, before the sample columns
_CHROM, _POS, _ID, _REF, _ALT, _INFO, _FORMAT = 0, 1, 2, 3, 4, 7, 8
_INFO_FILE = ".info.gz"
_SNP, _INFO_REF, _INFO_ALT, _ALT_FRQ, _KIND, _SUMS, _LOO_SUMS = 0, 1, 2, 3, 7, 9, 10  # the info file's columns
_IDENTITY = (_SNP, _INFO_REF, _INFO_ALT, _KIND)  # what makes two info lines the same record


def merge(inputs: list, out: str | Path, force: bool = False) -> tuple[str, int]:
    """Write `out` (and its info file) from the VCF outputs `inputs`, or the
    info file `out` from the info files of sample batches `inputs`; return
    ("samples", "records" or "info", the records written)."""
    inputs, out = [Path(p) for p in inputs], Path(out)
    if len(inputs) < 2:
        raise InputError(f"merge: expected two or more outputs to merge; found {len(inputs)}")
    if any(path.name.endswith(_INFO_FILE) for path in [*inputs, out]):
        return "info", _merge_info_files(inputs, out, force)
    _check_paths(inputs, out, force)
    samples = [_samples(path) for path in inputs]
    if all(names == samples[0] for names in samples):
        return "records", _merge_records(inputs, out, force)
    _check_disjoint(inputs, samples)
    return "samples", _merge_samples(inputs, out, force)


def _merge_records(inputs: list[Path], out: Path, force: bool) -> int:
    """The chunks one after another, and their info files; the records written."""
    _check_chunk_order(inputs)
    # the info file first: a failed join of the VCFs then takes it away, so neither is left alone
    info_file.concatenate([info_path(p) for p in inputs], info_path(out), force)
    try:
        vcf_concat.concatenate(inputs, out, force, {})
    except BaseException:
        info_path(out).unlink(missing_ok=True)
        raise
    return sum(1 for _ in info_file.records(info_path(out)))


def _check_paths(inputs: list[Path], out: Path, force: bool) -> None:
    for path in [*inputs, out]:
        kind = output_format(path)
        if kind != "vcf":
            raise InputError(f"merge {path}: expected VCF outputs (.vcf.gz) or info files (.info.gz); found "
                             f"{kind.upper()}, which merge does not read (its info file {info_path(path)} merges)")
    for path in inputs:
        if not info_path(path).exists():
            raise InputError(f"merge {path}: expected its info file {info_path(path)} beside it (its sums "
                             "make the merged AF and DR2); found none")
        for whole in (path, info_path(path)):  # a file cut short would be joined as if it ended there
            check_complete(whole)
    if not force:
        for path in [*output_files(out), info_path(out)]:
            if path.exists():
                raise InputError(f"output {path}: exists; pass --force to overwrite")


def _header(handle) -> list[bytes]:
    """The header lines of an open VCF, the #CHROM line last."""
    lines = []
    for line in handle:
        lines.append(line)
        if line.startswith(b"#CHROM"):
            return lines
    raise InputError(f"merge {handle.name}: expected a #CHROM header line; found none")


def _samples(path: Path) -> list[str]:
    with gzip_ng.open(path, "rb") as handle:
        return _header(handle)[-1].decode().rstrip("\n").split("\t")[_FIXED:]


def _first_record(path: Path) -> list[str] | None:
    """The fields of the first record of a VCF (None where it has none)."""
    with gzip_ng.open(path, "rb") as handle:
        _header(handle)
        line = handle.readline()
    return line.decode().split("\t", _FIXED) if line else None


def _check_chunk_order(inputs: list[Path]) -> None:
    """Refuse chunks given twice or out of order on a contig (a later chunk
    starting at or before an earlier one's start); tabix refuses the rest
    of an unsorted join."""
    firsts = [(path, _first_record(path)) for path in inputs]
    firsts = [(path, fields) for path, fields in firsts if fields is not None]
    for (before, earlier), (path, fields) in zip(firsts, firsts[1:]):
        if fields[_CHROM] == earlier[_CHROM] and int(fields[_POS]) <= int(earlier[_POS]):
            raise InputError(f"merge: expected chunks of one cohort in order, each after the one before; found "
                             f"{path} starting at {_name(fields)}, not after {before}'s start {_name(earlier)}")


def _check_disjoint(inputs: list[Path], samples: list[list[str]]) -> None:
    seen = {}
    for path, names in zip(inputs, samples):
        for name in names:
            if name in seen:
                raise InputError(f"merge: expected the same samples in every input (chunks of one cohort) or "
                                 f"none in common (sample batches); found {name} in {seen[name]} and {path}")
            seen[name] = path


def _merge_samples(inputs: list[Path], out: Path, force: bool) -> int:
    """Write the sample batches `inputs` side by side as `out`; return the records written."""
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(gzip_ng.open(path, "rb")) for path in inputs]
        headers = [_header(handle) for handle in handles]
        info_writer = stack.enter_context(InfoWriter(info_path(out), force))
        writer = stack.enter_context(VcfWriter(out, force))
        columns = [line.decode().rstrip("\n").split("\t") for line in (header[-1] for header in headers)]
        writer.write_header_lines([line.decode().rstrip("\n") for line in headers[0][:-1]]
                                  + ["\t".join(columns[0][:_FIXED] + [s for c in columns for s in c[_FIXED:]])])
        records = itertools.zip_longest(*(itertools.zip_longest(handle, info_file.records(info_path(path)))
                                          for handle, path in zip(handles, inputs)))
        while rows := list(itertools.islice(records, _BLOCK)):
            block = _Block()
            for row in rows:
                block.add(inputs, row)
            block.write(writer, info_writer)
        return writer.records


def _name(fields: list) -> str:
    return ":".join(fields[k] for k in (_CHROM, _POS, _REF, _ALT))


def _impmiss(info: str) -> int:
    """The missing calls a typed record's INFO says were filled in (IMPMISS), 0 where it has none."""
    return sum(int(f[len("IMPMISS="):]) for f in info.split(";") if f.startswith("IMPMISS="))


@dataclass
class _Block:
    """Consecutive records of every sample batch, joined: what the merged
    VCF and info file are written from."""

    fixed: list = field(default_factory=list)  # [CHROM, POS, ID, REF, ALT] each
    formats: list = field(default_factory=list)
    columns: list = field(default_factory=list)  # bytes: every batch's sample columns, tab-separated, and a newline
    info: list = field(default_factory=list)  # the first batch's info file fields
    sums: list = field(default_factory=list)  # (6,) int64 each, summed over the batches
    hidden: list = field(default_factory=list)  # (6,) int64 each, LooSums summed over the batches
    missing: list = field(default_factory=list)  # IMPMISS summed over the batches

    def add(self, inputs: list[Path], row: tuple) -> None:
        """Join one record: row holds each input's (VCF line, info file fields), None past either's end."""
        lines = _lines(inputs, row)
        first, info = lines[0][0], lines[0][1]
        for path, (fields, line_info) in zip(inputs, lines):
            if [fields[k] for k in (_CHROM, _POS, _REF, _ALT)] != [first[k] for k in (_CHROM, _POS, _REF, _ALT)]:
                raise InputError(f"merge: expected the records of {inputs[0]} in {path} (sample batches); "
                                 f"found {_name(fields)} where {inputs[0]} has {_name(first)}")
            if fields[_FORMAT] != first[_FORMAT]:
                raise InputError(f"merge {path}: expected FORMAT {first[_FORMAT]} at {_name(first)}, as in "
                                 f"{inputs[0]}; found {fields[_FORMAT]}")
            if line_info[1:3] != [fields[_REF], fields[_ALT]]:
                raise InputError(f"merge {info_path(path)}: expected the line of {_name(fields)}; "
                                 f"found {' '.join(line_info[:3])}")
        self.fixed.append([first[k] for k in (_CHROM, _POS, _ID, _REF, _ALT)])
        self.formats.append(first[_FORMAT])
        self.columns.append("\t".join(fields[_FIXED].rstrip("\n") for fields, _ in lines).encode() + b"\n")
        self.info.append(info)
        self.sums.append(_summed([line_info for _, line_info in lines], _SUMS))
        self.hidden.append(_summed([line_info for _, line_info in lines], _LOO_SUMS))
        self.missing.append(sum(_impmiss(fields[_INFO]) for fields, _ in lines))

    def write(self, writer: VcfWriter, info_writer: InfoWriter) -> None:
        """Write the block's records and info lines, AF, DR2 and AvgCall from the summed sums."""
        sums = DosageSums.from_columns(np.array(self.sums))
        af, dr2 = sums.af(), sums.r2()
        kinds = [i[_KIND] for i in self.info]
        info = info_values(af, dr2, np.array(self.missing), np.array([k == "Genotyped" for k in kinds]))
        info = ["." if kind == "Typed_Only" else text for kind, text in zip(kinds, info)]
        at = 0
        for fmt, run in itertools.groupby(self.formats):
            end = at + len(list(run))
            pieces = self.columns[at:end]
            text = ColumnText(np.frombuffer(b"".join(pieces), dtype=np.uint8), np.cumsum([len(p) for p in pieces]))
            writer.write_records(self.fixed[at:end], info[at:end], fmt, text)
            at = end
        _write_info(info_writer, self.info, sums, np.array(self.hidden))


def _summed(lines: list, column: int) -> np.ndarray:
    """(6,) int64: the six sums in `column` (Sums or LooSums; "-": zeros)
    of one record's info lines (one a batch), added up."""
    return sum(np.zeros(6, dtype=np.int64) if line[column] == "-"
               else np.array(line[column].split(","), dtype=np.int64) for line in lines)


def _write_info(writer: InfoWriter, lines: list, sums: DosageSums, hidden: np.ndarray) -> None:
    """Write the info lines of records whose fields in one batch's info file
    are `lines`, their numbers from the Sums `sums` and LooSums `hidden`
    (V, 6) of every batch added up."""
    known = np.array([line[_ALT_FRQ] != "-" for line in lines])  # a multi-allelic Typed_Only record's is unknown
    writer.write([line[_SNP] for line in lines], [line[_INFO_REF] for line in lines],
                 [line[_INFO_ALT] for line in lines], np.where(known, sums.af(), np.nan), sums.avg_call(), sums.r2(),
                 [line[_KIND] for line in lines], sums.columns(), hidden)


def _lines(inputs: list[Path], row: tuple) -> list[tuple[list[str], list[str]]]:
    """Each input's (VCF fields, info file fields) of one record; one line
    refusing an input, or an info file, that ended before the others."""
    present = [pair[0] for pair in row if pair is not None and pair[0] is not None]
    for path, pair in zip(inputs, row):
        if pair is None or pair[0] is None:
            if not present:
                raise InputError(f"merge {info_path(path)}: expected one line per record of {path}; found more")
            fields = present[0].decode().split("\t", _FIXED)
            raise InputError(f"merge: expected the records of every input in each (sample batches); "
                             f"found {path} ends before {_name(fields)}")
        if pair[1] is None:
            raise InputError(f"merge {info_path(path)}: expected one line per record of {path}; found fewer")
    return [(line.decode().split("\t", _FIXED), info) for line, info in row]


def _merge_info_files(inputs: list[Path], out: Path, force: bool) -> int:
    """Write the info file `out` of the sample batches whose info files are
    `inputs`; return the records written."""
    for path in [*inputs, out]:
        if not path.name.endswith(_INFO_FILE):
            raise InputError(f"merge {path}: expected info files ({_INFO_FILE}) only, as the others given; "
                             f"found {path.name}")
    for path in inputs:
        check_complete(path)  # a file cut short would be joined as if it ended there
    with InfoWriter(out, force) as writer:
        rows = itertools.zip_longest(*(info_file.records(path) for path in inputs))
        while block := list(itertools.islice(rows, _BLOCK)):
            for row in block:
                _check_info_row(inputs, row)
            sums = np.array([_summed(row, _SUMS) for row in block])
            _write_info(writer, [row[0] for row in block], DosageSums.from_columns(sums),
                        np.array([_summed(row, _LOO_SUMS) for row in block]))
        return writer.records


def _record(line: list[str]) -> str:
    return f"{line[_SNP]} {line[_INFO_REF]}>{line[_INFO_ALT]} ({line[_KIND]})"


def _check_info_row(inputs: list[Path], row: tuple) -> None:
    """Refuse one line of each info file unless all are the same record;
    one line refusing a file that ended before the others."""
    first = next(line for line in row if line is not None)
    for path, line in zip(inputs, row):
        if line is None:
            raise InputError(f"merge: expected the records of every info file in each (sample batches); found "
                             f"{path} ends before {_record(first)}")
        if len(line) != len(info_file.COLUMNS):
            raise InputError(f"merge {path}: expected {len(info_file.COLUMNS)} tab-separated columns; found "
                             f"{len(line)} at {line[0]}")
        if [line[k] for k in _IDENTITY] != [row[0][k] for k in _IDENTITY]:
            raise InputError(f"merge: expected the records of {inputs[0]} in {path} (sample batches); found "
                             f"{_record(line)} where {inputs[0]} has {_record(row[0])}")
