"""Which target samples are panel samples: by name, or by genotypes that
agree as a duplicate's would over a span long enough to tell a duplicate from
a relative sharing a region. Such samples must not copy their own panel
haplotypes, which would hand them their truth."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genimpute.io.tsv import report_rows
from genimpute.panel import Alignment, ReferencePanel

log = logging.getLogger(__name__)


# A target sample whose genotypes agree with a panel sample's at this share
# of the typed sites where either carries an alt allele, over at least
# _MIN_SITES_FOR_IDENTITY such sites, may be the same person. Unrelated 1000
# Genomes samples agree at about 45-60% of 700-900 such Omni2.5 sites of 2 Mb;
# over fewer than ~100 sites, haplotypes shared in LD make strangers look alike.
IDENTITY_CONCORDANCE = 0.98
_MIN_SITES_FOR_IDENTITY = 100
# It is decided to be the same person only when the typed sites span at least
# this much (summed over contigs): a relative, or in a large panel a stranger,
# who shares both haplotypes over a region agrees there as well as the same
# person does (on the 1 Mb simulated series, 9 of 1,002 targets agreed at
# >= 98% with one of 16,000 other samples). Over a whole chromosome such
# agreement means a duplicate, not a relative's shared segment; over less,
# the sample is only reported, and the panel sample kept as its template.
MIN_IDENTITY_SPAN_BP = 20_000_000


@dataclass(frozen=True)
class PanelMatches:
    """What was found of S target samples in the panel: by name, and the
    closest panel sample by genotypes at the typed sites (-1: none with
    _MIN_SITES_FOR_IDENTITY informative sites), its informative sites and
    the share of them where the two agree."""

    by_name: np.ndarray  # (S,) int64 panel sample of the same name, -1 none
    closest: np.ndarray  # (S,) int64
    informative: np.ndarray  # (S,) int64 sites where either carries an alt allele
    concordance: np.ndarray  # (S,) float64
    span_bp: int  # the typed sites' span, summed over contigs

    @property
    def identical(self) -> np.ndarray:
        """(S,) bool: genotypes agree with the closest panel sample's as a duplicate's would."""
        return (self.closest >= 0) & (self.concordance >= IDENTITY_CONCORDANCE)

    @property
    def decidable(self) -> bool:
        return self.span_bp >= MIN_IDENTITY_SPAN_BP

    @property
    def in_panel(self) -> np.ndarray:
        """(S,) the panel sample each target sample is, -1 for none: by name,
        else by identical genotypes when the typed sites span enough."""
        by_genotypes = np.where(self.identical & self.decidable, self.closest, -1)
        return np.where(self.by_name >= 0, self.by_name, by_genotypes)

    @property
    def possible_duplicates(self) -> np.ndarray:
        """(S,) bool: identical genotypes over too short a span to call them the same sample."""
        return (self.by_name < 0) & self.identical & (not self.decidable)

    def decision(self, s: int) -> str:
        if self.by_name[s] >= 0:
            return "same name"
        if self.identical[s]:
            return "identical genotypes" if self.decidable else "identical genotypes, span too short: kept"
        return "not in panel"


def samples_in_panel(panel: ReferencePanel, aln: Alignment, target_samples: list, block: int = 256) -> PanelMatches:
    """Each target sample's panel sample of the same name and its closest
    panel sample by genotypes at the typed sites. Target samples are compared
    `block` at a time, so the (S, N) comparisons of a cohort of thousands are
    never held at once."""
    by_name = {name: i for i, name in enumerate(panel.samples)}
    panel_haps = panel.haplotypes(aln.panel_rows).astype(np.int16)
    panel_dosage = panel_haps[:, 0::2] + panel_haps[:, 1::2]  # (T, N)
    del panel_haps
    # per panel sample and site, as float32 for matrix products (exact: counts below 2^24): alt carried, and
    # dosage 1 over dosage 2, stacked so that agreement is one product
    panel_sides = [(panel_dosage > 0).astype(np.float32),
                   np.concatenate([panel_dosage == 1, panel_dosage == 2]).astype(np.float32)]
    closest, informative, agree = (np.zeros(len(target_samples), dtype=np.int64) for _ in range(3))
    for start in range(0, len(target_samples), block):
        samples = np.arange(start, min(start + block, len(target_samples)))
        columns = np.ravel([2 * samples, 2 * samples + 1], "F")
        closest[samples], informative[samples], agree[samples] = _closest_genotypes(aln.haplotypes[:, columns],
                                                                                    *panel_sides)
    return PanelMatches(by_name=np.array([by_name.get(name, -1) for name in target_samples], dtype=np.int64),
                        closest=closest, informative=informative,
                        concordance=agree / np.maximum(informative, 1), span_bp=_typed_span(panel, aln))


def sample_audit_path(audit: str | Path) -> Path:
    """Where --report AUDIT's per-sample decisions go: AUDIT.tsv -> AUDIT.samples.tsv."""
    audit = Path(audit)
    stem = audit.name[:-len(".tsv")] if audit.name.endswith(".tsv") else audit.name
    return audit.with_name(f"{stem}.samples.tsv")


