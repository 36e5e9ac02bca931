"""Held-out panel samples as queries: the panel split into a reference of
the other samples and the held-out samples' haplotypes, whose alleles at
the typed sites are the queries and whose alleles at the untyped records
are the truth a refiner learns from and is scored on. No target sample of
any benchmark is read here."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from genimpute.panel import ReferencePanel, alt_counts, alt_frequency


@dataclass
class HeldOut:
    """A panel's held-out samples and the reference of the others."""

    reference: ReferencePanel
    samples: list  # the held-out samples' names
    haplotypes: np.ndarray  # (M, 2N) uint8 their alleles at every panel record, sample by sample


def held_out(panel: ReferencePanel, n: int, seed: int) -> HeldOut:
    """n of the panel's samples drawn with `seed`, held out of a reference
    of the others (the same records, their frequencies among the others)."""
    chosen = np.sort(np.random.default_rng(seed).choice(len(panel.samples), n, replace=False))
    held = np.zeros(len(panel.samples), dtype=bool)
    held[chosen] = True
    alleles = panel.haplotypes(np.arange(len(panel)))
    haplotype_held = np.repeat(held, 2)
    kept = np.packbits(alleles[:, ~haplotype_held], axis=1)
    reference = replace(panel, samples=[s for s, h in zip(panel.samples, held) if not h], packed=kept,
                        alt_freq=alt_frequency(alt_counts(kept), 2 * int((~held).sum())))
    return HeldOut(reference, [s for s, h in zip(panel.samples, held) if h],
                   np.ascontiguousarray(alleles[:, haplotype_held]))


def uniform_map(panel: ReferencePanel, cm_per_mb: float) -> ReferencePanel:
    """The panel with genetic positions at a uniform rate (a simulated
    panel's own rate, where no map file describes it)."""
    return replace(panel, centimorgans=panel.positions * (cm_per_mb / 1e6))
