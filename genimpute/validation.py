"""An accuracy estimate without truth data: hide some typed sites, impute
them from the remaining typed sites, and compare with the observed genotypes.

Like Minimac4's leave-one-out empirical r2, it measures typed (array) sites,
which are mostly common variants, so it is an upper guide for rarer untyped
variants rather than their r2. The imputation written to the output does not
use it: that still sees every typed site.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from genimpute.config import WindowConfig
from genimpute.errors import InputError
from genimpute.metrics import pooled_r2
from genimpute.panel import Alignment, ReferencePanel
from genimpute.windows import Window, plan_windows

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ValidationResult:
    fraction: float
    seed: int
    masked_sites: int
    empirical_r2: float  # aggregate r2 of dosage vs observed allele count, pooled over masked sites and samples
    concordance: float  # best-guess genotype equals the observed one

    def header_value(self) -> str:
        return (f"<MaskedSites={self.masked_sites},Fraction={self.fraction:g},Seed={self.seed},"
                f"EmpiricalR2={self.empirical_r2:.4f},Concordance={self.concordance:.4f}>")


def choose_masked(panel: ReferencePanel, typed_mask: np.ndarray, fraction: float, seed: int,
                  eligible: np.ndarray | None = None) -> np.ndarray:
    """(M,) bool: round(fraction x typed sites) of the typed (and eligible)
    records of each contig, at least one, chosen at random; a contig keeps
    at least one typed record unmasked, and contigs with fewer than two
    typed records are left whole."""
    if not 0 < fraction <= 0.5:
        raise ValueError(f"validation fraction must be in (0, 0.5]; found {fraction}")
    rng = np.random.default_rng(seed)
    masked = np.zeros(len(typed_mask), dtype=bool)
    candidates = typed_mask if eligible is None else typed_mask & eligible
    for contig in np.unique(panel.contig_index[candidates]):
        on_contig = panel.contig_index == contig
        rows = np.nonzero(candidates & on_contig)[0]
        n_typed = int((typed_mask & on_contig).sum())
        if n_typed < 2:
            continue
        n = min(len(rows), n_typed - 1, max(1, round(fraction * len(rows))))
        masked[rng.choice(rows, size=n, replace=False)] = True
    return masked


def validation_windows(panel: ReferencePanel, typed_mask: np.ndarray, masked: np.ndarray,
                       wcfg: WindowConfig, fraction: float) -> list[Window]:
    """Windows predicting the masked records from the unmasked typed ones.
    Masked records are sparse (fraction of the typed ones), so a block of
    them is kept small enough to span about half of the T typed records
    around it; otherwise its evidence would cover only the block's middle."""
    block = max(1, int(fraction * wcfg.typed / 2))
    return plan_windows(panel.contig_index, panel.positions, typed_mask & ~masked, block, wcfg.typed,
                        predict_mask=masked)


def score(predictions, fraction: float, seed: int, masked_sites: int) -> ValidationResult:
    """Empirical r2 and concordance of the diploid calls the target has at
    the hidden sites, from (probs, truth) pairs, each (u, 2S): P(alt) and
    the observed alleles of u hidden records."""
    dosages, best_guesses, observed = [], [], []
    for probs, truth in predictions:
        called = (truth[:, 0::2] >= 0) & (truth[:, 1::2] >= 0)  # missing and haploid calls are not scored
        dosages.append((probs[:, 0::2] + probs[:, 1::2])[called])
        best_guesses.append(((probs[:, 0::2] >= 0.5).astype(int) + (probs[:, 1::2] >= 0.5))[called])  # as the output GT
        observed.append((truth[:, 0::2] + truth[:, 1::2])[called].astype(np.float64))
    observed_counts = np.concatenate(observed)  # (called genotypes,)
    r2 = pooled_r2(np.concatenate(dosages), observed_counts)
    concordance = float((np.concatenate(best_guesses) == observed_counts).mean())
    return ValidationResult(fraction, seed, masked_sites, r2, concordance)


def masked_sites(panel: ReferencePanel, typed_mask: np.ndarray, fraction: float, seed: int,
                 eligible: np.ndarray | None = None) -> np.ndarray:
    """choose_masked, or one clear error when there is nothing to hide."""
    masked = choose_masked(panel, typed_mask, fraction, seed, eligible)
    if not masked.any():
        raise InputError("--validate: expected typed sites to hide (at least two typed sites on a contig); found none")
    return masked


def validate(
    model: torch.nn.Module,
    panel: ReferencePanel,
    aln: Alignment,
    typed_mask: np.ndarray,
    wcfg: WindowConfig,
    fraction: float,
    seed: int,
    device: torch.device,
    eligible: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
) -> ValidationResult:
    """Hide typed sites (among `eligible` records), impute them with the
    model's windows, score the diploid calls the target has there.
    `exclude`: (2S, H) panel haplotypes each target haplotype may not have
    as context."""
    from genimpute.predict import target_window_probabilities

    masked = masked_sites(panel, typed_mask, fraction, seed, eligible)
    windows = validation_windows(panel, typed_mask, masked, wcfg, fraction)
    predictions = ((target_window_probabilities(model, w, panel, aln, wcfg, device, exclude),
                    aln.alleles_at(w.predicted)) for w in windows)
    return score(predictions, fraction, seed, int(masked.sum()))
