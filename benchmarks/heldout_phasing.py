"""Held-out panel samples phased at the array's sites against the rest of
the panel, as `impute` phases unphased targets (genimpute.phasing), with
the Beagle settings asked for: each setting's switch errors against the
samples' true phase, and its wall time.

    python benchmarks/heldout_phasing.py HELDOUT_DIR MAP [--iterations 12 --iterations 4 ...]
        [--beagle phase-states=140 ...] [--reference-samples N ...] [--shapeit4]
        [--genimpute "" --genimpute sampled_rounds=0,states=400 ...] [--write-phased DIR] [--missing 0.01]
        [--no-beagle] [--seed 1]

HELDOUT_DIR: a heldout_large_panel.py output directory (ref.vcf.gz, the
panel less the held-out samples; gt.vcf.gz, the held-out samples' phased
genotypes at the array's sites). The held-out genotypes lose their phase
(each heterozygous call's alleles in a seeded random order) before they are
phased; --missing F makes a seeded fraction F of their calls missing
too, as an array's no-calls (switch errors are counted at the calls
left). --reference-samples N also phases them against N of the
reference's samples (a seeded draw), with each setting; --iterations N
is Beagle's `iterations=N`, --beagle any other of its arguments (several
comma-separated); without either, iterations 12 (Beagle's default) and 4;
--no-beagle leaves Beagle out. --shapeit4 phases with shapeit4 too (one
thread, as `impute --phaser shapeit4` runs it). Each --genimpute phases
with genimpute's own phaser (genimpute.copying.phaser, as `impute
--phaser genimpute` runs it, on the map given), with those
PhasingSettings fields ("": the defaults); its wall includes loading
numba's compiled code. --write-phased DIR writes each phasing of the
whole reference as DIR/beagle.SETTING.vcf.gz (SETTING the arguments without
`=`, as iterations4; DIR/shapeit4.vcf.gz; DIR/genimpute.SETTINGS.vcf.gz,
SETTINGS the fields without `=` and `,`, or `defaults`), gt.vcf.gz's
records with the phaser's genotypes, for `genimpute impute` and
paired_errors.py to score downstream. No target of the scale series is
used, so settings may be chosen here.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import time
from pathlib import Path

import numpy as np
import pysam
from cyvcf2 import VCF

import genimpute.phasing as phasing
from genimpute.config import PhasingSettings
from genimpute.copying.phaser import phase_targets
from genimpute.io.genetic_map import centimorgans, read_map


def read_haplotypes(path: str, keys: list | None = None) -> tuple[list, np.ndarray, list, list, list]:
    """(keys (pos, ref, alt) of the records read, (T, 2S) alleles, positions,
    refs, alts) of a phased VCF's biallelic records; only those in `keys` if given."""
    wanted = None if keys is None else set(keys)
    found, rows = [], []
    for v in VCF(path):
        key = (v.POS, v.REF, v.ALT[0])
        if len(v.ALT) != 1 or (wanted is not None and key not in wanted):
            continue
        found.append(key)
        rows.append(v.genotype.array()[:, :2].astype(np.int8).reshape(-1))
    return found, np.array(rows), [k[0] for k in found], [k[1] for k in found], [k[2] for k in found]


