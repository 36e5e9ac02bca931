"""The output of an imputation run in the format its name asks for
(genimpute.io.output_names): a bgzipped VCF, BCF, BGEN or PGEN, and the
info file beside it (OUT.info.gz).

Each format makes its own sample columns from a batch of samples' calls
(a VCF's text, which BCF is parsed from, or BGEN's and PGEN's arrays:
genimpute.io.calls), which
genimpute.records joins across batches and hands back to be written with
the INFO of the whole cohort. BGEN and PGEN hold biallelic records only:
a target record the panel lacks passes through as its hard calls where it
has one ALT allele, and is left out (with a count in the log) otherwise.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genimpute.io.bcf_writer import BcfWriter
from genimpute.io.bgen_writer import BgenWriter
from genimpute.io.calls import Calls
from genimpute.io.info_file import InfoWriter, snp_names
from genimpute.io.output_names import info_path, output_format
from genimpute.io.pgen_writer import PgenWriter
from genimpute.io.vcf_reader import ABSENT, MISSING
from genimpute.io.vcf_writer import (
    ColumnText,
    DosageSums,
    FormatFields,
    VcfWriter,
    genotype_columns,
    info_values,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputSettings:
    """fields: a VCF's FORMAT; bgen_bits: bits per stored probability and
    bgen_phased: haplotype (else genotype) probabilities, a BGEN's."""

    fields: FormatFields = FormatFields()
    bgen_bits: int = 8
    bgen_phased: bool = True


def _biallelic(alt: str) -> bool:
    return "," not in alt and alt != "."


