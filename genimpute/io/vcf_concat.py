"""Joining bgzipped VCFs of the same samples, one after another, into one
indexed file: the pieces of a genome-wide run, each a contig (or a stretch
of one) imputed on its own, in the target's contig order."""

from __future__ import annotations

from pathlib import Path

from zlib_ng import gzip_ng

from genimpute.io.bgzf import BgzfWriter
from genimpute.io.scratch import naming, publish

_READ = 1 << 24


def concatenate(parts: list, out: Path, force: bool, header_values: dict) -> None:
    """Write `parts` (bgzipped VCFs with the same columns, records in order
    from one to the next) as `out` and its tabix index: the first part's
    header, its `##key=` lines of `header_values` replaced, then every
    part's records."""
    import pysam

    tmp = out.with_name(f".{out.name}.joining")
    index = Path(f"{tmp}.tbi")
    try:
        with naming(out):
            writer = BgzfWriter(tmp, shown_as=out)
            try:
                for n, part in enumerate(parts):
                    _copy_records(part, writer, header_values if n == 0 else None)
            finally:
                writer.close()
            pysam.tabix_index(str(tmp), preset="vcf", force=True)
            publish(tmp, out, force)
            publish(index, Path(f"{out}.tbi"), True)
    finally:
        tmp.unlink(missing_ok=True)
        index.unlink(missing_ok=True)


def _copy_records(part: Path, writer: BgzfWriter, header_values: dict | None) -> None:
    """The records of `part` to `writer`, after its header (edited by
    `header_values`) where that is given, else without it."""
    with gzip_ng.open(part, "rb") as handle:
        header = []
        for line in handle:
            header.append(line)
            if line.startswith(b"#CHROM"):
                break
        if header_values is not None:
            writer.write(b"".join(_edited(line, header_values) for line in header))
        while chunk := handle.read(_READ):
            writer.write(chunk)


def _edited(line: bytes, values: dict) -> bytes:
    for key, value in values.items():
        if line.startswith(f"##{key}=".encode()):
            return f"##{key}={value}\n".encode()
    return line
