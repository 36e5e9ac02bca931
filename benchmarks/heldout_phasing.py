"""Held-out panel samples phased at the array's sites against the rest of
the panel, as `impute` phases unphased targets (genimpute.phasing), with
Beagle's phasing iterations asked for: each count's switch errors against
the samples' true phase, and its wall time.

    python benchmarks/heldout_phasing.py HELDOUT_DIR MAP [--iterations 12 --iterations 4 ...]
        [--reference-samples N ...] [--shapeit4] [--seed 1]

HELDOUT_DIR: a heldout_large_panel.py output directory (ref.vcf.gz, the
panel less the held-out samples; gt.vcf.gz, the held-out samples' phased
genotypes at the array's sites). The held-out genotypes lose their phase
(each heterozygous call's alleles in a seeded random order) before they are
phased. --reference-samples N also phases them against N of the
reference's samples (a seeded draw), at each iteration count; --shapeit4
with shapeit4 too (one thread, as `impute --phaser shapeit4` runs it). No
target of the scale series is used, so settings may be chosen here.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from cyvcf2 import VCF

import genimpute.phasing as phasing


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


def phased_with(iterations: int, *args, **kwargs) -> tuple[np.ndarray, float]:
    """(phase_haplotypes(*args, **kwargs) with Beagle's phasing iterations set, wall seconds)."""
    rule = phasing.beagle_iterations
    phasing.beagle_iterations = lambda n_reference_samples: iterations
    try:
        started = time.monotonic()
        return phasing.phase_haplotypes(*args, **kwargs), time.monotonic() - started
    finally:
        phasing.beagle_iterations = rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("heldout_dir")
    parser.add_argument("map")
    parser.add_argument("--iterations", type=int, action="append", help="Beagle's phasing iterations "
                        "(default: 12, Beagle's own default, and 4)")
    parser.add_argument("--reference-samples", type=int, action="append", default=[],
                        help="also phase against this many of the reference's samples")
    parser.add_argument("--shapeit4", action="store_true", help="also phase with shapeit4")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    keys, truth, positions, refs, alts = read_haplotypes(f"{args.heldout_dir}/gt.vcf.gz")
    ref_keys, ref_haps, *_ = read_haplotypes(f"{args.heldout_dir}/ref.vcf.gz", keys)
    if ref_keys != keys:
        raise SystemExit(f"expected the reference to hold the {len(keys)} held-out records; found {len(ref_keys)}")
    samples = VCF(f"{args.heldout_dir}/gt.vcf.gz").samples
    ref_samples = VCF(f"{args.heldout_dir}/ref.vcf.gz").samples
    query = unphased(truth, args.seed)
    print(f"{len(samples)} held-out samples, {len(ref_samples)} reference samples, {len(keys)} records")
    contig = VCF(f"{args.heldout_dir}/gt.vcf.gz").seqnames[0]
    for n_reference in [len(ref_samples), *args.reference_samples]:
        drawn = np.sort(np.random.default_rng(args.seed).choice(len(ref_samples), n_reference, replace=False))
        columns = np.stack([2 * drawn, 2 * drawn + 1], axis=1).reshape(-1)
        for iterations in args.iterations or [12, 4]:
            phased, seconds = phased_with(iterations, "beagle", query, ref_haps[:, columns].astype(np.uint8), contig,
                                          np.array(positions), refs, alts, samples,
                                          [ref_samples[i] for i in drawn], genetic_map=args.map)
            switches, opportunities = phasing.switch_errors(phased, truth)
            print(f"beagle iterations={iterations}, {n_reference} reference samples: switch errors {switches} of "
                  f"{opportunities} ({100 * switches / max(1, opportunities):.3f}%), {seconds:.1f} s")
    if args.shapeit4:
        started = time.monotonic()
        phased = phasing.phase_haplotypes("shapeit4", query, ref_haps.astype(np.uint8), contig, np.array(positions),
                                          refs, alts, samples, ref_samples, genetic_map=args.map)
        switches, opportunities = phasing.switch_errors(phased, truth)
        print(f"shapeit4: switch errors {switches} of {opportunities} "
              f"({100 * switches / max(1, opportunities):.3f}%), {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
