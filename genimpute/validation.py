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
from genimpute.io.info_file import LOO_UNIT
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


@dataclass(frozen=True)
class HiddenSums:
    """Per hidden typed record, the sums its own empirical r2 (the info
    file's LooRsq) is computed from (genimpute.io.info_file.LOO_SUMS):
    integers, so that they add up exactly across batches of samples."""

    rows: np.ndarray  # (R,) panel records, ascending
    sums: np.ndarray  # (R, 6) int64

    def at(self, rows: np.ndarray) -> np.ndarray:
        """(V, 6) the sums of panel records `rows`, zeros where a record was not hidden."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), 6), dtype=np.int64)
        at = np.searchsorted(self.rows, rows)
        hidden = at < len(self.rows)
        hidden[hidden] = self.rows[at[hidden]] == rows[hidden]
        out[hidden] = self.sums[at[hidden]]
        return out


def record_sums(probs: np.ndarray, truth: np.ndarray, called: np.ndarray) -> np.ndarray:
    """(u, 6) int64 LOO_SUMS of u hidden records over their called diploid
    genotypes (called (u, S)): P(alt) probs (u, 2S) against the observed
    alleles truth."""
    dosage = np.where(called, probs[:, 0::2].astype(np.float64) + probs[:, 1::2], 0.0)
    observed = np.where(called, truth[:, 0::2].astype(np.int64) + truth[:, 1::2], 0)

    def units(values):
        return np.rint(values * LOO_UNIT).astype(np.int64).sum(axis=1)
    return np.stack([called.sum(axis=1), units(dosage), observed.sum(axis=1), units(dosage * dosage),
                     (observed * observed).sum(axis=1), units(dosage * observed)], axis=1)


def score(predictions, fraction: float, seed: int, masked_sites: int) -> tuple[ValidationResult, HiddenSums]:
    """Empirical r2 and concordance of the diploid calls the target has at
    the hidden sites, and each hidden record's sums, from (records, probs,
    truth) triples: u hidden panel records, P(alt) and the observed alleles
    of each (u, 2S)."""
    dosages, best_guesses, observed, rows, sums = [], [], [], [], []
    for records, probs, truth in predictions:
        called = (truth[:, 0::2] >= 0) & (truth[:, 1::2] >= 0)  # missing and haploid calls are not scored
        dosages.append((probs[:, 0::2] + probs[:, 1::2])[called])
        best_guesses.append(((probs[:, 0::2] >= 0.5).astype(int) + (probs[:, 1::2] >= 0.5))[called])  # as the output GT
        observed.append((truth[:, 0::2] + truth[:, 1::2])[called].astype(np.float64))
        rows.append(np.asarray(records, dtype=np.int64))
        sums.append(record_sums(probs, truth, called))
    observed_counts = np.concatenate(observed)  # (called genotypes,)
    r2 = pooled_r2(np.concatenate(dosages), observed_counts)
    concordance = float((np.concatenate(best_guesses) == observed_counts).mean())
    order = np.argsort(np.concatenate(rows), kind="stable")
    hidden = HiddenSums(np.concatenate(rows)[order], np.concatenate(sums)[order])
    return ValidationResult(fraction, seed, masked_sites, r2, concordance), hidden


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
) -> tuple[ValidationResult, HiddenSums]:
    """Hide typed sites (among `eligible` records), impute them with the
    model's windows, score the diploid calls the target has there (score).
    `exclude`: (2S, H) panel haplotypes each target haplotype may not have
    as context."""
    from genimpute.predict import target_window_probabilities

    masked = masked_sites(panel, typed_mask, fraction, seed, eligible)
    windows = validation_windows(panel, typed_mask, masked, wcfg, fraction)
    predictions = ((w.predicted, target_window_probabilities(model, w, panel, aln, wcfg, device, exclude),
                    aln.alleles_at(w.predicted)) for w in windows)
    return score(predictions, fraction, seed, int(masked.sum()))
