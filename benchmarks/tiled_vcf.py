"""A chromosome-sized VCF made of copies of a short region's: each copy's
records are the source's, their positions shifted by `copies` times the
source's span, and a PLINK map tiled the same way (the cM shifted at the
map's mean rate), for the time and memory of a whole-chromosome job
(benchmarks/whole_chromosome.sh). The copies' haplotypes are the same, so
accuracy across the seams means nothing.

    python benchmarks/tiled_vcf.py shift PANEL.vcf.gz MAP        (prints the shift in bp)
    python benchmarks/tiled_vcf.py vcf SOURCE.vcf.gz OUT.vcf.gz COPIES SHIFT [--samples N]
    python benchmarks/tiled_vcf.py map SOURCE.map OUT.map COPIES SHIFT

`vcf` holds one copy's text (the source's) at a time, never the output:
it writes each copy with its positions shifted through `bgzip -@ THREADS`,
then indexes it with tabix; --samples N keeps the first N samples, or, for
more than the source has, repeats them under new names (NAME_r1, ...).
The source must be one contig's, sorted. Needs bgzip and tabix on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Records:
    """One copy's text: the header's lines, the contig's name, each
    record's position, and each record's text after its position (its tab
    to its newline)."""

    header: list[bytes]
    chrom: bytes
    positions: np.ndarray
    rests: list


def decompressed(source: Path) -> bytes:
    return subprocess.run(["bgzip", "-dc", str(source)], check=True, capture_output=True).stdout


def read_records(source: Path) -> Records:
    """The source VCF's header and records, without copying the records'
    text (each rest is a view of the decompressed file)."""
    data = decompressed(source)
    view = memoryview(data)
    header, at = [], 0
    while data.startswith(b"#", at):
        end = data.index(b"\n", at) + 1
        header.append(data[at:end])
        at = end
    chroms, positions, rests = set(), [], []
    while at < len(data):
        end = data.find(b"\n", at) + 1 or len(data)
        first = data.index(b"\t", at)
        second = data.index(b"\t", first + 1)
        chroms.add(data[at:first])
        positions.append(int(data[first + 1:second]))
        rests.append(view[second:end])
        at = end
    if len(chroms) != 1:
        raise SystemExit(f"{source}: expected the records of one contig; found {len(chroms)}")
    positions = np.array(positions, dtype=np.int64)
    if np.any(np.diff(positions) < 0):
        raise SystemExit(f"{source}: expected records sorted by position")
    return Records(header, chroms.pop(), positions, rests)


def chosen_samples(records: Records, n: int) -> Records:
    """The first `n` samples, or every sample repeated under new names
    until there are `n` (for a cohort larger than the source's)."""
    names = records.header[-1].rstrip(b"\n").split(b"\t")
    have = len(names) - 9
    if have < 1:
        raise SystemExit("expected a VCF with samples")
    columns = [i % have for i in range(n)]
    renamed = [names[9 + c] + (b"_r%d" % (i // have) if i >= have else b"") for i, c in enumerate(columns)]
    header = [*records.header[:-1], b"\t".join(names[:9] + renamed) + b"\n"]
    rests = []
    for rest in records.rests:
        fields = bytes(rest).rstrip(b"\n").split(b"\t")  # fields[0] is empty: rest starts with its tab
        rests.append(b"\t".join(fields[:8] + [fields[8 + c] for c in columns]) + b"\n")
    return Records(header, records.chrom, records.positions, rests)


def tiled_header(records: Records, last: int) -> list[bytes]:
    """The header with the contig's length raised to cover the last tiled position."""
    pattern = re.compile(rb"(##contig=<ID=" + re.escape(records.chrom) + rb",(?:.*,)?length=)(\d+)")
    return [pattern.sub(lambda m: m.group(1) + b"%d" % max(int(m.group(2)), last), line)
            for line in records.header]


def write_copies(records: Records, sink, copies: int, shift: int, block: int = 4096) -> None:
    """Each copy's records in turn, copy c's positions c * shift further on."""
    last = int(records.positions[-1]) + (copies - 1) * shift
    sink.write(b"".join(tiled_header(records, last)))
    prefix = records.chrom + b"\t"
    for c in range(copies):
        positions = [str(p).encode() for p in (records.positions + c * shift).tolist()]
        for start in range(0, len(positions), block):
            pieces = []
            for pos, rest in zip(positions[start:start + block], records.rests[start:start + block]):
                pieces += (prefix, pos, rest)
            sink.write(b"".join(pieces))


def tile_vcf(source: Path, out: Path, copies: int, shift: int, samples: int | None = None,
             threads: int = 2) -> None:
    """The source's records repeated `copies` times, each copy `shift` bp
    further on, bgzipped and indexed; written beside `out` and renamed
    when whole, so that a killed run leaves no `out`."""
    records = read_records(source)
    if samples is not None:
        records = chosen_samples(records, samples)
    if copies > 1 and shift <= records.positions[-1] - records.positions[0]:
        raise SystemExit(f"shift {shift}: expected more than the source's span of positions")
    part = out.with_name(out.name.replace(".vcf.gz", "") + ".part.vcf.gz")
    with open(part, "wb") as handle:
        bgzip = subprocess.Popen(["bgzip", "-@", str(threads), "-c"], stdin=subprocess.PIPE, stdout=handle)
        try:
            write_copies(records, bgzip.stdin, copies, shift)
        finally:
            bgzip.stdin.close()
            if bgzip.wait():
                raise SystemExit(f"bgzip failed on {part}")
    subprocess.run(["tabix", "-f", "-p", "vcf", str(part)], check=True)
    os.replace(f"{part}.tbi", f"{out}.tbi")
    os.replace(part, out)


def read_map(source: Path) -> list[tuple[str, str, float, int]]:
    """A PLINK map's rows (chrom, id, cM, bp)."""
    rows = [line.split() for line in source.read_text().splitlines() if line.strip()]
    return [(chrom, name, float(cm), int(bp)) for chrom, name, cm, bp in rows]


def map_rate(rows) -> float:
    """The map's mean rate, cM per bp."""
    (_, _, cm0, bp0), (_, _, cm1, bp1) = rows[0], rows[-1]
    return (cm1 - cm0) / max(1, bp1 - bp0)


def tile_map(source: Path, out: Path, copies: int, shift: int) -> None:
    """The map's rows repeated `copies` times, copy c's bp c * shift further
    on and its cM c * shift at the map's mean rate further on: the rate
    within each copy is the source's, and across a seam its mean."""
    rows = read_map(source)
    if len({row[0] for row in rows}) != 1:
        raise SystemExit(f"{source}: expected a map of one contig")
    if copies > 1 and shift <= rows[-1][3] - rows[0][3]:
        raise SystemExit(f"shift {shift}: expected more than the map's span")
    cm_shift = shift * map_rate(rows)
    out.write_text("".join(f"{chrom} {name} {cm + c * cm_shift:.6f} {bp + c * shift}\n"
                           for c in range(copies) for chrom, name, cm, bp in rows))


def shift_of(panel: Path, genetic_map: Path) -> int:
    """The shift between copies: the span of the panel's positions and the
    map's together, and one, so that no copy's map point or record meets
    the next copy's."""
    positions = read_records(panel).positions
    bps = [row[3] for row in read_map(genetic_map)]
    return int(max(positions[-1], bps[-1]) - min(positions[0], bps[0]) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    shift = commands.add_parser("shift", help="print the shift between copies, in bp")
    shift.add_argument("panel", type=Path)
    shift.add_argument("map", type=Path)
    for name in ("vcf", "map"):
        command = commands.add_parser(name, help=f"tile a {name.upper()}")
        command.add_argument("source", type=Path)
        command.add_argument("out", type=Path)
        command.add_argument("copies", type=int)
        command.add_argument("shift", type=int)
    commands.choices["vcf"].add_argument("--samples", type=int, help="the first N samples, repeated if need be")
    commands.choices["vcf"].add_argument("--threads", type=int, default=2, help="bgzip's threads")
    args = parser.parse_args()
    if args.command == "shift":
        print(shift_of(args.panel, args.map))
        return
    if args.copies < 1:
        raise SystemExit(f"copies: expected at least 1; found {args.copies}")
    if args.command == "vcf":
        tile_vcf(args.source, args.out, args.copies, args.shift, args.samples, args.threads)
    else:
        tile_map(args.source, args.out, args.copies, args.shift)


if __name__ == "__main__":
    main()
