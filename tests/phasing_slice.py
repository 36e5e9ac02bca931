"""The real slices in tests/data read as the phasing tests read them
(with cyvcf2, not genimpute's readers), at the target records the panel has."""

from dataclasses import dataclass

import cyvcf2
import numpy as np
from paths import PANEL, TARGET_PHASED, TARGET_UNPHASED


def _read(path):
    """(samples, {(pos, ref, alt): (2S,) int8 alleles}, contig) of a biallelic diploid VCF."""
    vcf = cyvcf2.VCF(str(path))
    records, contig = {}, None
    for rec in vcf:
        if len(rec.ALT) == 1:
            records[(rec.POS, rec.REF, rec.ALT[0])] = rec.genotype.array()[:, :2].reshape(-1).astype(np.int8)
            contig = rec.CHROM
    samples = list(vcf.samples)
    vcf.close()
    return samples, records, contig


@dataclass
class Slice:
    contig: str
    positions: np.ndarray
    refs: list
    alts: list
    unphased: np.ndarray  # (T, 2S) int8
    truth: np.ndarray  # (T, 2S) int8, the same genotypes phased
    ref_haps: np.ndarray  # (T, H) uint8
    samples: list
    ref_samples: list


def read_slice() -> Slice:
    """The panel, the unphased target and its phased truth at the records all three share."""
    ref_samples, panel, contig = _read(PANEL)
    samples, unphased, _ = _read(TARGET_UNPHASED)
    _, truth, _ = _read(TARGET_PHASED)
    keys = [key for key in unphased if key in panel]
    assert len(keys) > 50 and all(key in truth for key in keys)
    return Slice(
        contig=contig,
        positions=np.array([k[0] for k in keys]),
        refs=[k[1] for k in keys],
        alts=[k[2] for k in keys],
        unphased=np.stack([unphased[k] for k in keys]),
        truth=np.stack([truth[k] for k in keys]),
        ref_haps=np.stack([panel[k] for k in keys]).astype(np.uint8),
        samples=samples,
        ref_samples=ref_samples,
    )


def genotypes(haps):
    """(T, S) allele counts, -1 where a call is missing or haploid."""
    first, second = haps[:, 0::2].astype(int), haps[:, 1::2].astype(int)
    return np.where((first >= 0) & (second >= 0), first + second, -1)
