"""benchmarks/tiled_vcf.py: the whole-chromosome benchmark's VCFs and map,
copies of a short region's along one contig."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from paths import PANEL
from tools import require

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "tiled_vcf.py"


def tiler(*args) -> str:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def body(path: Path) -> list[list[str]]:
    text = subprocess.run(["bcftools", "view", "-H", str(path)], check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in text.splitlines()]


def test_each_copy_holds_the_sources_records_one_span_further_on(tmp_path):
    require("bcftools")
    genetic_map = tmp_path / "source.map"
    genetic_map.write_text("20 . 10.0 8900000\n20 . 10.5 9100000\n20 . 11.0 9200000\n")
    shift = int(tiler("shift", PANEL, genetic_map))
    assert shift == 9200000 - 8900000 + 1  # the map spans the panel's records here
    tiler("vcf", PANEL, tmp_path / "tiled.vcf.gz", 3, shift)

    source, tiled = body(PANEL), body(tmp_path / "tiled.vcf.gz")
    assert len(tiled) == 3 * len(source)
    positions = [int(record[1]) for record in tiled]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    for c in range(3):
        copy = tiled[c * len(source):(c + 1) * len(source)]
        assert [int(r[1]) for r in copy] == [int(r[1]) + c * shift for r in source]
        assert [r[:1] + r[2:] for r in copy] == [r[:1] + r[2:] for r in source]  # all but POS
    assert (tmp_path / "tiled.vcf.gz.tbi").exists() and not list(tmp_path.glob("*.part.*"))
    length = subprocess.run(["bcftools", "view", "-h", str(tmp_path / "tiled.vcf.gz")], check=True,
                            capture_output=True, text=True).stdout
    assert "##contig=<ID=20,length=2147483647>" in length  # already long enough: kept

    tiler("map", genetic_map, tmp_path / "tiled.map", 3, shift)
    rows = [line.split() for line in (tmp_path / "tiled.map").read_text().splitlines()]
    assert [int(r[3]) for r in rows] == [bp + c * shift for c in range(3) for bp in (8900000, 9100000, 9200000)]
    cms = [float(r[2]) for r in rows]
    assert cms == sorted(cms) and abs(cms[3] - cms[2] - 1.0 / 300000) < 1e-6  # the mean rate across a seam


def test_a_cohort_larger_than_the_sources_repeats_its_samples_under_new_names(tmp_path):
    require("bcftools")
    names = subprocess.run(["bcftools", "query", "-l", str(PANEL)], check=True, capture_output=True,
                           text=True).stdout.split()
    n = len(names) + 2
    tiler("vcf", PANEL, tmp_path / "cohort.vcf.gz", 2, 10_000_000, "--samples", n)
    tiled = subprocess.run(["bcftools", "query", "-l", str(tmp_path / "cohort.vcf.gz")], check=True,
                           capture_output=True, text=True).stdout.split()
    assert tiled == names + [f"{names[0]}_r1", f"{names[1]}_r1"]
    records = body(tmp_path / "cohort.vcf.gz")
    assert all(r[9:9 + len(names)] == r[9:-2] and r[-2:] == r[9:11] for r in records[:50])
    tiler("vcf", PANEL, tmp_path / "few.vcf.gz", 1, 10_000_000, "--samples", 3)
    assert [r[9:] for r in body(tmp_path / "few.vcf.gz")] == [[*r[9:12]] for r in body(PANEL)]


def test_the_contigs_length_is_raised_to_cover_the_last_copy():
    sys.path.insert(0, str(SCRIPT.parent))
    from tiled_vcf import Records, tiled_header

    header = [b"##contig=<ID=chr20,length=64444167>\n", b"##contig=<ID=chr2,length=5>\n", b"#CHROM\n"]
    records = Records(header, b"chr20", None, [])
    assert tiled_header(records, 100_000_000)[:2] == [b"##contig=<ID=chr20,length=100000000>\n", header[1]]
    assert tiled_header(records, 1000) == header