class _Output(abc.ABC):
    """An output and its info file, written record by record: columns()
    and passed_columns() make a batch's sample columns, write_panel() and
    write_passed() write a chunk's records once every batch's are joined.
    Opened (open()) once the records to come are counted; takes(alt):
    whether a passed-through target record with that ALT is written."""

    def __init__(self, path: str | Path, settings: OutputSettings, force: bool):
        self.path, self.settings, self.force = Path(path), settings, force
        self.records = 0
        self.hidden = None  # the HiddenSums of the records --validate hid (genimpute.validation), for LooRsq

    def takes(self, alt: str) -> bool:
        return _biallelic(alt)

    @contextlib.contextmanager
    def open(self, samples: list[str], contigs: list[str], meta: dict, n_records: int):
        """The output and its info file, published together at a clean end."""
        with contextlib.ExitStack() as stack:
            self.info = stack.enter_context(InfoWriter(info_path(self.path), self.force))
            self.writer = stack.enter_context(self._writer(samples, contigs, meta, n_records))
            yield self

    def columns(self, p: np.ndarray, haploid: np.ndarray | None):
        """A batch's sample columns of panel records from each haplotype's
        P(alt) p (V, 2B); haploid (V, B), None where every call is diploid."""
        return Calls.imputed(p, np.zeros((len(p), p.shape[1] // 2), dtype=bool) if haploid is None else haploid)

    def passed_columns(self, alleles: np.ndarray, phased: np.ndarray):
        """A batch's sample columns of passed-through target records from
        their allele indices (V, 2B), phased (V,) as the target has them."""
        return Calls.of_alleles(alleles, phased)

    def write_panel(self, fixed: list, columns, sums: DosageSums, missing_calls: np.ndarray,
                    typed: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Write panel records `rows` (fixed: [CHROM, POS, ID, REF, ALT]
        each) and their info lines, from the sums over every sample; return
        the AF and DR2 written (V,) each."""
        af, dr2 = sums.af(), sums.r2()
        self._records(fixed, info_values(af, dr2, missing_calls, typed), columns, passed=False)
        hidden = None if self.hidden is None else self.hidden.at(rows)
        self._info(fixed, af, sums.avg_call(), dr2, np.where(typed, "Genotyped", "Imputed").tolist(), sums, hidden)
        return af, dr2

    def write_passed(self, fixed: list, columns, sums: DosageSums) -> None:
        """Write passed-through target records and their info lines
        (ALT_Frq unknown where the record is not biallelic)."""
        self._records(fixed, ["."] * len(fixed), columns, passed=True)
        af = np.where([_biallelic(f[4]) for f in fixed], sums.af(), np.nan)
        unknown = np.full(len(fixed), np.nan)
        self._info(fixed, af, unknown, unknown, ["Typed_Only"] * len(fixed), sums)

    def _info(self, fixed: list, af, avg_call, rsq, kinds: list[str], sums: DosageSums, hidden=None) -> None:
        if fixed:
            _, positions, ids, refs, alts = zip(*fixed)
            self.info.write(snp_names(fixed[0][0], positions, ids, refs, alts), list(refs), list(alts), af,
                            avg_call, rsq, kinds, sums.columns(), hidden)

    @abc.abstractmethod
    def _writer(self, samples: list[str], contigs: list[str], meta: dict, n_records: int):
        """The format's writer (a context manager), its header written."""

    @abc.abstractmethod
    def _records(self, fixed: list, info: list[str], columns, passed: bool) -> None:
        """Write records with their INFO (a VCF's and a .pvar's) and joined columns."""


class _VcfOutput(_Output):
    writer_class = VcfWriter

    def takes(self, alt: str) -> bool:
        return True

    @contextlib.contextmanager
    def _writer(self, samples: list[str], contigs: list[str], meta: dict, n_records: int):
        with self.writer_class(self.path, force=self.force) as writer:
            writer.write_header(samples, contigs, meta, self.settings.fields)
            yield writer

    def columns(self, p: np.ndarray, haploid: np.ndarray | None) -> ColumnText:
        return genotype_columns(p[:, 0::2], p[:, 1::2], haploid, self.settings.fields)

    def passed_columns(self, alleles: np.ndarray, phased: np.ndarray) -> ColumnText:
        text = np.where(alleles == MISSING, ".", alleles.astype(str)).astype(object)
        separator = np.where(phased, "|", "/").astype(object)[:, None]
        columns = np.where(alleles[:, 1::2] == ABSENT, text[:, 0::2], text[:, 0::2] + separator + text[:, 1::2])
        return ColumnText.from_rows(["\t".join(row) for row in columns.tolist()])

    def _records(self, fixed: list, info: list[str], columns: ColumnText, passed: bool) -> None:
        self.writer.write_records(fixed, info, "GT" if passed else str(self.settings.fields), columns)
        self.records = self.writer.records


class _BcfOutput(_VcfOutput):
    """The VCF's records, parsed into BCF as they are written."""

    writer_class = BcfWriter


class _BgenOutput(_Output):
    def _writer(self, samples: list[str], contigs: list[str], meta: dict, n_records: int):
        return BgenWriter(self.path, samples, bits=self.settings.bgen_bits, phased=self.settings.bgen_phased,
                          force=self.force)

    def _records(self, fixed: list, info: list[str], columns: Calls, passed: bool) -> None:
        _, positions, ids, refs, alts = zip(*fixed)
        self.writer.write_variants(fixed[0][0], [int(p) for p in positions], list(ids), list(refs), list(alts),
                                   columns.p1, columns.p2, columns.haploid, columns.phased)
        self.records = self.writer.records


class _PgenOutput(_Output):
    def _writer(self, samples: list[str], contigs: list[str], meta: dict, n_records: int):
        header = [f"##{key}={value}" for key, value in meta.items()] + [f"##contig=<ID={c}>" for c in contigs]
        return PgenWriter(self.path, samples, n_records, force=self.force, header=header)

    def _records(self, fixed: list, info: list[str], columns: Calls, passed: bool) -> None:
        _, positions, ids, refs, alts = zip(*fixed)
        self.writer.write_variants(fixed[0][0], [int(p) for p in positions], list(ids), list(refs), list(alts),
                                   columns.p1, columns.p2, columns.haploid, info=info)
        self.records = self.writer.records


def run_output(path: str | Path, settings: OutputSettings = OutputSettings(), force: bool = False) -> _Output:
    """The output its name asks for (one line refusing an unknown ending)."""
    kinds = {"vcf": _VcfOutput, "bcf": _BcfOutput, "bgen": _BgenOutput, "pgen": _PgenOutput}
    return kinds[output_format(path)](path, settings, force)