def write_sample_audit(path: Path, matches: PanelMatches, panel_samples: list, target_samples: list) -> None:
    """Per-sample TSV: what was decided of each target sample being a panel
    sample, with the closest panel sample by genotypes and the evidence."""
    header = ["sample", "decision", "panel_sample", "closest_by_genotypes", "informative_sites", "concordance",
              "typed_span_mb"]
    with report_rows(path, header) as out:
        in_panel = matches.in_panel
        for s, name in enumerate(target_samples):
            closest = matches.closest[s]
            out.writerow([name, matches.decision(s), panel_samples[in_panel[s]] if in_panel[s] >= 0 else ".",
                          panel_samples[closest] if closest >= 0 else ".", int(matches.informative[s]),
                          f"{matches.concordance[s]:.4f}", f"{matches.span_bp / 1e6:.2f}"])


def _closest_genotypes(haplotypes: np.ndarray, panel_alt, panel_het_hom) -> tuple:
    """For each of B target samples (haplotypes (T, 2B)): the panel sample
    whose genotypes agree with its own at the largest share of at least
    _MIN_SITES_FOR_IDENTITY informative sites (where either carries an alt
    allele), -1 for none; the informative sites and those agreeing with
    it. panel_alt: (T, N) float32, panel_het_hom (2T, N): dosage 1 over
    dosage 2. Three products' worth of (B, T) by (T, N), the cost that
    grows with the panel."""
    target = haplotypes.astype(np.int16)
    called = (target[:, 0::2] >= 0) & (target[:, 1::2] >= 0)  # (T, B) diploid calls
    dosage = np.where(called, target[:, 0::2] + target[:, 1::2], -1)
    # sites where either carries an alt allele: the target's own, and its called REF/REF sites where the panel
    # sample carries one; and those where both agree on it
    informative = (dosage > 0).sum(axis=0, dtype=np.float32)[:, None] + (dosage == 0).astype(np.float32).T @ panel_alt
    agree = np.concatenate([dosage == 1, dosage == 2]).astype(np.float32).T @ panel_het_hom
    share = np.where(informative >= _MIN_SITES_FOR_IDENTITY, agree / np.maximum(informative, 1), -1)
    best = np.argmax(share, axis=1)
    rows = np.arange(len(best))
    found = share[rows, best] >= 0
    return (np.where(found, best, -1), np.where(found, informative[rows, best], 0).round().astype(np.int64),
            np.where(found, agree[rows, best], 0).round().astype(np.int64))


def _typed_span(panel: ReferencePanel, aln: Alignment) -> int:
    """Base pairs from the first to the last typed site of each contig, summed."""
    contig = panel.contig_index[aln.panel_rows]
    positions = panel.positions[aln.panel_rows].astype(np.int64)
    return int(sum(positions[contig == c].max() - positions[contig == c].min() for c in np.unique(contig)))


def report_samples_in_panel(panel: ReferencePanel, aln: Alignment, target_samples: list, audit) -> PanelMatches:
    """The target samples found in the panel, whose own haplotypes would hand
    them their truth (they are left out of their context), logged; with
    `audit`, each sample's decision goes to its samples file."""
    matches = samples_in_panel(panel, aln, target_samples)
    in_panel = matches.in_panel
    shared = [f"{target_samples[s]} (= panel {panel.samples[p]})" for s, p in enumerate(in_panel) if p >= 0]
    if shared:
        log.warning("%d target samples are in the reference panel: %s; their own panel haplotypes are left out of "
                    "their context", len(shared), _first_few(shared))
    possible = [f"{target_samples[s]} (~ panel {panel.samples[matches.closest[s]]})"
                for s in np.nonzero(matches.possible_duplicates)[0]]
    if possible:
        log.warning("%d target samples have the genotypes of a panel sample at >= %.0f%% of the typed sites where "
                    "either carries an alt allele: %s; over %.1f Mb of typed sites (less than %d Mb) a relative "
                    "sharing the region agrees as well, so they are kept as templates", len(possible),
                    100 * IDENTITY_CONCORDANCE, _first_few(possible), matches.span_bp / 1e6,
                    MIN_IDENTITY_SPAN_BP // 1_000_000)
    if audit is not None:
        write_sample_audit(sample_audit_path(audit), matches, panel.samples, target_samples)
    return matches


def _first_few(names: list) -> str:
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
