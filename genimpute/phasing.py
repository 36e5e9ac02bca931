"""Phasing unphased targets against the reference panel with an external
phaser (Beagle 5.4 or shapeit4, both in Debian), at the typed sites only.

The phaser sees the panel's haplotypes and the target's genotypes as small
temporary VCFs in the panel's allele coding; only the order of the alleles of
heterozygous calls is taken back from it. Missing calls stay missing (genimpute
imputes them itself), haploid calls stay haploid.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from genimpute.config import PHASERS
from genimpute.errors import InputError
from genimpute.io.vcf_reader import ABSENT, MISSING, open_vcf

log = logging.getLogger(__name__)

_INSTALL = {"beagle": "Debian: apt-get install beagle", "shapeit4": "Debian: apt-get install shapeit4"}


def find_phaser(requested: str = "auto") -> str:
    """'auto': the first of PHASERS on PATH; a named one must be on PATH."""
    if requested != "auto" and requested not in PHASERS:
        raise InputError(f"--phaser: expected auto or one of {', '.join(PHASERS)}; found {requested}")
    for tool in PHASERS if requested == "auto" else (requested,):
        if shutil.which(tool):
            return tool
    wanted = " or ".join(PHASERS) if requested == "auto" else requested
    hints = "; ".join(_INSTALL[t] for t in PHASERS if requested in ("auto", t))
    raise InputError(f"the target is unphased and needs phasing: expected {wanted} on PATH; found none ({hints})")


def _genotype_strings(haps: np.ndarray, phased: bool) -> np.ndarray:
    """(T, S) VCF GT strings from (T, 2S) allele codes."""
    text = np.where(haps == MISSING, ".", haps.astype(str)).astype(object)
    first, second = text[:, 0::2], text[:, 1::2]
    diploid = first + ("|" if phased else "/") + second
    return np.where(haps[:, 1::2] == ABSENT, first, diploid)


def _write_vcf(path: Path, contig: str, positions, refs, alts, samples, genotypes: np.ndarray) -> None:
    import pysam

    lines = ["##fileformat=VCFv4.2", f"##contig=<ID={contig}>",
             '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
             "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT", *samples])]
    lines += ["\t".join([contig, str(pos), f"site{i}", ref, alt, ".", "PASS", ".", "GT", *row])
              for i, (pos, ref, alt, row) in enumerate(zip(positions, refs, alts, genotypes.tolist()))]
    with pysam.BGZFile(str(path), "wb") as handle:
        handle.write(("\n".join(lines) + "\n").encode())
    pysam.tabix_index(str(path), preset="vcf", force=True)


def _command(tool: str, ref: Path, gt: Path, out_prefix: Path, contig: str, threads: int, genetic_map) -> tuple[list, Path]:
    if tool == "beagle":
        cmd = ["beagle", f"ref={ref}", f"gt={gt}", f"out={out_prefix}", "impute=false", f"nthreads={threads}"]
        return cmd + ([f"map={genetic_map}"] if genetic_map else []), Path(f"{out_prefix}.vcf.gz")
    out = Path(f"{out_prefix}.vcf.gz")
    cmd = ["shapeit4", "--input", str(gt), "--reference", str(ref), "--region", contig, "--output", str(out),
           "--thread", str(threads), "--log", f"{out_prefix}.log"]
    return cmd + (["--map", str(genetic_map)] if genetic_map else []), out


def phase_haplotypes(tool: str, haps: np.ndarray, ref_haps: np.ndarray, contig: str, positions: np.ndarray,
                     refs: list, alts: list, samples: list, ref_samples: list, threads: int | None = None,
                     genetic_map: str | None = None) -> np.ndarray:
    """(T, 2S) target alleles of one contig with heterozygous calls phased.

    haps:     (T, 2S) int8 panel-coded alleles (0/1, MISSING, ABSENT)
    ref_haps: (T, H) uint8 phased panel haplotypes at the same records
    """
    threads = threads or os.cpu_count() or 1
    # sample names must be unique across both files: the target's are replaced by their order
    target_names = [f"target{i}" for i in range(len(samples))]
    with tempfile.TemporaryDirectory(prefix="genimpute_phase_") as tmp:
        tmp = Path(tmp)
        _write_vcf(tmp / "ref.vcf.gz", contig, positions, refs, alts, ref_samples, _genotype_strings(ref_haps, True))
        _write_vcf(tmp / "gt.vcf.gz", contig, positions, refs, alts, target_names, _genotype_strings(haps, False))
        cmd, out = _command(tool, tmp / "ref.vcf.gz", tmp / "gt.vcf.gz", tmp / "phased", contig, threads, genetic_map)
        log.info("phasing: %s", " ".join(cmd))
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0 or not out.exists():
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
            raise InputError(f"{tool} failed to phase the target (exit {result.returncode}):\n{tail}")
        phased_by_position = _read_phased(out, target_names)
    missing = [int(p) for p in positions if int(p) not in phased_by_position]
    if missing:
        raise InputError(f"{tool} dropped {len(missing)} of {len(positions)} records while phasing "
                         f"(first at {contig}:{missing[0]})")
    phased = np.stack([phased_by_position[int(p)] for p in positions])
    # take only the order of called heterozygous alleles from the phaser
    first, second = haps[:, 0::2], haps[:, 1::2]
    het = (first >= 0) & (second >= 0) & (first != second)
    out = haps.copy()
    out[:, 0::2] = np.where(het, phased[:, 0::2], first)
    out[:, 1::2] = np.where(het, phased[:, 1::2], second)
    return out


def _read_phased(path: Path, samples: list) -> dict:
    """{position: (2S,) alleles} of the phaser's output, samples in `samples` order."""
    import pysam

    pysam.tabix_index(str(path), preset="vcf", force=True)  # names the contigs shapeit4's header leaves out
    vcf = open_vcf(path)
    order = [list(vcf.samples).index(s) for s in samples]
    by_position = {}
    for rec in vcf:
        gts = rec.genotype.array()[order]
        alleles = np.full((len(order), 2), ABSENT, dtype=np.int8)
        alleles[:, : min(2, gts.shape[1] - 1)] = gts[:, : min(2, gts.shape[1] - 1)]
        by_position[rec.POS] = alleles.reshape(-1)
    vcf.close()
    return by_position


def switch_errors(phased: np.ndarray, truth: np.ndarray) -> tuple[int, int]:
    """(switches, opportunities) of (T, 2S) phased haplotypes against the true
    ones: a switch is a heterozygous call whose phase relative to the
    sample's previous heterozygous call differs from the truth."""
    switches = opportunities = 0
    for s in range(truth.shape[1] // 2):
        het = truth[:, 2 * s] != truth[:, 2 * s + 1]
        flipped = phased[het, 2 * s] != truth[het, 2 * s]
        switches += int((flipped[1:] != flipped[:-1]).sum())
        opportunities += max(0, int(het.sum()) - 1)
    return switches, opportunities