def unphased(haps: np.ndarray, seed: int) -> np.ndarray:
    """haps with the two alleles of every call swapped with probability 1/2."""
    swap = np.random.default_rng(seed).random((haps.shape[0], haps.shape[1] // 2)) < 0.5
    out = haps.copy()
    out[:, 0::2] = np.where(swap, haps[:, 1::2], haps[:, 0::2])
    out[:, 1::2] = np.where(swap, haps[:, 0::2], haps[:, 1::2])
    return out


def with_missing(haps: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """haps with both alleles of each call missing (-1) with probability `fraction`."""
    missing = np.random.default_rng(seed + 1).random((haps.shape[0], haps.shape[1] // 2)) < fraction
    return np.where(np.repeat(missing, 2, axis=1), np.int8(-1), haps).astype(haps.dtype)


def write_phased(source: str, phased: np.ndarray, path: Path) -> None:
    """source's (a phased VCF's) header and records, each record's genotypes
    those of phased (T, 2S; `.` where missing), bgzipped and indexed at path."""
    with gzip.open(source, "rt") as lines, pysam.BGZFile(str(path), "wb") as out:
        i = 0
        for line in lines:
            if not line.startswith("#"):
                fields = line.rstrip("\n").split("\t")
                row = phased[i]
                alleles = np.where(row < 0, ".", row.astype(str))
                fields[9:] = [f"{alleles[2 * s]}|{alleles[2 * s + 1]}" for s in range(len(fields) - 9)]
                line, i = "\t".join(fields) + "\n", i + 1
            out.write(line.encode())
    if i != len(phased):
        raise SystemExit(f"{source}: expected {len(phased)} records; found {i}")
    pysam.tabix_index(str(path), preset="vcf", force=True)


def phased_with(settings: list, *args, **kwargs) -> tuple[np.ndarray, float]:
    """(phase_haplotypes(*args, **kwargs) with Beagle given the extra arguments `settings`, wall seconds)."""
    command = phasing._command

    def with_settings(*a, **k):
        cmd, out = command(*a, **k)
        return cmd + settings, out

    phasing._command = with_settings
    try:
        started = time.monotonic()
        return phasing.phase_haplotypes(*args, **kwargs), time.monotonic() - started
    finally:
        phasing._command = command


def settings_of(text: str) -> PhasingSettings:
    """The PhasingSettings `text` (comma-separated FIELD=VALUE) names, the others their defaults."""
    given = dict(field.split("=", 1) for field in text.split(",") if field)
    types = {f.name: type(f.default) for f in dataclasses.fields(PhasingSettings)}
    unknown = [name for name in given if name not in types]
    if unknown:
        raise SystemExit(f"--genimpute: expected fields of PhasingSettings; found {', '.join(unknown)}")
    return PhasingSettings(**{name: types[name](value) for name, value in given.items()})


def genimpute_phased(text: str, query: np.ndarray, ref_haps: np.ndarray, contig: str, positions: list,
                     genetic_map: str) -> tuple[np.ndarray, float]:
    """(query phased by genimpute's own phaser with the settings `text` names, wall seconds)."""
    settings = settings_of(text)
    cm = centimorgans(np.array(positions), *read_map(genetic_map, contig))
    started = time.monotonic()
    phased = phase_targets(query, np.packbits(ref_haps.astype(np.uint8), axis=1), ref_haps.shape[1], None, cm, settings)
    return phased, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("heldout_dir")
    parser.add_argument("map")
    parser.add_argument("--iterations", type=int, action="append", default=[], help="Beagle's phasing iterations")
    parser.add_argument("--beagle", action="append", default=[],
                        help="other Beagle arguments, comma-separated (phase-states=140)")
    parser.add_argument("--reference-samples", type=int, action="append", default=[],
                        help="also phase against this many of the reference's samples")
    parser.add_argument("--no-beagle", action="store_true", help="do not phase with Beagle")
    parser.add_argument("--shapeit4", action="store_true", help="also phase with shapeit4")
    parser.add_argument("--genimpute", action="append", default=[],
                        help="also phase with genimpute's own phaser, these settings (FIELD=VALUE,...; '': defaults)")
    parser.add_argument("--write-phased", type=Path, help="write each phasing of the whole reference here")
    parser.add_argument("--missing", type=float, default=0.0, help="fraction of the held-out calls made missing")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.write_phased:
        args.write_phased.mkdir(parents=True, exist_ok=True)
    keys, truth, positions, refs, alts = read_haplotypes(f"{args.heldout_dir}/gt.vcf.gz")
    ref_keys, ref_haps, *_ = read_haplotypes(f"{args.heldout_dir}/ref.vcf.gz", keys)
    if ref_keys != keys:
        raise SystemExit(f"expected the reference to hold the {len(keys)} held-out records; found {len(ref_keys)}")
    samples = VCF(f"{args.heldout_dir}/gt.vcf.gz").samples
    ref_samples = VCF(f"{args.heldout_dir}/ref.vcf.gz").samples
    query = with_missing(unphased(truth, args.seed), args.missing, args.seed)
    print(f"{len(samples)} held-out samples, {len(ref_samples)} reference samples, {len(keys)} records, "
          f"{(query[:, 0::2] < 0).mean():.2%} of calls missing")
    contig = next(iter(VCF(f"{args.heldout_dir}/gt.vcf.gz"))).CHROM  # the header may name other contigs first
    settings = [[f"iterations={n}"] for n in args.iterations] + [text.split(",") for text in args.beagle]
    settings = [] if args.no_beagle else settings or [["iterations=12"], ["iterations=4"]]
    for n_reference in [len(ref_samples), *args.reference_samples]:
        drawn = np.sort(np.random.default_rng(args.seed).choice(len(ref_samples), n_reference, replace=False))
        columns = np.stack([2 * drawn, 2 * drawn + 1], axis=1).reshape(-1)
        for setting in settings:
            phased, seconds = phased_with(setting, "beagle", query, ref_haps[:, columns].astype(np.uint8), contig,
                                          np.array(positions), refs, alts, samples,
                                          [ref_samples[i] for i in drawn], genetic_map=args.map)
            switches, opportunities = phasing.switch_errors(phased, truth)
            if args.write_phased and n_reference == len(ref_samples):
                write_phased(f"{args.heldout_dir}/gt.vcf.gz", phased,
                             args.write_phased / f"beagle.{'_'.join(setting).replace('=', '')}.vcf.gz")
            print(f"beagle {' '.join(setting)}, {n_reference} reference samples: switch errors {switches} of "
                  f"{opportunities} ({100 * switches / max(1, opportunities):.3f}%), {seconds:.1f} s")
    if args.shapeit4:
        started = time.monotonic()
        phased = phasing.phase_haplotypes("shapeit4", query, ref_haps.astype(np.uint8), contig, np.array(positions),
                                          refs, alts, samples, ref_samples, genetic_map=args.map)
        switches, opportunities = phasing.switch_errors(phased, truth)
        if args.write_phased:
            write_phased(f"{args.heldout_dir}/gt.vcf.gz", phased, args.write_phased / "shapeit4.vcf.gz")
        print(f"shapeit4: switch errors {switches} of {opportunities} "
              f"({100 * switches / max(1, opportunities):.3f}%), {time.monotonic() - started:.1f} s")
    for text in args.genimpute:
        phased, seconds = genimpute_phased(text, query, ref_haps, contig, positions, args.map)
        switches, opportunities = phasing.switch_errors(phased, truth)
        if args.write_phased:
            name = text.replace("=", "").replace(",", "_") or "defaults"
            write_phased(f"{args.heldout_dir}/gt.vcf.gz", phased, args.write_phased / f"genimpute.{name}.vcf.gz")
        print(f"genimpute {text or 'defaults'}: switch errors {switches} of {opportunities} "
              f"({100 * switches / max(1, opportunities):.3f}%), {seconds:.1f} s")


if __name__ == "__main__":
    main()
