"""Writing imputed dosages as a PLINK 2 fileset: .pgen (written by
pgenlib, PLINK 2's own library), .pvar and .psam, published only when
complete.

Each call's dosage of ALT is p1 + p2 from its haplotypes' probabilities of
ALT; a haploid call's is 2 * p1, as PLINK 2 stores one (a haploid call is
a homozygous diploid one to it: importing a VCF doubles a haploid call's
DS, and exporting chrX calls of males halves it again). PGEN
keeps dosages in multiples of 2^-14. The hardcalls beside them are those
pgenlib derives from each dosage, unphased: the nearest genotype where the
dosage is within 0.1 of it, missing elsewhere (PLINK 2's
--hard-call-threshold 0.1); pgenlib's Python writer takes either calls or
dosages for a record, not both, nor phased dosages.

A missing call (NaN) is missing in the .pgen (pgenlib's -9). pgenlib
needs the number of records before the first (variant_count); records
then stream to the .pgen as they come.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pgenlib

from genimpute.errors import InputError
from genimpute.io.bgen_writer import OutputFiles, PublishedOnExit, check_record_columns
from genimpute.io.scratch import naming
from genimpute.io.vcf_writer import INFO_LINES

PVAR_COLUMNS = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"
MISSING_DOSAGE = -9.0  # pgenlib's missing dosage


def dosages(p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None) -> np.ndarray:
    """(V, S) float64 dosages of ALT on PLINK 2's scale: p1 + p2, and 2 * p1
    at haploid calls, each probability clipped to [0, 1]; MISSING_DOSAGE
    where a probability the call takes is NaN."""
    a, b = np.clip(p1, 0.0, 1.0, dtype=np.float64), np.clip(p2, 0.0, 1.0, dtype=np.float64)
    values = a + b if haploid is None else np.where(haploid, 2.0 * a, a + b)
    return np.ascontiguousarray(np.where(np.isnan(values), MISSING_DOSAGE, values))


class PgenWriter(PublishedOnExit):
    """Context manager writing `path` (a .pgen) and, beside it, the .pvar
    and .psam of the same name, each to a hidden temporary file; on a clean
    exit they are renamed into place, on an error deleted. variant_count:
    how many records will be written; header: lines (## ...) for the .pvar's
    header, after its INFO lines."""

    def __init__(self, path: str | Path, samples: list[str], variant_count: int, force: bool = False,
                 header: list[str] = ()):
        self.path = Path(path)
        if self.path.suffix != ".pgen":
            raise InputError(f"output {self.path}: expected a name ending in .pgen")
        if not samples:
            raise InputError(f"output {self.path}: expected at least one sample; found none")
        if variant_count < 1:
            raise InputError(f"output {self.path}: expected at least one record; found {variant_count}")
        self.samples, self.variant_count, self.header = list(samples), variant_count, list(header)
        self.pvar_path, self.psam_path = self.path.with_suffix(".pvar"), self.path.with_suffix(".psam")
        self.files = OutputFiles([self.path, self.pvar_path, self.psam_path], force)
        self.records = 0

    def __enter__(self):
        self.pvar = self.pgen = None
        try:
            self.files.temporary(self.psam_path).write_text(
                "".join(["#IID\tSEX\n", *(f"{sample}\tNA\n" for sample in self.samples)]))
            self.pvar = open(self.files.temporary(self.pvar_path), "w")
            self.pvar.write("\n".join(["##fileformat=VCFv4.2", *INFO_LINES, *self.header, PVAR_COLUMNS]) + "\n")
            self.pgen = pgenlib.PgenWriter(bytes(self.files.temporary(self.path)), len(self.samples),
                                           self.variant_count, nonref_flags=False, dosage_present=True)
        except BaseException:
            self._close()
            raise
        return self

    def write_variants(self, contig: str, positions, ids: list[str], refs: list[str], alts: list[str],
                       p1: np.ndarray, p2: np.ndarray, haploid: np.ndarray | None = None,
                       info: list[str] | None = None) -> None:
        """Append biallelic records of `contig`: p1, p2 (V, samples) each
        call's haplotypes' probabilities of ALT (NaN: missing); where haploid (V, samples)
        is set, a haploid call from p1 alone; info: each record's INFO
        column (. where not given)."""
        p1, p2 = np.asarray(p1), np.asarray(p2)
        haploid = None if haploid is None else np.asarray(haploid, dtype=bool)
        check_record_columns(positions, ids, refs, alts, p1, p2, haploid, len(self.samples))
        info = ["."] * len(positions) if info is None else info
        if len(info) != len(positions):
            raise InputError(f"INFO: expected one per record ({len(positions)}); found {len(info)}")
        if not len(positions):
            return
        if self.records + len(positions) > self.variant_count:
            raise InputError(f"output {self.path}: expected {self.variant_count} records; "
                             f"found more ({self.records + len(positions)})")
        values = dosages(p1, p2, haploid)
        with naming(self.path):
            self.pgen.append_dosages_batch(values)
            self.pvar.write("".join(f"{contig}\t{int(pos)}\t{variant_id}\t{ref}\t{alt}\t.\tPASS\t{text}\n"
                                    for pos, variant_id, ref, alt, text in zip(positions, ids, refs, alts, info)))
        self.records += len(positions)

    def _finish(self) -> None:
        """Check the count, close and publish."""
        if self.records != self.variant_count:
            raise InputError(f"output {self.path}: expected {self.variant_count} records; found {self.records}")
        self.pgen.close()
        self.pvar.close()
        self.files.publish()

    def _close(self) -> None:
        """Close what is open and delete the temporary files left (all of
        them after a failure, none after publishing)."""
        if self.pvar is not None:
            self.pvar.close()
        self.pgen = None  # pgenlib's writer, unfinished, frees its state when dropped
        self.files.discard()
