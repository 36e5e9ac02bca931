"""A run of records' calls as arrays, the sample columns of a BGEN or PGEN
output: each haplotype's probability of ALT, which calls are haploid and
which records are phased. A batch of samples' calls are spooled and joined
with the other batches' (genimpute.io.spool) as a VCF's text columns are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from genimpute.io.vcf_reader import ABSENT, MISSING


@dataclass(frozen=True)
class Calls:
    """p (V, 2S) float32: each haplotype's P(ALT), NaN at a missing call;
    haploid (V, S) bool: a call from its first haplotype alone; phased (V,)
    bool: the record's calls are phased (else each is a genotype)."""

    p: np.ndarray
    haploid: np.ndarray
    phased: np.ndarray

    @classmethod
    def imputed(cls, p: np.ndarray, haploid: np.ndarray) -> Calls:
        """Calls of panel records, phased, as the engine imputed them."""
        return cls(np.ascontiguousarray(p, dtype=np.float32), np.ascontiguousarray(haploid, dtype=bool),
                   np.ones(len(p), dtype=bool))

    @classmethod
    def of_alleles(cls, alleles: np.ndarray, phased: np.ndarray) -> Calls:
        """The hard calls of biallelic target records from their allele
        indices (V, 2S) (0, 1, MISSING, ABSENT): P(ALT) 0 or 1, NaN where
        missing; phased (V,) as the target has them."""
        missing = alleles == MISSING
        haploid = alleles[:, 1::2] == ABSENT
        p = (alleles == 1).astype(np.float32)
        call_missing = missing[:, 0::2] | missing[:, 1::2]  # a half-missing call (./1) is missing too
        p[:, 0::2][call_missing] = np.nan
        p[:, 1::2][call_missing] = np.nan
        return cls(p, haploid, np.asarray(phased, dtype=bool))

    def __len__(self) -> int:
        return len(self.p)

    @property
    def p1(self) -> np.ndarray:
        return self.p[:, 0::2]

    @property
    def p2(self) -> np.ndarray:
        return self.p[:, 1::2]

    def spooled(self) -> tuple[bytes, tuple]:
        """The calls as bytes, and what restored() needs to read them back."""
        return self.p.tobytes() + self.haploid.tobytes() + self.phased.tobytes(), self.p.shape

    @classmethod
    def restored(cls, data: bytes, shape: tuple) -> Calls:
        n_records, n_haplotypes = shape
        p_bytes, haploid_bytes = 4 * n_records * n_haplotypes, n_records * (n_haplotypes // 2)
        p = np.frombuffer(data, dtype=np.float32, count=n_records * n_haplotypes).reshape(shape)
        haploid = np.frombuffer(data, dtype=bool, count=haploid_bytes, offset=p_bytes)
        phased = np.frombuffer(data, dtype=bool, count=n_records, offset=p_bytes + haploid_bytes)
        return cls(p, haploid.reshape(n_records, n_haplotypes // 2), phased)

    @classmethod
    def side_by_side(cls, parts: list[Calls]) -> Calls:
        """The same records' calls of consecutive batches of samples, as one."""
        if len(parts) == 1:
            return parts[0]
        return cls(np.concatenate([c.p for c in parts], axis=1), np.concatenate([c.haploid for c in parts], axis=1),
                   np.logical_and.reduce([c.phased for c in parts]))
