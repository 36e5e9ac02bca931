"""Write a small phased panel of 32,768 samples and a target typed at half
its records, into DIR: imputing one from the other compiles the copying
engine for a PBWT index of int32 (a panel above 32,767 samples), which the
image's warm-up on the example data (uint16) does not. numba compiles each
array type on first use (about 25 s) and caches the code; compiled at build
time, a fresh container with an HRC- or TOPMed-sized panel starts warm.

    python docker/wide_panel.py DIR   # then: genimpute impute DIR/target.vcf --ref DIR/panel.vcf
"""

import sys
from pathlib import Path

import numpy as np

SAMPLES = 32_768  # 65,536 haplotypes: one more than the uint16 index holds
RECORDS = 40
FOUNDERS = 8  # the panel's haplotypes are mosaics of a few, so the copying model has matches to find


def _vcf(path: Path, names: list, haplotypes: np.ndarray, rows: np.ndarray) -> None:
    """A phased VCF of haplotypes (records, 2 x len(names)) 0/1 at `rows` of the records."""
    header = ["##fileformat=VCFv4.2", "##contig=<ID=20,length=1000000>",
              '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
              "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *names])]
    with open(path, "w") as out:
        out.write("\n".join(header) + "\n")
        for r in rows:
            calls = "\t".join(f"{a}|{b}" for a, b in zip(haplotypes[r, 0::2], haplotypes[r, 1::2]))
            out.write(f"20\t{1000 * (r + 1)}\t.\tA\tC\t.\t.\t.\tGT\t{calls}\n")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    founders = rng.integers(0, 2, (RECORDS, FOUNDERS))
    copied = rng.integers(0, FOUNDERS, (RECORDS // 10, 2 * SAMPLES + 2)).repeat(10, axis=0)  # a switch per 10 records
    haplotypes = np.take_along_axis(founders, copied, axis=1)
    _vcf(out / "panel.vcf", [f"p{i}" for i in range(SAMPLES)], haplotypes[:, :-2], np.arange(RECORDS))
    _vcf(out / "target.vcf", ["t0"], haplotypes[:, -2:], np.arange(0, RECORDS, 2))


if __name__ == "__main__":
    main()
