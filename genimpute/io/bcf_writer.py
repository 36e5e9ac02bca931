"""Writing imputed records as BCF, with its CSI index, published only when
complete.

Each record is the VCF writer's text (the same header, INFO, FORMAT and
sample columns), parsed by htslib (cyvcf2) into BCF: a BCF output holds
exactly what the .vcf.gz of the same run holds, read back by bcftools as
the same records. The index is the CSI that `bcftools index` writes (BCF
cannot take a tabix index), built by htslib (pysam) from the finished file.
"""

from __future__ import annotations

import re
from pathlib import Path

import cyvcf2

from genimpute.errors import InputError
from genimpute.io.bgen_writer import OutputFiles, PublishedOnExit
from genimpute.io.scratch import naming
from genimpute.io.vcf_writer import ColumnText, VcfWriter
from genimpute.runtime import usable_cores

CSI_MIN_SHIFT = 14  # bcftools index's default bin size
_CONTIG = re.compile(r"##contig=<ID=([^,>]+)")


class BcfWriter(PublishedOnExit):
    """Context manager writing `path` (a .bcf) and `path`.csi, each to a
    hidden temporary file beside it; on a clean exit the file is indexed
    and both are renamed into place, on an error they are deleted. Takes
    what VcfWriter takes (write_header or write_header_lines, then
    write_records); threads: those compressing its blocks (the file does
    not depend on them)."""

    def __init__(self, path: str | Path, force: bool = False, threads: int | None = None):
        self.path = Path(path)
        if not self.path.name.endswith(".bcf"):
            raise InputError(f"output {self.path}: expected a name ending in .bcf; found {self.path.name}")
        self.index_path = self.path.with_name(f"{self.path.name}.csi")
        self.files = OutputFiles([self.path, self.index_path], force)
        self.threads = threads or min(4, usable_cores())
        self.writer = None
        self.records = 0

    def __enter__(self):
        return self

    # the VCF's header lines, handed to write_header_lines
    write_header = VcfWriter.write_header

    def write_header_lines(self, lines: list) -> None:
        """Write header lines as given, the #CHROM line last."""
        with naming(self.path):
            self.writer = cyvcf2.Writer.from_string(str(self.files.temporary(self.path)), "\n".join(lines) + "\n",
                                                    mode="wb")
            self.writer.set_threads(self.threads)
            self.writer.write_header()
        self.contigs = {match[1] for match in map(_CONTIG.match, lines) if match}

    def write_records(self, fixed: list, info: list, fmt: str, columns: ColumnText) -> None:
        """fixed: per record [CHROM, POS, ID, REF, ALT]; columns: the records'
        sample columns (genotype_columns, ColumnText.from_rows)."""
        unknown = {f[0] for f in fixed} - self.contigs
        if unknown:  # htslib would add it to a header already written: a BCF no reader could follow
            raise InputError(f"output {self.path}: expected contigs of its header; found {sorted(unknown)[0]}")
        with naming(self.path):
            for f, text, piece in zip(fixed, info, columns.pieces()):
                line = "\t".join([*f, ".", "PASS", text, fmt, ""]) + bytes(piece[:-1]).decode("ascii")
                self.writer.write_record(self.writer.variant_from_string(line))
        self.records += len(fixed)

    def _finish(self) -> None:
        """Close the file, index it and publish the two."""
        import pysam

        self.writer.close()
        self.writer = None
        pysam.tabix_index(str(self.files.temporary(self.path)), preset="vcf", csi=True, min_shift=CSI_MIN_SHIFT,
                          index=str(self.files.temporary(self.index_path)), force=True)
        self.files.publish()

    def _close(self) -> None:
        """Close what is open and delete the temporary files left (both
        after a failure, none after publishing)."""
        if self.writer is not None:
            self.writer.close()
        self.files.discard()
